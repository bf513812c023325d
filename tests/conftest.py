"""Shared test helpers: the real checkpoint snapshots, materialized as sparse safetensors folders."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SNAPSHOTS = FIXTURES / "checkpoints"
sys.path.insert(0, str(FIXTURES))

import materialize as _materialize  # noqa: E402  (tests/fixtures/materialize.py, standard library only)


def snapshot_names() -> list[str]:
    return sorted(p.name[: -len(".json.gz")] for p in SNAPSHOTS.glob("*.json.gz"))


def snapshot_path(name: str) -> Path:
    return SNAPSHOTS / f"{name.replace('/', '--')}.json.gz"


def snapshot_document(name: str) -> dict:
    return json.loads(gzip.decompress(snapshot_path(name).read_bytes()))


def materialize(name: str, out_dir: Path, **kwargs) -> Path:
    _materialize.materialize(snapshot_document(name), str(out_dir), **kwargs)
    return out_dir


@pytest.fixture
def apron_home(tmp_path, monkeypatch):
    """An empty Apron home so tests never read or write the user's cache and records."""
    home = tmp_path / "apron-home"
    monkeypatch.setenv("APRON_HOME", str(home))
    return home


@pytest.fixture
def apron_home_with_facts(tmp_path, monkeypatch):
    """An empty Apron home: plans read the engine facts shipped in the package."""
    monkeypatch.setenv("APRON_HOME", str(tmp_path / "apron-home"))
    from apron.engine import facts

    facts._load.cache_clear()
    return tmp_path / "apron-home"
