"""`@frozen`: a frozen dataclass that compiles one function at import instead of six.

`@dataclass(frozen=True)` writes and compiles the source of `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__` and `__delattr__` for every class as its module is imported (dataclasses.py 3.11:
`_create_fn` execs each). A plan imports about 75 of them, and compiling their 450 methods was the
largest single cost of starting `apron plan` (about a third of it, benchmarks/plan_speed.py). Only
`__init__` runs on every instance, so only it is compiled here; `__eq__` and `__hash__` are compiled
on their first call, and `__repr__` and the frozen `__setattr__` / `__delattr__` are shared functions
over the class's field names, all with the standard library's behaviour (tests/test_frozen.py compares
both on every frozen class in the package).

The class is still a dataclass: `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` see the
fields the standard library collected (bases included). One difference: `__dataclass_params__.frozen`
is False, because the standard library collects the fields with `frozen=False` (with True it would
compile the two frozen methods again); assignment still raises FrozenInstanceError.
A class using what this does not handle (InitVar, keyword-only fields, slots, its own `__setattr__`)
gets the standard library's decorator instead.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

_FACTORY = object()  # the default of a parameter whose field has a default_factory


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: type[T]) -> type[T]:
    """The class as a frozen dataclass (see the module's docstring)."""
    if not _is_plain(cls):
        return dataclasses.dataclass(frozen=True)(cls)
    has_doc = bool(cls.__dict__.get("__doc__"))
    if not has_doc:
        cls.__doc__ = cls.__name__  # so the standard library does not read a signature for one
    explicit_hash = _has_explicit_hash(cls)
    dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    fields = list(dataclasses.fields(cls))  # type: ignore[arg-type]
    init, signature = _init(cls, fields)
    if "__init__" not in cls.__dict__:
        cls.__init__ = init  # type: ignore[method-assign]
    if not has_doc:
        cls.__doc__ = cls.__name__ + signature
    _add(cls, "__repr__", _repr([f.name for f in fields if f.repr]))
    _add(cls, "__eq__", _eq(cls, [f.name for f in fields if f.compare]))
    names = frozenset(f.name for f in fields)
    cls.__setattr__ = _setattr(cls, names)  # type: ignore[method-assign]
    cls.__delattr__ = _delattr(cls, names)  # type: ignore[method-assign]
    if not explicit_hash:
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        cls.__hash__ = _hash(cls, hashed)  # type: ignore[assignment,method-assign]
    return cls


def _is_plain(cls: type) -> bool:
    own = cls.__dict__
    if "__slots__" in own or "__setattr__" in own or "__delattr__" in own:
        return False
    annotations = own.get("__annotations__", {})
    if any(_is_special(annotation) for annotation in annotations.values()):
        return False
    return not any(isinstance(value, dataclasses.Field) and value.kw_only is True for value in own.values())


def _is_special(annotation: Any) -> bool:
    """InitVar and KW_ONLY change `__init__`'s parameters (ClassVar is no field: fields() leaves it out)."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return "InitVar" in text or "KW_ONLY" in text


def _has_explicit_hash(cls: type) -> bool:
    """The standard library's rule: a class body's own `__hash__`, unless it is the None Python sets
    beside a body's own `__eq__`."""
    class_hash = cls.__dict__.get("__hash__", dataclasses.MISSING)
    return not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in cls.__dict__))


def _add(cls: type, name: str, method: Callable[..., Any]) -> None:
    if name not in cls.__dict__:
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)


def _init(cls: type, fields: list[dataclasses.Field[Any]]) -> tuple[Callable[..., None], str]:
    """`__init__` compiled from source as the standard library writes it for a frozen class (object's
    __setattr__ per field, defaults bound once, factories called per instance), and its signature."""
    namespace: dict[str, Any] = {"__builtins__": builtins, "_set": object.__setattr__, "_FACTORY": _FACTORY}
    params, signature, lines = ["self"], list[str](), list[str]()
    for f in fields:
        value = _field_value(f, namespace, params, signature)
        if value is not None:
            lines.append(f"    _set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        lines.append("    self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(lines) or "    pass") + "\n"
    exec(source, namespace)  # noqa: S102 - our own source, from the class's field names
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init, f"({', '.join(signature)})"


def _field_value(
    f: dataclasses.Field[Any], namespace: dict[str, Any], params: list[str], signature: list[str]
) -> str | None:
    """The expression a field is set to in `__init__` (None: not set), adding its parameter."""
    default, factory = f"_default_{f.name}", f"_factory_{f.name}"
    has_default = f.default is not dataclasses.MISSING
    has_factory = f.default_factory is not dataclasses.MISSING
    namespace[default], namespace[factory] = f.default, f.default_factory
    if not f.init:
        return default if has_default else f"{factory}()" if has_factory else None
    if has_factory:
        params.append(f"{f.name}=_FACTORY")
        signature.append(f"{f.name}: {_type_text(f.type)} = <factory>")
        return f"{factory}() if {f.name} is _FACTORY else {f.name}"
    params.append(f"{f.name}={default}" if has_default else f.name)
    signature.append(f"{f.name}: {_type_text(f.type)}" + (f" = {f.default!r}" if has_default else ""))
    return f.name


def _type_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))


def _repr(names: list[str]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _eq(cls: Any, names: list[str]) -> Callable[[Any, Any], Any]:
    """`__eq__` compiled on its first call (the standard library's tuple comparison), then the class's
    own: equality runs in the planner's hot loops, most classes never compare."""

    def __eq__(self: Any, other: Any) -> Any:
        compiled = _compiled(cls, "__eq__", names)
        return compiled(self, other)

    return __eq__


def _hash(cls: Any, names: list[str]) -> Callable[[Any], int]:
    """`__hash__` compiled on its first call, as `__eq__` is."""

    def __hash__(self: Any) -> int:
        compiled = _compiled(cls, "__hash__", names)
        return compiled(self)

    return __hash__


def _compiled(cls: Any, name: str, names: list[str]) -> Callable[..., Any]:
    """The method NAME over the fields NAMES as source, compiled once and set on CLS."""
    mine = "(" + "".join(f"self.{n}," for n in names) + ")"
    if name == "__eq__":
        theirs = "(" + "".join(f"other.{n}," for n in names) + ")"
        source = (
            "def __eq__(self, other):\n"
            f"    if other.__class__ is self.__class__:\n        return {mine} == {theirs}\n"
            "    return NotImplemented\n"
        )
    else:
        source = f"def __hash__(self):\n    return hash({mine})\n"
    namespace: dict[str, Any] = {"__builtins__": builtins}
    exec(source, namespace)  # noqa: S102 - our own source, from the class's field names
    method: Callable[..., Any] = namespace[name]
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, method)
    return method


def _setattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    __setattr__.__qualname__ = f"{cls.__qualname__}.__setattr__"
    return __setattr__


def _delattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    __delattr__.__qualname__ = f"{cls.__qualname__}.__delattr__"
    return __delattr__
