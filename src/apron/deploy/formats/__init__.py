"""Deployment formats: one module each in this package, found at import (see `base` for what a
module defines). Adding a format is adding a module; a file two formats claim is an error."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from apron.deploy.formats.base import Document

_NOT_FORMATS = {"base"}


@lru_cache(maxsize=1)
def all_formats() -> tuple[ModuleType, ...]:
    """Every format module, in name order."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_FORMATS)
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in names)


def claiming(document: Document) -> list[ModuleType]:
    return [m for m in all_formats() if m.claims(document)]


class AmbiguousFormat(Exception):
    """Two format modules claim one file: a registry bug, never a silent first-wins."""


def format_for(document: Document) -> ModuleType | None:
    found = claiming(document)
    if len(found) > 1:
        raise AmbiguousFormat(f"{document.name}: formats {', '.join(m.NAME for m in found)} all claim it")
    return found[0] if found else None
