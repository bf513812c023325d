"""`apron engine sync`: fetch a release, extract its facts, write them atomically and deterministically."""

from __future__ import annotations

import gzip
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apron.engine.extract import extract_facts
from apron.engine.facts import core_bytes, core_path
from apron.engine.source import EngineSource, download_wheel, open_local, parse_spec
from apron.frozen import frozen
from apron.paths import write_atomic


@frozen
class SyncResult:
    version: str
    path: Path
    facts: dict[str, Any]
    extract_seconds: float
    download_seconds: float


def facts_bytes(facts: dict[str, Any]) -> bytes:
    """The facts file's bytes: sorted keys, compact JSON, gzip with no name or time stamp, so the
    same input always gives the same bytes."""
    text = json.dumps(facts, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as handle:
        handle.write(text.encode("utf-8"))
    return buffer.getvalue()


def facts_path(out_dir: Path, version: str) -> Path:
    return out_dir / f"vllm-{version}.json.gz"


def write_facts(facts: dict[str, Any], out_dir: Path) -> Path:
    """The facts file and its core companion, each written whole."""
    path = facts_path(out_dir, facts["version"])
    write_atomic(path, facts_bytes(facts))
    write_atomic(Path(core_path(path)), core_bytes(facts))
    path.with_suffix("").with_suffix(".json").unlink(missing_ok=True)  # an older uncompressed copy would shadow it
    return path


def resolve_source(spec: str, wheel_dir: Path, say: Callable[[str], None]) -> tuple[EngineSource, str | None]:
    """(source, the version the spec pins or None for a local path)."""
    version = parse_spec(spec)
    if version is not None:
        wheel = download_wheel(version, wheel_dir, say)
        return EngineSource("wheel", wheel, from_user=False), version
    return open_local(Path(spec).expanduser()), None


def sync(
    spec: str, out_dir: Path | None = None, say: Callable[[str], None] = lambda _: None, jobs: int | None = None
) -> SyncResult:
    from apron.paths import cache_dir, engine_facts_dir

    started = time.perf_counter()
    source, version = resolve_source(spec, cache_dir() / "wheels", say)
    downloaded = time.perf_counter()
    facts = extract_facts(source, say=say, expected_version=version, jobs=jobs)
    path = write_facts(facts, out_dir or engine_facts_dir())
    finished = time.perf_counter()
    say(
        f"wrote {path} ({len(facts['registry']['architectures'])} architectures, "
        f"{finished - downloaded:.1f} s to extract)"
    )
    return SyncResult(facts["version"], path, facts, finished - downloaded, downloaded - started)
