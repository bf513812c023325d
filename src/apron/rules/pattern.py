"""Turn an engine message template (an f-string read from vLLM's source) into a regex.

A template marks its fields as `{expr}`, `{expr!r}` or `{expr:spec}` and doubles literal braces, as
f-strings do. Each field becomes a named group, so a rendered message gives its values back. The
engine facts list the templates (`refusals`), so a new release brings its messages without code.

Messages reach us cut short (a summary that stops after a sentence, a log line clipped by a
harness), so a template also yields "truncated" patterns: the template cut after each field, whose
last field takes the rest of the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apron.engine.templates import Field, split

_WRAPPERS = re.compile(r"^(?:format_gib|str|repr|int|float|round|len)\((.*)\)$")
_GIB_CALL = re.compile(r"^format_gib\(")
_QUOTED = re.compile(r"""^(['"])(.*)\1$""", re.S)
_INT = re.compile(r"^-?\d{1,3}(?:,\d{3})+$|^-?\d+$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?$|^-?\d+[eE][-+]?\d+$")


def field_name(expr: str) -> str:
    """A readable group name for a field expression: `self.max_num_seqs` -> max_num_seqs,
    `format_gib(needed_memory)` -> needed_memory_gib, `kv_cache_config.num_blocks` -> num_blocks."""
    suffix = "_gib" if _GIB_CALL.match(expr) else ""
    inner = expr
    while (m := _WRAPPERS.match(inner)) is not None:
        inner = m.group(1)
    call = re.fullmatch(r"(.*?)\((.*)\)", inner)
    if call:  # `x.join(names)` names its argument; `cfg.get_min_capability()` its method
        inner = call.group(2) if re.fullmatch(r"[\w.]+", call.group(2)) else call.group(1)
    words = re.findall(r"[A-Za-z_]\w*", inner)
    name = words[-1] if words else "value"
    if name in ("self", "get"):
        name = "value"
    if name.startswith("get_") and len(name) > 4:
        name = name[4:]
    return (name.strip("_") or "value") + suffix


@dataclass(frozen=True)
class TemplatePattern:
    """A compiled template: the strict regex, the truncated ones, and what to look for first."""

    template: str
    regex: re.Pattern
    truncated: tuple[re.Pattern, ...]
    groups: tuple[tuple[str, str], ...]  # (group name, field expression)
    anchor: str  # the longest literal run: a message without it cannot match
    literal_chars: int

    def match(self, message: str) -> tuple[dict[str, str], bool] | None:
        """(raw field values, exact) or None. Exact: the whole template matched."""
        found = self.regex.fullmatch(message)
        if found:
            return found.groupdict(), True
        for pattern in self.truncated:
            found = pattern.fullmatch(message)
            if found:
                return found.groupdict(), False
        return None


MIN_TRUNCATED_LITERAL = 24


def compile_template(template: str) -> TemplatePattern | None:
    """None for templates too bare to recognise (mostly a field, no words of their own)."""
    parts = split(template)
    anchor = anchor_of(parts)
    if anchor is None:
        return None
    pieces, names = _pieces(parts)
    regex = re.compile("".join(pieces), re.S)
    truncated = [
        re.compile("".join(pieces[:index]) + f"(?P<{names[index]}>.*)", re.S)
        for index in _cut_points(parts)
        if names[index]
    ]
    groups = tuple((n, p.expr) for n, p in zip(names, parts, strict=True) if n and isinstance(p, Field))
    literal_chars = sum(len(p.strip()) for p in parts if isinstance(p, str))
    return TemplatePattern(template, regex, tuple(reversed(truncated)), groups, anchor, literal_chars)


def _cut_points(parts: list) -> list[int]:
    """The fields after which a clipped message may end: enough of the template's own words before."""
    points, covered = [], 0
    for index, part in enumerate(parts[:-1]):
        if isinstance(part, str):
            covered += len(part.strip())
        elif covered >= MIN_TRUNCATED_LITERAL:
            points.append(index)
    return points


def anchor_of(parts: list) -> str | None:
    """The longest literal run every match contains, clipped ones included: a message without it
    cannot match, so only templates whose anchor is in the message are tried. None: too bare."""
    cuts = _cut_points(parts)
    head = parts[: cuts[0]] if cuts else parts
    literals = [p.strip() for p in head if isinstance(p, str)]
    anchor = max(literals, key=len, default="")
    return anchor if len(anchor) >= 8 else None


def _pieces(parts: list) -> tuple[list[str], list[str | None]]:
    """The regex piece of each part, and the group name each field defines (None for a literal or
    a repeated expression, which becomes a back-reference: it renders the same text twice)."""
    pieces: list[str] = []
    names: list[str | None] = []
    used: dict[str, int] = {}
    by_expr: dict[str, str] = {}
    for part in parts:
        if isinstance(part, str):
            pieces.append(_literal(part))
            names.append(None)
        elif part.expr in by_expr:
            pieces.append(f"(?P={by_expr[part.expr]})")
            names.append(None)
        else:
            name = by_expr[part.expr] = _unique(field_name(part.expr), used)
            pieces.append(f"(?P<{name}>{_field_regex(part)})")
            names.append(name)
    return pieces, names


def _unique(name: str, used: dict[str, int]) -> str:
    name = re.sub(r"\W", "_", name)
    if name[0].isdigit():
        name = "f_" + name
    count = used.get(name, 0)
    used[name] = count + 1
    return name if count == 0 else f"{name}_{count + 1}"


def _literal(text: str) -> str:
    """Inner whitespace matches any whitespace; whitespace at a literal's edges may also be absent
    (a message is clipped or re-wrapped there)."""
    tokens = re.split(r"(\s+)", text)
    out = []
    for index, token in enumerate(tokens):
        if index % 2 == 0:
            out.append(re.escape(token))
        else:
            at_edge = index == 1 and tokens[0] == "" or index == len(tokens) - 2 and tokens[-1] == ""
            out.append(r"\s*" if at_edge else r"\s+")
    return "".join(out)


def _field_regex(part: Field) -> str:
    if part.conversion == "r":
        return r"(?:'[^']*'|\"[^\"]*\"|.*?)"
    if re.fullmatch(r"[^}]*[dfeg%]", part.spec or "") and not part.spec.startswith("{"):
        return r"-?[\d,.]+(?:[eE][-+]?\d+)?%?"
    return r".*?"


def coerce(raw: str | None):
    """A captured field as the type it was rendered from: int, float, str (quotes removed) or None."""
    if raw is None:
        return None
    text = raw.strip()
    quoted = _QUOTED.match(text)
    if quoted:
        return quoted.group(2)
    if _INT.match(text):
        return int(text.replace(",", ""))
    if _FLOAT.match(text):
        return float(text)
    return text
