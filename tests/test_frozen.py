"""`@frozen` (apron/frozen.py) behaves as `@dataclass(frozen=True)`: the same constructor, equality, hash,
repr, frozen errors, fields, `replace` and `asdict`, on classes made for the test and on every frozen
class in the package (their constructors' signatures against the standard library's)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
from dataclasses import InitVar
from dataclasses import field as standard_field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from apron import frozen_shapes
from apron.frozen import field, frozen, replace, shape_function_name, template_source
from frozen_package import package_classes


def _both(make: Any, spec: Any = field) -> tuple[type, type]:
    """The same class body decorated by `@frozen` (its fields declared with SPEC: apron.frozen's field,
    or the standard library's, which `@frozen` also reads) and by the standard library."""
    return frozen(make(spec)), dataclasses.dataclass(frozen=True)(make(standard_field))


def _point(field: Any) -> type:
    class Point:
        """A point."""

        x: int
        y: int = 2
        tags: tuple[str, ...] = field(default_factory=tuple)
        note: str = field(default="n", compare=False, repr=False)
        seen: list[int] = field(default_factory=list, init=False, compare=False, hash=False)
        kind: ClassVar[str] = "point"

    return Point


@pytest.mark.parametrize("spec", [field, standard_field])
def test_constructor_equality_hash_and_repr_match_the_standard_library(spec: Any) -> None:
    ours, theirs = _both(_point, spec)
    for args, kwargs in [((1,), {}), ((1, 5), {}), ((1,), {"tags": ("a",)}), ((), {"x": 3, "note": "other"})]:
        a, b = ours(*args, **kwargs), theirs(*args, **kwargs)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert repr(a).replace(ours.__qualname__, "Q") == repr(b).replace(theirs.__qualname__, "Q")
        assert hash(a) == hash(ours(*args, **kwargs)) and a == ours(*args, **kwargs)
    assert ours(1) != ours(2) and ours(1) == ours(1, note="ignored by eq")
    assert ours(1).seen == [] and ours(1).seen is not ours(1).seen
    assert ours(1) != theirs(1)  # another class, as between two standard dataclasses
    assert ours.__match_args__ == theirs.__match_args__ == ("x", "y", "tags", "note")
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]


def test_wrong_arguments_raise_type_error_as_the_standard_library_does() -> None:
    ours, theirs = _both(_point)
    for args, kwargs in [((), {}), ((1, 2, (), "n", "extra"), {}), ((1,), {"x": 1}), ((1,), {"nope": 1})]:
        with pytest.raises(TypeError):
            theirs(*args, **kwargs)
        with pytest.raises(TypeError):
            ours(*args, **kwargs)


