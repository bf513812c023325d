"""`@frozen`: a frozen dataclass made without importing `dataclasses` or compiling a method per class.

`@dataclass(frozen=True)` writes and compiles the source of six methods for every class as its module
is imported (dataclasses.py 3.11: `_create_fn` execs each), and `dataclasses` itself brings `inspect`,
`ast`, `dis` and `tokenize`. A plan imports about 80 frozen classes; their methods and that import were
the largest cost of starting `apron plan` (benchmarks/plan_speed.py). Here:
- the fields are collected from the class body as the standard library does (annotations in order, a
  base's fields first, ClassVar left out, `field(...)` specifiers, a mutable default refused);
- `__init__` is a template compiled once per shape of fields (which take a factory, which are not
  parameters, whether `__post_init__` runs) and given each class's own names by `CodeType.replace`: the
  package's ~150 classes share a few dozen templates. It stores each field in the instance's
  `__dict__`, which is what the standard library's `object.__setattr__` call does there, at half the
  cost (a field whose name a class binds to a data descriptor still goes through object.__setattr__);
- `__eq__` and `__hash__` are compiled on their first call, and `__repr__` and the frozen
  `__setattr__` / `__delattr__` are shared functions over the class's field names;
- `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` still work: `__dataclass_fields__` and
  `__dataclass_params__` are made on first access, by the standard library, from a stand-in class with
  the same fields (so they hold its own `Field` objects and frozen parameters).
A class using what this does not handle (InitVar, keyword-only fields, slots, its own `__setattr__`, a
standard-library dataclass as a base) gets the standard library's decorator instead.
tests/test_frozen.py compares both on classes made for the test and on every frozen class in the package.
"""

from __future__ import annotations

import builtins
import sys
from types import CodeType, FunctionType

TYPE_CHECKING = False  # typing is not imported at run time: a plan never needs it (mypy reads the name)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # an absent default or factory (the standard library's own is used in its views)
_FACTORY = object()  # the default of a parameter whose field has a default_factory
_FIELDS = "__frozen_fields__"  # a class's fields, bases included: a tuple of Field


class Field:
    """One field as `field(...)` declares it (the standard library's attributes, under its names)."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "metadata")

    def __init__(
        self,
        default: Any,
        default_factory: Any,
        init: bool,
        repr: bool,  # noqa: A002 - the standard library's name
        hash: bool | None,  # noqa: A002
        compare: bool,
        metadata: Any,
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name, self.type = "", ""
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.hash, self.compare, self.metadata = init, repr, hash, compare, metadata

    @property
    def kind(self) -> str:
        """The field's part in `__init__`: p a parameter, f one with a factory; d, F and n are not
        parameters and are set from a default, a factory, or not at all."""
        if self.init:
            return "f" if self.default_factory is not MISSING else "p"
        return "F" if self.default_factory is not MISSING else "d" if self.default is not MISSING else "n"


def field(
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    init: bool = True,
    repr: bool = True,  # noqa: A002 - the standard library's name
    hash: bool | None = None,  # noqa: A002
    compare: bool = True,
    metadata: Any = None,
) -> Any:
    """A field's specifier, as `dataclasses.field` (keyword-only fields are not taken)."""
    return Field(default, default_factory, init, repr, hash, compare, metadata)


