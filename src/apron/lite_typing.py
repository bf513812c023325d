"""Run-time stand-ins for the few `typing` names the planning path uses outside annotations.

Importing `typing` costs a plan about 4 ms of its start-up (benchmarks/plan_speed.py), and a plan only
needs it for three things at run time: a `Literal[...]` alias whose values a module lists with
`get_args` (one list, checked by mypy and read at run time), `cast`, and `Protocol` as a base. A module
imports the real names under `if TYPE_CHECKING:` (mypy reads those) and these otherwise:

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import Literal, get_args
    else:
        from apron.lite_typing import Literal, get_args

tests/test_lite_typing.py holds them to typing's behaviour on what the package writes.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _LiteralForm:
    """`Literal[...]` at run time: its values, in order, each once (as typing keeps them)."""

    __slots__ = ("values",)

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"Literal[{', '.join(map(repr, self.values))}]"


class _Literal:
    def __getitem__(self, values: Any) -> _LiteralForm:
        flat: list[Any] = []
        for value in values if isinstance(values, tuple) else (values,):
            for item in value.values if isinstance(value, _LiteralForm) else (value,):
                if item not in flat:
                    flat.append(item)
        return _LiteralForm(tuple(flat))


Literal = _Literal()


def get_args(form: Any) -> tuple[Any, ...]:
    """A `Literal[...]`'s values (typing.get_args; anything else has none)."""
    return form.values if isinstance(form, _LiteralForm) else ()


def cast(_type: Any, value: Any) -> Any:
    """typing.cast: the value, unchanged."""
    return value


Protocol = object  # a protocol class is only read by mypy; at run time it is a plain base
