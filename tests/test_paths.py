"""apron/paths.py answers where the cache and the data live without importing platformdirs in the
ordinary Linux case, and that answer is platformdirs' own for every environment it takes; the others
go to platformdirs."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from apron import paths

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fast answer is Linux's")

ENVIRONMENTS = [
    {"HOME": "/home/ann"},
    {"HOME": "/home/ann/"},
    {"HOME": "/home/ann", "XDG_CACHE_HOME": "/var/cache/ann", "XDG_DATA_HOME": "/srv/data/"},
    {"HOME": "/home/ann", "XDG_CACHE_HOME": "", "XDG_DATA_HOME": "relative/data"},
    {"HOME": "/", "XDG_CACHE_HOME": "  "},
    {"HOME": "relative"},
    {"XDG_CACHE_HOME": "/c", "XDG_DATA_HOME": "/d"},
]


@pytest.mark.parametrize("environment", ENVIRONMENTS, ids=range(len(ENVIRONMENTS)))
def test_the_answer_is_platformdirs_own(monkeypatch, environment):
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "APRON_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    for kind, expected in (("cache", platformdirs.user_cache_dir), ("data", platformdirs.user_data_dir)):
        fast = paths._xdg_dir(kind)
        if fast is not None:
            assert Path(fast) == Path(expected("apron")), (kind, environment)
        try:
            answer = paths._platform_dir.__wrapped__(kind)
        except RuntimeError:  # platformdirs finds no home: so must the planner
            assert fast is None
            continue
        assert Path(answer) == Path(expected("apron"))


def test_the_ordinary_case_takes_the_fast_answer(monkeypatch):
    monkeypatch.setenv("HOME", "/home/ann")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert paths._xdg_dir("cache") == "/home/ann/.cache/apron"
    assert paths._xdg_dir("data") == "/home/ann/.local/share/apron"
