"""Measure a served model: deployment checks (will it answer) and the serving test (how fast), and
read what the engine logged (apron.measure.logparse).

The names below load on first use: `apron log parse` and `apron boot` need neither the checks nor the
serving test until a boot is healthy.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CheckReport": "checks",
    "CheckResult": "checks",
    "run_checks": "checks",
    "template_reads_reasoning_effort": "checks",
    "ServeReport": "servetest",
    "run_serve_test": "servetest",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"apron.measure.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'apron.measure' has no attribute {name!r}")