def test_assignment_and_deletion_raise_frozen_instance_error() -> None:
    ours, _ = _both(_point)
    point = ours(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.other = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.x
    assert dataclasses.replace(point, y=9) == ours(1, 9)


def test_replace_matches_the_standard_library_s() -> None:
    ours, theirs = _both(_point)
    for changes in [{}, {"y": 9}, {"x": 4, "tags": ("t",), "note": "m"}]:
        assert dataclasses.asdict(replace(ours(1), **changes)) == dataclasses.asdict(
            dataclasses.replace(theirs(1), **changes)
        )
    for bad, error in [({"seen": [1]}, ValueError), ({"nope": 1}, TypeError)]:
        with pytest.raises(error):
            dataclasses.replace(theirs(1), **bad)
        with pytest.raises(error):
            replace(ours(1), **bad)
    assert replace(theirs(1), y=3) == theirs(1, 3)  # a standard dataclass goes to the standard library


def test_the_standard_library_s_checks_of_a_class_body() -> None:
    class MutableDefault:
        items: list[int] = []  # noqa: RUF012 - the mistake under test

    class DefaultFirst:
        a: int = 1
        b: int

    for body, error in [(MutableDefault, ValueError), (DefaultFirst, TypeError)]:
        with pytest.raises(error):
            dataclasses.dataclass(frozen=True)(type("Copy", (), dict(body.__dict__)))
        with pytest.raises(error):
            frozen(body)


def test_the_standard_library_s_view_is_frozen_and_made_on_first_use() -> None:
    """A frozen class is built, compared, hashed and replaced without importing `dataclasses`; its
    `__dataclass_params__` then says frozen, as the standard library's own would."""
    code = (
        "import sys\nfrom apron.frozen import field, frozen, replace\n"
        "@frozen\nclass A:\n    x: int\n    y: tuple = field(default_factory=tuple)\n"
        "a = A(1)\nassert a == A(1) and hash(a) == hash(A(1)) and replace(a, x=2) == A(2) and repr(a)\n"
        "print('dataclasses' in sys.modules, 'typing' in sys.modules)\n"
        "import dataclasses\nprint(dataclasses.is_dataclass(A), A.__dataclass_params__.frozen, "
        "[f.name for f in dataclasses.fields(a)])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["False False", "True True ['x', 'y']"]


def test_a_field_a_base_binds_to_a_property_is_set_through_it_as_the_standard_library_does() -> None:
    """`__init__` stores fields in the instance's __dict__, except where a data descriptor has the
    name: there it goes through object.__setattr__, as the standard library's always does."""

    class Doubling:
        @property
        def x(self) -> int:
            return int(self.__dict__["_x"])

        @x.setter
        def x(self, value: int) -> None:
            self.__dict__["_x"] = value * 2

    def make(spec: Any) -> type:
        class Child(Doubling):
            x: int  # type: ignore[assignment]
            y: int = 1

        return Child

    ours, theirs = _both(make)
    assert ours(3).x == theirs(3).x == 6
    assert ours(3).__dict__ == theirs(3).__dict__ == {"_x": 6, "y": 1}


def test_post_init_subclasses_and_a_body_s_own_methods() -> None:
    @frozen
    class Base:
        a: int
        b: int = 0

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("a")

    @frozen
    class Child(Base):
        c: str = "c"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Child) and self.c == other.c

        def __hash__(self) -> int:
            return 7

    with pytest.raises(ValueError):
        Base(-1)
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b", "c"]
    assert Child(1, 2, "x") == Child(5, 6, "x") and hash(Child(1)) == 7
    assert repr(Child(1)) == "test_post_init_subclasses_and_a_body_s_own_methods.<locals>.Child(a=1, b=0, c='c')"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Child(1).c = "y"


def test_what_it_does_not_handle_gets_the_standard_library_s_decorator() -> None:
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            object.__setattr__(self, "a", self.a * scale)

    class WithKeywordOnly:
        a: int = standard_field(kw_only=True)

    assert frozen(WithInitVar)(2, 3).a == 6
    assert frozen(WithKeywordOnly)(a=1).a == 1
    with pytest.raises(TypeError):
        WithKeywordOnly(1)  # type: ignore[misc]


def test_every_frozen_class_in_the_package_has_the_standard_library_s_constructor() -> None:
    checked = 0
    for cls in package_classes():
        fields = list(dataclasses.fields(cls))
        namespace: dict[str, Any] = {"__annotations__": {f.name: f.type for f in fields}}
        for f in fields:
            namespace[f.name] = standard_field(
                default=f.default, default_factory=f.default_factory, init=f.init, repr=f.repr, compare=f.compare
            )  # type: ignore[call-overload]
        reference = dataclasses.dataclass(frozen=True)(type(cls.__name__, (), namespace))
        ours = inspect.signature(cls.__init__).parameters
        theirs = inspect.signature(reference.__init__).parameters
        assert list(ours) == list(theirs), cls
        for name, parameter in ours.items():
            expected = theirs[name].default
            if repr(expected) == "<factory>":
                assert parameter.default is not inspect.Parameter.empty, (cls, name)
            else:
                assert parameter.default is expected or parameter.default == expected, (cls, name)
        checked += 1
    assert checked > 100  # the package's frozen classes (146 at this writing), not a handful


def test_the_precompiled_templates_are_the_package_s_shapes_and_compile_the_same():
    """apron/frozen_shapes.py (scripts/frozen_shapes.py writes it) holds one template per shape the
    package's classes have, no more, no fewer, each the code template_source compiles: so no start
    compiles one, and none is stale. After a frozen class of a new shape: run the script."""
    # in a fresh process: other tests load older releases of the package's modules (test_plan_contract)
    code = "import json, frozen_package; print(json.dumps(frozen_package.package_shapes()))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parent
    )
    assert sorted(frozen_shapes.SHAPES) == json.loads(done.stdout), "run scripts/frozen_shapes.py"
    for shape, function in frozen_shapes.SHAPES.items():
        name = shape_function_name(shape)
        namespace: dict[str, Any] = {}
        exec(template_source(shape, name), namespace)
        fresh, shipped = namespace[name].__code__, function.__code__
        for attribute in ("co_code", "co_consts", "co_names", "co_varnames", "co_argcount"):
            assert getattr(shipped, attribute) == getattr(fresh, attribute), (shape, attribute)


def test_a_shape_outside_the_precompiled_ones_is_compiled_at_run_time():
    """A class of a shape the package does not use still gets its constructor (compiled then)."""
    shape = "p" * 40
    assert shape not in frozen_shapes.SHAPES
    made = frozen(type("Wide", (), {"__annotations__": {f"x{i}": "int" for i in range(40)}}))
    assert made(*range(40)).x39 == 39
    assert made.__init__.__frozen_shape__ == shape
