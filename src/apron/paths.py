"""Where Apron keeps its cache and data on this machine (APRON_HOME overrides both)."""

from __future__ import annotations

import os
from pathlib import Path


def _root(kind: str) -> Path:
    home = os.environ.get("APRON_HOME")
    if home:
        return Path(home) / kind
    import platformdirs

    return Path(platformdirs.user_cache_dir("apron") if kind == "cache" else platformdirs.user_data_dir("apron"))


def cache_dir() -> Path:
    return _root("cache")


def data_dir() -> Path:
    return _root("data")


def engine_facts_dir() -> Path:
    return cache_dir() / "engine-facts"


def records_dir() -> Path:
    return data_dir() / "records"
