"""KV layout families: one module each in this package, found at import (see `base` for what a
module defines). Adding a layout is adding a module; an architecture two families claim is an error."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from apron.plan.model_config import ModelConfig

_NOT_FAMILIES = {"base"}


@lru_cache(maxsize=1)
def all_families() -> tuple[ModuleType, ...]:
    """Every family module, in name order (the fallback included)."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_FAMILIES)
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in names)


def fallback() -> ModuleType:
    (module,) = [m for m in all_families() if getattr(m, "FALLBACK", False)]
    return module


def matching(arch: str, config: ModelConfig) -> list[ModuleType]:
    return [m for m in all_families() if m.matches(arch, config)]


class AmbiguousFamily(Exception):
    """Two family modules claim one architecture: a registry bug, never a silent first-wins."""


def family_for(arch: str, config: ModelConfig) -> ModuleType:
    found = matching(arch, config)
    if len(found) > 1:
        raise AmbiguousFamily(f"{arch}: families {', '.join(m.NAME for m in found)} all match")
    return found[0] if found else fallback()
