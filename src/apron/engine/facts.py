"""Load an engine facts file and answer the planner's questions from it.

The files are written by `apron engine sync` (see docs/engine-facts.md); shipped ones live in
`apron/engine/data/`, synced ones in Apron's cache folder. Nothing here hard-codes an engine default.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from apron.errors import BadInput

FACTS_SCHEMA = "apron.engine-facts/1"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])


@dataclass(frozen=True)
class EngineFacts:
    data: dict

    @property
    def version(self) -> str:
        return self.data["version"]

    @property
    def version_key(self) -> tuple[int, ...]:
        return _version_key(self.version)

    def at_least(self, version: str) -> bool:
        return self.version_key >= _version_key(version)

    @property
    def defaults(self) -> dict:
        return self.data["defaults"]

    @property
    def architectures(self) -> dict[str, dict]:
        return self.data["registry"]["architectures"]

    def architecture(self, arch: str) -> dict | None:
        return self.architectures.get(arch)

    def previously_supported(self, arch: str) -> str | None:
        return self.data["registry"].get("previously_supported", {}).get(arch)

    def out_of_tree(self, arch: str) -> str | None:
        return self.data["registry"].get("out_of_tree", {}).get(arch)

    def quantization(self, method: str) -> dict | None:
        return self.data.get("quantization", {}).get(method)

    @property
    def reasoning_parsers(self) -> dict[str, dict]:
        return self.data.get("parsers", {}).get("reasoning", {})

    @property
    def tool_parsers(self) -> dict[str, dict]:
        return self.data.get("parsers", {}).get("tool", {})

    def env_default(self, name: str, fallback=None):
        return self.defaults.get("env", {}).get(name, fallback)


def facts_dirs() -> list[Path]:
    """Synced facts (cache) first, then the shipped ones."""
    from apron.paths import engine_facts_dir

    return [engine_facts_dir()]


@lru_cache(maxsize=None)
def _shipped_files() -> dict[str, str]:
    root = resources.files("apron.engine").joinpath("data")
    out = {}
    for entry in root.iterdir():
        match = re.fullmatch(r"vllm-(.+)\.json", entry.name)
        if match:
            out[match.group(1)] = entry.name
    return out


def _synced_files() -> dict[str, Path]:
    out = {}
    for folder in facts_dirs():
        if folder.is_dir():
            for path in folder.glob("vllm-*.json"):
                out.setdefault(path.name[5:-5], path)
    return out


def known_versions() -> list[str]:
    versions = set(_shipped_files()) | set(_synced_files())
    return sorted(versions, key=_version_key)


@lru_cache(maxsize=None)
def _load(version: str, path: str | None) -> EngineFacts:
    if path is not None:
        text = Path(path).read_text()
    else:
        text = resources.files("apron.engine").joinpath("data", _shipped_files()[version]).read_text()
    data = json.loads(text)
    if data.get("schema") != FACTS_SCHEMA:
        raise BadInput(f"engine facts for vllm {version}: schema {data.get('schema')!r} is not "
                       f"{FACTS_SCHEMA}; run `apron engine sync vllm=={version}` again")
    return EngineFacts(data)


def load_facts(version: str) -> EngineFacts:
    version = version.removeprefix("v")
    synced = _synced_files()
    if version in synced:
        return _load(version, str(synced[version]))
    if version in _shipped_files():
        return _load(version, None)
    known = ", ".join(known_versions()) or "none"
    raise BadInput(f"--engine vllm=={version}: no facts for this release (known: {known}); run "
                   f"`apron engine sync vllm=={version}` first")


def parse_engine_spec(spec: str) -> str:
    """`vllm==0.30.0` or `0.30.0` -> `0.30.0`."""
    match = re.fullmatch(r"(?:vllm\s*==\s*)?v?(\d+\.\d+(?:\.\d+)?(?:[.\w+-]*)?)", spec.strip())
    if not match:
        raise BadInput(f"--engine '{spec}' must look like vllm==0.33.0")
    return match.group(1)
