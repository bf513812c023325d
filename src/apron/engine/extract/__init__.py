"""Read a vLLM release's facts from its Python sources with `ast`, never importing them.

`extract_facts(source)` returns the facts document described in docs/engine-facts.md. Parsing every
file is most of the time, so it is spread over worker processes; everything after that works on
small per-file summaries plus the handful of files a section reads in full.
"""

from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from apron.engine.extract import attention, defaults, parsers, profiling, quant, registry
from apron.engine.extract.context import Context
from apron.engine.extract.index import PackageIndex
from apron.engine.extract.mirrored import MIRRORED_PATTERNS
from apron.engine.extract.scan import Unresolved, scan_source
from apron.engine.extract.static import NotStatic
from apron.engine.facts import FACTS_SCHEMA
from apron.engine.source import EngineSource
from apron.errors import BadInput, Failed

# Bump when the extractor's output changes for the same wheel; the facts record it.
EXTRACTOR_VERSION = "2"
REQUIRED_FILES = (registry.REGISTRY_FILE, defaults.CACHE_FILE, defaults.ARG_UTILS_FILE)
_IN_PROCESS_BELOW = 200  # files; a pool costs more than it saves on small trees (the tests)


ReadText = Callable[[str], str]
# A file's scan, or why it could not be read.
ScanResult = tuple[str, dict[str, Any] | str]


def _scan_chunk(kind: str, root: str, paths: list[str], patterns: list[tuple[str, str | None]]) -> list[ScanResult]:
    source = EngineSource(kind, Path(root), from_user=True)
    reader = source.reader()
    out: list[ScanResult] = []
    collecting = gc.isenabled()
    gc.disable()  # syntax trees are acyclic and short-lived: collection passes only cost time here
    try:
        for path in paths:
            text = reader.read_text(path)
            try:
                out.append((path, scan_source(path, text, patterns)))
            except SyntaxError as exc:
                out.append((path, f"line {exc.lineno}: {exc.msg}"))
            except (RecursionError, ValueError) as exc:
                out.append((path, f"{type(exc).__name__}: {exc}"))
    finally:
        reader.close()
        if collecting:
            gc.enable()
    return out


def scan_all(source: EngineSource, paths: list[str], jobs: int | None) -> dict[str, dict[str, Any]]:
    jobs = max(1, jobs or os.cpu_count() or 1)
    args = (source.kind, str(source.root))
    if jobs == 1 or len(paths) < _IN_PROCESS_BELOW:
        results = _scan_chunk(*args, paths, MIRRORED_PATTERNS)
    else:
        chunks = [paths[i :: jobs * 4] for i in range(jobs * 4)]
        try:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(_scan_chunk, *args, chunk, MIRRORED_PATTERNS) for chunk in chunks]
                results = [item for future in futures for item in future.result()]
        except BrokenProcessPool:
            raise Failed(
                f"a parser process died reading {source.root.name} (out of memory?); nothing written; "
                f"run again with --jobs 1"
            ) from None
    scans: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    for path, result in results:
        if isinstance(result, str):
            errors.append(f"vllm/{path} ({result})")
        else:
            scans[path] = result
    if errors:
        errors.sort()
        more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
        cls = BadInput if source.from_user else Failed
        raise cls(
            f"{source.root.name}: vllm/{errors[0][5:]} does not parse{more}; nothing written "
            f"(this extractor reads Python {sys.version_info.major}.{sys.version_info.minor} "
            f"syntax; a newer Python may be needed)"
        )
    return {path: scans[path] for path in sorted(scans)}


def _version(source: EngineSource, metadata: dict[str, Any], read_text: ReadText) -> str:
    if metadata.get("Version"):
        return str(metadata["Version"][0]).strip()
    try:
        text = read_text("_version.py")
    except (KeyError, OSError):
        text = ""
    match = re.search(r"__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", text)
    if match:
        return match.group(1)
    raise BadInput(
        f"{source.root}: cannot tell the vLLM version (no dist-info METADATA and no "
        f"vllm/_version.py); use a wheel or an unpacked wheel with its .dist-info folder"
    )


def _pins(metadata: dict[str, Any]) -> dict[str, Any]:
    pins: dict[str, str | None] = {"torch": None, "transformers": None}
    for requirement in metadata.get("Requires-Dist", []):
        name = re.match(r"[A-Za-z0-9_.\-]+", requirement.strip())
        key = name.group(0).lower() if name else ""
        if key in pins and pins[key] is None and "extra ==" not in requirement:
            pins[key] = requirement.strip()
    return pins