def _frozen(cls: type[T]) -> type[T]:
    """The class as a frozen dataclass (see the module's docstring)."""
    fields = _collect(cls)
    if fields is None:
        import dataclasses

        return dataclasses.dataclass(frozen=True)(cls)
    own = cls.__dict__
    setattr(cls, _FIELDS, fields)
    if "__init__" not in own:
        cls.__init__ = _init(cls, fields)  # type: ignore[method-assign]
    if not own.get("__doc__"):
        cls.__doc__ = cls.__name__ + "(" + ", ".join(_signature_text(f) for f in fields if f.init) + ")"
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(f.name for f in fields if f.init)  # type: ignore[attr-defined,misc]
    _add(cls, "__repr__", _repr([f.name for f in fields if f.repr]))
    _add(cls, "__eq__", _eq(cls, [f.name for f in fields if f.compare]))
    names = frozenset(f.name for f in fields)
    cls.__setattr__ = _setattr(cls, names)  # type: ignore[method-assign]
    cls.__delattr__ = _delattr(cls, names)  # type: ignore[method-assign]
    if not _has_explicit_hash(cls):
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        cls.__hash__ = _hash(cls, hashed)  # type: ignore[method-assign,assignment]
    cls.__dataclass_fields__ = _StandardView(0)  # type: ignore[attr-defined]
    cls.__dataclass_params__ = _StandardView(1)  # type: ignore[attr-defined]
    return cls


if TYPE_CHECKING:

    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def frozen(cls: type[T]) -> type[T]: ...

else:
    frozen = _frozen


class _CachedProperty:
    """`functools.cached_property` without its lock (Python 3.11 takes one per first access, on every
    instance; 3.12 dropped it): the value is computed on first access and kept in the instance's
    __dict__, where later reads find it without calling back. The planner is single-threaded, and a
    value computed twice by two threads is the same value."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func, self.attrname, self.__doc__ = func, func.__name__, func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value


if TYPE_CHECKING:
    from functools import cached_property as cached_property
else:
    cached_property = _CachedProperty


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of OBJ with CHANGES, as `dataclasses.replace` (for any dataclass)."""
    fields = type(obj).__dict__.get(_FIELDS)
    if fields is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    kwargs = {}
    for f in fields:
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
        elif f.name in changes:
            kwargs[f.name] = changes.pop(f.name)
        else:
            kwargs[f.name] = getattr(obj, f.name)
    return type(obj)(**kwargs, **changes)  # a name left over raises its TypeError


# ---- collecting the fields -------------------------------------------------------------------------


