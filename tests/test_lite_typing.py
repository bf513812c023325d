"""apron/lite_typing.py's stand-ins behave as `typing`'s on what the package writes with them, and
every module that lists a Literal's values with them gets the values typing would give."""

from __future__ import annotations

import ast
import importlib
import typing
from pathlib import Path

import pytest

import apron
from apron import lite_typing

PACKAGE = Path(apron.__file__).parent


@pytest.mark.parametrize(
    "values",
    [("a",), ("a", "b", "c"), ("b", "a", "b"), (1, "1", None)],
)
def test_literal_and_get_args_match_typing(values):
    ours = lite_typing.get_args(lite_typing.Literal[values if len(values) > 1 else values[0]])
    theirs = typing.get_args(typing.Literal[values if len(values) > 1 else values[0]])
    assert ours == theirs


def test_nested_literals_flatten_as_typing_does():
    inner_ours, inner_theirs = lite_typing.Literal["a", "b"], typing.Literal["a", "b"]
    assert lite_typing.get_args(lite_typing.Literal[inner_ours, "c", "a"]) == typing.get_args(
        typing.Literal[inner_theirs, "c", "a"]
    )


def test_get_args_of_anything_else_is_empty_and_cast_returns_its_value():
    assert lite_typing.get_args(int) == typing.get_args(int) == ()
    value = {"a": 1}
    assert lite_typing.cast("dict[str, int]", value) is value


def _modules_using_lite_typing() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "apron.lite_typing import" in path.read_text():
            parts = ("apron", *path.relative_to(PACKAGE).with_suffix("").parts)
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _literal_aliases(module_name: str) -> dict[str, tuple[object, ...]]:
    """NAME = Literal[...] at a module's top level, evaluated with the real typing."""
    source = Path(importlib.import_module(module_name).__file__ or "").read_text()
    aliases = {}
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Subscript)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "Literal"
        ):
            form = eval(ast.unparse(node.value), {"Literal": typing.Literal})  # noqa: S307 - our own source
            aliases[node.targets[0].id] = typing.get_args(form)  # type: ignore[attr-defined]
    return aliases


def test_every_literal_alias_of_the_package_reads_the_same_values_as_typing():
    checked = 0
    for module_name in _modules_using_lite_typing():
        module = importlib.import_module(module_name)
        for name, values in _literal_aliases(module_name).items():
            assert lite_typing.get_args(getattr(module, name)) == values, (module_name, name)
            checked += 1
    assert checked >= 5  # Label, Unit, ProblemKind, Verdict, SourceKind at this writing
