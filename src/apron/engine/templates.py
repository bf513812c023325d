"""Render an engine message template (an f-string read from vLLM's source) with known values.

Templates mark f-string fields as `{expr}`, `{expr!r}` or `{expr:spec}` and double literal braces,
as str.format does. Rendering applies the same conversion and format spec Python would, so the
result is the engine's own text; a field whose value is not given is left as written and the result
is marked inexact.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from apron.frozen import frozen

_CONVERSIONS: dict[str, Callable[[object], str]] = {"r": repr, "s": str, "a": ascii}
_BRACE = re.compile(r"[{}]")
_OPEN = "([{"
_CLOSE = ")]}"


@frozen
class Field:
    text: str  # the whole `{...}` as written
    expr: str
    conversion: str | None
    spec: str


def split(template: str) -> list[str | Field]:
    """Literal text and fields, in order."""
    parts: list[str | Field] = []
    literal, i = [], 0
    while i < len(template):
        brace = _BRACE.search(template, i)
        if brace is None:
            literal.append(template[i:])
            break
        literal.append(template[i : brace.start()])
        i = brace.start()
        if template[i : i + 2] in ("{{", "}}"):
            literal.append(template[i])
            i += 2
        elif template[i] == "{":
            end = _field_end(template, i)
            if any(literal):
                parts.append("".join(literal))
            literal = []
            parts.append(_field(template[i : end + 1]))
            i = end + 1
        else:
            literal.append("}")
            i += 1
    if any(literal):
        parts.append("".join(literal))
    return parts


def fields(template: str) -> list[str]:
    return [p.expr for p in split(template) if isinstance(p, Field)]


def _field_end(text: str, start: int) -> int:
    """Index of the `}` closing the field opened at `start` (brackets and quotes nest)."""
    depth, quote, i = 0, None, start + 1
    while i < len(text):
        char = text[i]
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            if depth == 0 and char == "}":
                return i
            depth -= 1
        i += 1
    return len(text) - 1


def _field(text: str) -> Field:
    body = text[1:-1]
    depth, quote = 0, None
    for i, char in enumerate(body):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif depth == 0 and char == "!" and body[i + 1 : i + 2] in ("r", "s", "a") and body[i + 2 : i + 3] in ("", ":"):
            return Field(text, body[:i].strip(), body[i + 1], body[i + 3 :])
        elif depth == 0 and char == ":" and body[i + 1 : i + 2] != "=":  # not a walrus
            return Field(text, body[:i].strip(), None, body[i + 1 :])
    return Field(text, body.strip(), None, "")


def render(template: str, values: dict[str, object]) -> tuple[str, bool]:
    """(the rendered message, whether every field had a value)."""
    out, exact = [], True
    for part in split(template):
        if isinstance(part, str):
            out.append(part)
            continue
        if part.expr not in values:
            out.append(part.text)
            exact = False
            continue
        value = values[part.expr]
        if part.conversion:
            value = _CONVERSIONS[part.conversion](value)
        spec, spec_exact = render(part.spec, values) if "{" in part.spec else (part.spec, True)
        exact = exact and spec_exact
        out.append(format(value, spec))
    return "".join(out), exact
