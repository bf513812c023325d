"""The package's frozen classes and their `__init__` shapes (tests/test_frozen.py, scripts/frozen_shapes.py)."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import apron
import apron.frozen


def _is_ours(method: object) -> bool:
    return getattr(getattr(method, "__code__", None), "co_filename", None) == apron.frozen.__file__


def package_classes() -> list[type]:
    """Every class of the package that @frozen made (every module imported)."""
    for module in pkgutil.walk_packages(apron.__path__, "apron."):
        if module.name.startswith("apron.measure.probe_hook") or module.name.endswith("__main__"):
            continue  # runs inside the engine's process, or runs a command
        importlib.import_module(module.name)
    found = []
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("apron."):
            continue
        for value in vars(module).values():
            own = getattr(value, "__dict__", {}).get("__setattr__")
            if isinstance(value, type) and value.__module__ == module_name and _is_ours(own):
                found.append(value)
    return found


def package_shapes() -> list[str]:
    """The shapes of the `__init__`s @frozen made for them (apron/frozen.py init_shape), sorted; a class
    with its own `__init__` has none."""
    shapes = {getattr(cls.__dict__.get("__init__"), "__frozen_shape__", None) for cls in package_classes()}
    return sorted(shape for shape in shapes if shape is not None)
