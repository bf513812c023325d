"""Deployment formats: one module each in this package, found at import (see `base` for what a
module defines). Adding a format is adding a module. A file two formats claim mixes their fields:
bad input, named with both formats (the suite checks that every fixture is claimed by one)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from apron.deploy.formats.base import Document
from apron.errors import BadInput

_NOT_FORMATS = {"base"}


@lru_cache(maxsize=1)
def all_formats() -> tuple[ModuleType, ...]:
    """Every format module, in name order."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_FORMATS)
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in names)


def claiming(document: Document) -> list[ModuleType]:
    return [m for m in all_formats() if m.claims(document)]


def format_for(document: Document) -> ModuleType | None:
    """The one format that claims the file (None: no format does); never a silent first-wins."""
    found = claiming(document)
    if len(found) > 1:
        titles = " and ".join(m.TITLE for m in found)
        raise BadInput(f"{document.name} reads as {titles} at once; give one deployment format per file")
    return found[0] if found else None
