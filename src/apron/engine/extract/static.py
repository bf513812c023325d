"""Read values and message templates out of `ast` nodes without running any of the code.

Everything here either returns a value that the source states literally, or raises `NotStatic`: the
callers turn that into a recorded `null` ("not statically resolvable"), never into a guess.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.LShift: operator.lshift,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.BitOr: operator.or_,
}


class NotStatic(Exception):
    """The node's value depends on something the source does not state literally."""


def dotted_name(node: ast.AST | None) -> str | None:
    """`a.b.c` for Name/Attribute chains; a subscript (`Protocol[T]`) names its value."""
    if isinstance(node, ast.Subscript):
        node = node.value
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


Names = Callable[[str], object]


def literal(node: ast.AST, names: Names | None = None) -> Any:
    """A literal value; `names` resolves a dotted name to a value (or raises NotStatic).

    Handles containers, `**` spreads in dict displays (later keys win, first position kept, as in
    Python), unary minus and integer arithmetic such as `70 * GiB_bytes`.
    """
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(e, names) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                spread = literal(value, names)
                if not isinstance(spread, dict):
                    raise NotStatic(ast.unparse(value))
                out.update(spread)
            else:
                out[_hashable(literal(key, names))] = literal(value, names)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -literal(node.operand, names)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not literal(node.operand, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = literal(node.left, names), literal(node.right, names)
        if isinstance(left, (int, float)) and isinstance(right, (int, float)):
            return _BINOPS[type(node.op)](left, right)
        if isinstance(left, str) and isinstance(right, str) and isinstance(node.op, ast.Add):
            return left + right
        raise NotStatic(ast.unparse(node))
    if isinstance(node, (ast.DictComp, ast.ListComp, ast.SetComp)):
        return _comprehension(node, names)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])](literal(node.left, names), literal(node.comparators[0], names))
    if isinstance(node, ast.BoolOp):
        values = [literal(v, names) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    name = dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if name is not None and names is not None:
        return names(name)
    raise NotStatic(ast.unparse(node))


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ITER_METHODS: dict[str, Callable[[Any], list[Any]]] = {
    "items": lambda d: list(d.items()),
    "keys": lambda d: list(d),
    "values": lambda d: list(d.values()),
}


def _comprehension(node: ast.DictComp | ast.ListComp | ast.SetComp, names: Names | None) -> Any:
    """`{k: v for k, (a, b) in NAME.items() if a == "x"}` over literal data, as registry.py spreads."""
    if len(node.generators) != 1 or node.generators[0].is_async:
        raise NotStatic(ast.unparse(node))
    gen = node.generators[0]
    source = gen.iter
    method = None
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and not source.args:
        method, source = source.func.attr, source.func.value
        if method not in _ITER_METHODS:
            raise NotStatic(ast.unparse(gen.iter))
    data = literal(source, names)
    items = _ITER_METHODS[method](data) if method else list(data)
    mapping: dict[Any, Any] = {}
    elements: list[Any] = []
    for item in items:
        local: dict[str, object] = {}
        _bind(gen.target, item, local)

        def scoped(name: str, local: dict[str, object] = local) -> object:
            if name in local:
                return local[name]
            if names is None:
                raise NotStatic(name)
            return names(name)

        if not all(literal(test, scoped) for test in gen.ifs):
            continue
        if isinstance(node, ast.DictComp):
            mapping[_hashable(literal(node.key, scoped))] = literal(node.value, scoped)
        else:
            elements.append(literal(node.elt, scoped))
    return mapping if isinstance(node, ast.DictComp) else elements


def _bind(target: ast.AST, value: Any, local: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        local[target.id] = value
    elif (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (list, tuple))
        and len(target.elts) == len(value)
    ):
        for sub, item in zip(target.elts, value, strict=True):
            _bind(sub, item, local)
    else:
        raise NotStatic(ast.unparse(target))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def try_literal(node: ast.AST | None, names: Names | None = None, default: Any = None) -> Any:
    if node is None:
        return default
    try:
        return literal(node, names)
    except (NotStatic, TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return default


# ---------------------------------------------------------------- message templates


def _escape(text: str) -> str:
    # Literal braces are doubled so that `{...}` in a template always marks a field.
    return text.replace("{", "{{").replace("}", "}}")


def _field(node: ast.FormattedValue) -> str:
    text = "{" + ast.unparse(node.value)
    if node.conversion != -1:
        text += "!" + chr(node.conversion)
    if isinstance(node.format_spec, ast.JoinedStr):
        text += ":" + _joined(node.format_spec)
    return text + "}"


def _joined(node: ast.JoinedStr) -> str:
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(_escape(str(value.value)))
        elif isinstance(value, ast.FormattedValue):
            parts.append(_field(value))
    return "".join(parts)


def template(node: ast.AST) -> str | None:
    """The message template a string expression produces, or None if it is not a string.

    Plain strings keep printf `%` placeholders; f-string fields become `{expr}` (with `!r` and
    `:spec` kept); `a + b` renders non-string operands as `{expr}`; `"..." % x` and `"...".format()`
    give their format string.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _escape(node.value)
    if isinstance(node, ast.JoinedStr):
        return _joined(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template(node.left), template(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else f"{{{ast.unparse(node.left)}}}") + (
            right if right is not None else f"{{{ast.unparse(node.right)}}}"
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            return _escape(node.left.value)
        return None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return node.func.value.value
    return None