def _log_and_refusal_lists(
    scans: dict[str, dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    logs: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    counts = {"log_calls_unresolved": 0, "raises_unresolved": 0}
    for path, scan in scans.items():
        logs.extend({"file": path, "function": f, "level": lvl, "format": fmt} for f, lvl, fmt in scan["logs"])
        refusals.extend(
            {"file": path, "function": f, "exception": exc, "template": text} for f, exc, text in scan["refusals"]
        )
        counts["log_calls_unresolved"] += scan["unresolved_logs"]
        counts["raises_unresolved"] += scan["unresolved_refusals"]
    return logs, refusals, counts


def _mirrored(scans: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {f"{path}:{qual}": digest for path, scan in scans.items() for qual, digest in scan["functions"].items()}


def _section(ctx: Context, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (NotStatic, KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        ctx.gap(f"{name}: not statically resolvable ({type(exc).__name__}: {str(exc)[:160]})")
        return None


def extract_facts(
    source: EngineSource,
    say: Callable[[str], None] = lambda _: None,
    expected_version: str | None = None,
    jobs: int | None = None,
) -> dict[str, Any]:
    paths = source.list_py()
    present = set(paths)
    missing = [f"vllm/{p}" for p in REQUIRED_FILES if p not in present]
    if missing:
        cls = BadInput if source.from_user else Failed
        raise cls(
            f"{source.root.name}: no {', '.join(missing)}; not a vLLM release this extractor "
            f"knows (it reads vLLM 0.29 and later); nothing written"
        )
    reader = source.reader()
    try:
        metadata = source.metadata()
        version = _version(source, metadata, reader.read_text)
        if expected_version and version != expected_version:
            raise Failed(f"{source.root.name} says it is vllm {version}, not {expected_version}; nothing written")
        say(f"parsing {len(paths)} Python files of vllm {version}")
        scans = scan_all(source, paths, jobs)
        say("reading registries, defaults, quantization, attention backends and parsers")
        facts = _assemble(source, metadata, version, scans, reader.read_text)
    finally:
        reader.close()
    return facts


def _registry(source: EngineSource, ctx: Context) -> dict[str, Any]:
    """The registry is the one section a facts file cannot do without: no static registry, no file."""
    tree = ctx.tree(registry.REGISTRY_FILE)
    try:
        if tree is None:
            raise NotStatic(f"{registry.REGISTRY_FILE} missing")
        section, gaps = registry.extract_registry(tree, ctx.index)
    except (NotStatic, KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        cls = BadInput if source.from_user else Failed
        raise cls(
            f"{source.root.name}: vllm/{registry.REGISTRY_FILE} has no registry this extractor can read "
            f"statically ({exc}); nothing written"
        ) from None
    ctx.gaps.extend(gaps)
    return section


def _missing_mirrored(mirrored: dict[str, str]) -> list[str]:
    """Exact (glob-free) mirrored names that no file defines: the planner's copy has no original."""
    found = {key.partition(":")[2].partition("#")[0] for key in mirrored}
    return [
        f"mirrored function {qual} not found" for qual, _ in MIRRORED_PATTERNS if "*" not in qual and qual not in found
    ]


def _assemble(
    source: EngineSource, metadata: dict[str, Any], version: str, scans: dict[str, Any], read_text: ReadText
) -> dict[str, Any]:
    index = PackageIndex(scans)
    ctx = Context(read_text, index)
    registry_section = _registry(source, ctx)
    priority = _section(ctx, "backend_priority", attention.extract_priority, ctx) or (None, None)
    logs, refusals, counts = _log_and_refusal_lists(scans)
    if not metadata:
        ctx.gap("pins: no dist-info METADATA in this source")
    facts = {
        "schema": FACTS_SCHEMA,
        "extractor_version": EXTRACTOR_VERSION,
        "engine": "vllm",
        "version": version,
        "source": {"kind": source.kind, "filename": source.root.name, "sha256": source.sha256()},
        "pins": _pins(metadata),
        "registry": registry_section,
        "config_hooks": _section(ctx, "config_hooks", _config_hooks, ctx),
        "defaults": defaults.extract_defaults(ctx),
        "quantization": _section(ctx, "quantization", quant.extract_quantization, ctx),
        "attention_backends": _section(ctx, "attention_backends", attention.extract_backends, ctx),
        "backend_priority": priority[0],
        "backend_priority_conditional": priority[1],
        "parsers": _section(ctx, "parsers", parsers.extract_parsers, ctx) or {"reasoning": None, "tool": None},
        "tokenizer": _section(ctx, "tokenizer", parsers.extract_tokenizer, ctx)
        or {"modes": None, "literal": None, "arch_defaults": None},
        "log_formats": logs,
        "refusals": refusals,
        "mirrored_functions": _mirrored(scans),
        "profiling": _section(ctx, "profiling", profiling.extract_profiling, ctx),
    }
    counts.update(
        {
            "py_files": len(scans),
            "log_formats": len(logs),
            "refusals": len(refusals),
            "architectures": len(registry_section["architectures"]),
        }
    )
    facts["counts"] = counts
    facts["gaps"] = sorted(set(ctx.gaps + _missing_mirrored(facts["mirrored_functions"])))
    out: dict[str, Any] = jsonable(facts)
    return out


def _config_hooks(ctx: Context) -> dict[str, Any]:
    tree = ctx.tree(registry.CONFIG_HOOKS_FILE)
    if tree is None:
        raise NotStatic(f"{registry.CONFIG_HOOKS_FILE} missing")
    return registry.extract_config_hooks(tree)


def jsonable(value: Any) -> Any:
    """Facts as plain JSON: unresolved values become null, dict keys strings."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Unresolved) or value is Ellipsis or isinstance(value, (bytes, complex)):
        return None
    if isinstance(value, float) and value != value:
        return None
    return value


__all__ = ["extract_facts", "FACTS_SCHEMA", "EXTRACTOR_VERSION"]