def _collect(cls: type) -> tuple[Field, ...] | None:
    """CLS's fields, a base's first (None: what only the standard library handles)."""
    own = cls.__dict__
    if "__slots__" in own or "__setattr__" in own or "__delattr__" in own:
        return None
    fields: dict[str, Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        if "__dataclass_fields__" in base.__dict__ and _FIELDS not in base.__dict__:
            return None  # a standard-library dataclass as a base
        for f in base.__dict__.get(_FIELDS, ()):
            fields[f.name] = f
    for name, annotation in own.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if "InitVar" in text or "KW_ONLY" in text:
            return None
        if "ClassVar" in text and _is_classvar(text):
            continue
        f = _own_field(cls, name, own.get(name, MISSING))
        if f is None:
            return None
        f.name, f.type = name, annotation
        fields[name] = f
    return _checked(tuple(fields.values()))


def _is_classvar(text: str) -> bool:
    head = text.split("[", 1)[0].strip()
    return head in {"ClassVar", "typing.ClassVar", "t.ClassVar"} or head.endswith("typing.ClassVar")


def _own_field(cls: type, name: str, value: Any) -> Field | None:
    """The field NAME of CLS's body (its class attribute set as the standard library leaves it); None
    for a keyword-only one."""
    standard = sys.modules.get("dataclasses") if value is not MISSING else None
    if standard is not None and isinstance(value, standard.Field):
        if value.kw_only is True:
            return None
        value = Field(
            _ours(value.default, standard),
            _ours(value.default_factory, standard),
            value.init,
            value.repr,
            value.hash,
            value.compare,
            value.metadata,
        )
    if not isinstance(value, Field):
        value = Field(value, MISSING, True, True, None, True, None)
    elif value.default is MISSING:
        if name in cls.__dict__:
            delattr(cls, name)
    else:
        setattr(cls, name, value.default)
    if value.default is not MISSING and value.default.__class__.__hash__ is None:
        raise ValueError(f"mutable default {type(value.default)} for field {name} is not allowed: use default_factory")
    return value


def _ours(value: Any, standard: Any) -> Any:
    return MISSING if value is standard.MISSING else value


def _checked(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """The standard library's one check of the order: no parameter without a default after one with."""
    seen_default = False
    for f in fields:
        if not f.init:
            continue
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has_default
    return fields


def _has_explicit_hash(cls: type) -> bool:
    """The standard library's rule: a class body's own `__hash__`, unless it is the None Python sets
    beside a body's own `__eq__`."""
    class_hash = cls.__dict__.get("__hash__", MISSING)
    return not (class_hash is MISSING or (class_hash is None and "__eq__" in cls.__dict__))


# ---- __init__ from a template per shape -----------------------------------------------------------

_TEMPLATES: dict[str, CodeType] = {}


def _init(cls: type, fields: tuple[Field, ...]) -> Callable[..., None]:
    """`__init__` as the standard library writes it for a frozen class (object's __setattr__ per
    field, defaults bound once, factories called per instance): the template of the fields' shape,
    renamed to the class's fields, over a namespace of this class's defaults and factories."""
    shape = init_shape(cls, fields)
    template = _TEMPLATES.get(shape) or _template(shape)
    names = [f.name for f in fields]
    params = [f.name for f in fields if f.init]
    code = template.replace(
        co_varnames=("self", *params, *template.co_varnames[1 + len(params) :]),
        co_consts=tuple(names[int(c[2:])] if isinstance(c, str) and c[:2] == "\0n" else c for c in template.co_consts),
        co_name="__init__",
        co_qualname=f"{cls.__qualname__}.__init__",
    )
    namespace: dict[str, Any] = {"__builtins__": builtins, "_set": object.__setattr__, "_FACTORY": _FACTORY}
    defaults = []
    for i, f in enumerate(fields):
        namespace[f"_d{i}"], namespace[f"_f{i}"] = f.default, f.default_factory
        if f.init and (f.default is not MISSING or f.default_factory is not MISSING):
            defaults.append(_FACTORY if f.default_factory is not MISSING else f.default)
    init = FunctionType(code, namespace, "__init__", tuple(defaults) or None)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__frozen_shape__ = shape  # type: ignore[attr-defined]  # scripts/frozen_shapes.py reads it
    return init


def init_shape(cls: type, fields: tuple[Field, ...]) -> str:
    """The shape of CLS's `__init__`: its fields' kinds, + when `__post_init__` runs, ! when a field
    name is also bound to a descriptor (object.__setattr__ reaches it)."""
    shape = "".join(f.kind for f in fields) + ("+" if hasattr(cls, "__post_init__") else "")
    return shape + "!" if any(_is_data_descriptor(cls, f.name) for f in fields) else shape


def _template(shape: str) -> CodeType:
    """The code of `__init__` for SHAPE (a field's kind each, then + when `__post_init__` runs and !
    when a field must be set through object.__setattr__), its parameters named a0, a1, ... and its
    fields' names the constants '\\0n0', '\\0n1', ... The package's shapes come compiled from
    apron/frozen_shapes.py (the import system caches its bytecode; compiling them here took ~3.5 ms of
    every start); any other shape is compiled from template_source."""
    from apron import frozen_shapes

    function = frozen_shapes.SHAPES.get(shape)
    if function is not None:
        code: CodeType = function.__code__
    else:
        namespace: dict[str, Any] = {}
        exec(template_source(shape, "__init__"), namespace)  # noqa: S102 - our own source, from a shape
        code = namespace["__init__"].__code__
    _TEMPLATES[shape] = code
    return code


def template_source(shape: str, name: str) -> str:
    """The source of SHAPE's template, a function NAME. Without !, a field is stored in the instance's
    __dict__, which is what object.__setattr__ does there (no descriptor has the name), at half the
    cost: the planner builds thousands of these values a plan."""
    params, lines = ["self"], []
    through_setattr = shape.endswith("!")
    for i, kind in enumerate(shape.rstrip("+!")):
        value = {"p": f"a{i}", "f": f"_f{i}() if a{i} is _FACTORY else a{i}", "d": f"_d{i}", "F": f"_f{i}()"}
        if kind in "pf":
            params.append(f"a{i}")
        if kind in value:
            setter = f"_set(self, '\\0n{i}', {{}})" if through_setattr else f"_fields['\\0n{i}'] = {{}}"
            lines.append("    " + setter.format(value[kind]))
    if lines and not through_setattr:
        lines.insert(0, "    _fields = self.__dict__")
    if "+" in shape:
        lines.append("    self.__post_init__()")
    return f"def {name}({', '.join(params)}):\n" + ("\n".join(lines) or "    pass") + "\n"


def shape_function_name(shape: str) -> str:
    """SHAPE's function in apron/frozen_shapes.py: s_ and the kinds, _post for +, _set for !."""
    return "s_" + shape.replace("+", "_post").replace("!", "_set")


def _is_data_descriptor(cls: type, name: str) -> bool:
    """Whether CLS (or a base) binds NAME to an object that intercepts assignment (a property, a slot)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            kind = type(klass.__dict__[name])
            return hasattr(kind, "__set__") or hasattr(kind, "__delete__")
    return False


def _signature_text(f: Field) -> str:
    annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", repr(f.type))
    if f.default_factory is not MISSING:
        return f"{f.name}: {annotation} = <factory>"
    return f"{f.name}: {annotation}" + (f" = {f.default!r}" if f.default is not MISSING else "")


# ---- the other methods --------------------------------------------------------------------------


def _add(cls: type, name: str, method: Callable[..., Any]) -> None:
    if name not in cls.__dict__:
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)


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


def _frozen_error(message: str) -> Exception:
    import dataclasses

    return dataclasses.FrozenInstanceError(message)


def _setattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    __setattr__.__qualname__ = f"{cls.__qualname__}.__setattr__"
    return __setattr__


def _delattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    __delattr__.__qualname__ = f"{cls.__qualname__}.__delattr__"
    return __delattr__


# ---- the standard library's view, made on first access --------------------------------------------


class _StandardView:
    """`__dataclass_fields__` (0) or `__dataclass_params__` (1) of a frozen class, made on first access
    (dataclasses.fields, replace, asdict and is_dataclass all read them through getattr) by the standard
    library from a stand-in class with the same fields, then set on the class itself."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __get__(self, obj: Any, owner: type) -> Any:
        cls = next(c for c in owner.__mro__ if isinstance(c.__dict__.get("__dataclass_fields__"), _StandardView))
        fields, params = _standard_view(cls)
        cls.__dataclass_fields__, cls.__dataclass_params__ = fields, params  # type: ignore[attr-defined]
        return (fields, params)[self.index]


def _standard_view(cls: type) -> tuple[dict[str, Any], Any]:
    """The standard library's fields and parameters for CLS, from a stand-in without bases that
    declares all of CLS's fields in their order (a base's `__init_subclass__` never sees it)."""
    import dataclasses

    namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    annotations = {}
    for f in cls.__dict__[_FIELDS]:
        annotations[f.name] = f.type
        namespace[f.name] = dataclasses.field(
            default=dataclasses.MISSING if f.default is MISSING else f.default,
            default_factory=dataclasses.MISSING if f.default_factory is MISSING else f.default_factory,
            init=f.init,
            repr=f.repr,
            hash=f.hash,
            compare=f.compare,
            metadata=f.metadata,
        )
    namespace["__annotations__"] = annotations
    stand_in: Any = dataclasses.dataclass(frozen=True)(type(cls.__name__, (), namespace))
    return stand_in.__dataclass_fields__, stand_in.__dataclass_params__
