"""Turn an engine message template (an f-string read from vLLM's source) into a regex.

A template marks its fields as `{expr}`, `{expr!r}` or `{expr:spec}` and doubles literal braces, as
f-strings do; a template with no such field may use printf conversions (`%s`, `%d`: a message
raised as `ValueError("... %s ...", value)`). Each field becomes a named group, so a rendered message
gives its values back. The engine facts list the templates (`refusals`), so a new release brings its
messages without code.

Fields are typed: a count, a size or a `:d`/`:.2f` spec takes a number and nothing else, a `!r`
field a quoted value, the rest text, matched non-greedily between the template's literal parts. So a
message followed by anything (a summary's "(config/compilation.py:1535 fn)", a note) still gives each
field its own value. Messages also reach us cut short (a summary that stops after a sentence, a line
clipped by a harness), so a template yields "truncated" patterns too: the template cut after each
field; a typed field there takes its value and no more, a text field the rest of the line.
"""

from __future__ import annotations

import re

from apron.engine.templates import Field, split
from apron.frozen import frozen

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


@frozen
class TemplatePattern:
    """A compiled template: the strict regex, the truncated ones, and what to look for first."""

    template: str
    regex: re.Pattern[str]  # the whole template, typed fields
    loose: re.Pattern[str]  # the whole template, every field text (a count rendered as "auto", say)
    suffixed: re.Pattern[str] | None  # the whole template, then anything: None when it ends in a text field
    truncated: tuple[re.Pattern[str], ...]  # longest first
    groups: tuple[tuple[str, str], ...]  # (group name, field expression)
    anchor: str  # the longest literal run: a message without it cannot match
    literal_chars: int

    def match(self, message: str) -> TemplateMatch | None:
        for regex, exact in ((self.regex, True), (self.loose, True), (self.suffixed, True)):
            found = regex.fullmatch(message) if regex is not None else None
            if found:
                values = found.groupdict()
                suffix = values.pop(SUFFIX_GROUP, None) or None
                return TemplateMatch(values, exact, suffix.strip() if suffix else None)
        for pattern in self.truncated:
            found = pattern.fullmatch(message)
            if found:
                values = found.groupdict()
                values.pop(SUFFIX_GROUP, None)
                return TemplateMatch(values, False, None)
        return None


@frozen
class TemplateMatch:
    values: dict[str, str]  # raw field values
    exact: bool  # the whole template matched (False: the message was cut short)
    suffix: str | None  # what followed the whole template


MIN_TRUNCATED_LITERAL = 24
SUFFIX_GROUP = "apron_suffix"
_MIN_SUFFIXED_TAIL = 8  # a template followed by more text must end in words of its own


def compile_template(template: str) -> TemplatePattern | None:
    """None for templates too bare to recognise (mostly a field, no words of their own)."""
    parts = template_parts(template)
    anchor = anchor_of(parts)
    if anchor is None:
        return None
    pieces, names = _pieces(parts, typed=True)
    loose, _ = _pieces(parts, typed=False)
    regex = re.compile("".join(pieces), re.S)
    tail = parts[-1] if parts else ""
    suffixed = (
        re.compile("".join(pieces) + rf"(?P<{SUFFIX_GROUP}>[\s(\[{{,;:].*)", re.S)
        if isinstance(tail, str) and len(tail.strip()) >= _MIN_SUFFIXED_TAIL
        else None
    )
    cuts = [index for index in _cut_points(parts) if names[index]]
    truncated = [re.compile("".join(pieces[:index]) + _cut_field(parts[index], names[index]), re.S) for index in cuts]
    # Cut inside a typed value ("(73..."): the words before it still name the family; the value stays absent.
    unvalued = [
        re.compile("".join(pieces[:index]) + f"(?P<{SUFFIX_GROUP}>.*)", re.S)
        for index in cuts
        if isinstance(part := parts[index], Field) and field_type(part) != "text"
    ]
    groups = tuple((n, p.expr) for n, p in zip(names, parts, strict=True) if n and isinstance(p, Field))
    literal_chars = sum(len(p.strip()) for p in parts if isinstance(p, str))
    return TemplatePattern(
        template,
        regex,
        re.compile("".join(loose), re.S),
        suffixed,
        (*reversed(truncated), *reversed(unvalued)),
        groups,
        anchor,
        literal_chars,
    )


def _cut_field(part: str | Field, name: str | None) -> str:
    """The last field of a clipped message: a typed one takes its value (whole: a number cut by an
    ellipsis is not its value) and the rest is ignored; a text one takes the rest."""
    assert isinstance(part, Field) and name
    kind = field_type(part)
    if kind == "text":
        return f"(?P<{name}>.*)"
    return f"(?P<{name}>{_TYPED[kind]})(?![\\d,]|\\.\\d|\\.\\.|…)(?P<{SUFFIX_GROUP}>.*)"


# printf conversions: `%s`, `%d`, `%.2f`, `%r`, `%(name)s`; `%%` is a literal percent sign.
PRINTF = re.compile(
    r"%(?:\((?P<key>\w+)\))?(?P<flags>[-+ #0]*)(?P<width>\d+|\*)?(?:\.(?P<prec>\d+))?(?P<conv>[sdifrgeExXc%])"
)


def template_parts(template: str) -> list[str | Field]:
    """The literal text and fields of a template: f-string fields, or printf conversions when it has none."""
    parts = split(template)
    if any(isinstance(p, Field) for p in parts) or "%" not in template:
        return parts
    out: list[str | Field] = []
    literal, last, index = "", 0, 0
    for m in PRINTF.finditer(template):
        literal += template[last : m.start()]
        last = m.end()
        if m["conv"] == "%":
            literal += "%"
            continue
        if literal:
            out.append(literal)
            literal = ""
        spec = f".{m['prec']}{m['conv']}" if m["prec"] else (m["conv"] if m["conv"] in "dif" else "")
        out.append(Field(m.group(0), m["key"] or f"arg{index}", "r" if m["conv"] == "r" else None, spec))
        index += 1
    literal += template[last:]
    if literal:
        out.append(literal)
    return out


def _cut_points(parts: list[str | Field]) -> list[int]:
    """The fields after which a clipped message may end: enough of the template's own words before."""
    points, covered = [], 0
    for index, part in enumerate(parts[:-1]):
        if isinstance(part, str):
            covered += len(part.strip())
        elif covered >= MIN_TRUNCATED_LITERAL:
            points.append(index)
    return points


def anchor_of(parts: list[str | Field]) -> str | None:
    """The longest literal run every match contains, clipped ones included: a message without it
    cannot match, so only templates whose anchor is in the message are tried. None: too bare."""
    cuts = _cut_points(parts)
    head = parts[: cuts[0]] if cuts else parts
    literals = [p.strip() for p in head if isinstance(p, str)]
    anchor = max(literals, key=len, default="")
    return anchor if len(anchor) >= 8 else None


def _pieces(parts: list[str | Field], *, typed: bool) -> tuple[list[str], list[str | None]]:
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
            pieces.append(f"(?P<{name}>{_field_regex(part) if typed else '.*?'})")
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


# A field counts or measures something when its name says so: `num_blocks`, `max_num_seqs`,
# `block_size`, `needed_memory` (inside format_gib), `capability`.
_NUMERIC_NAME = re.compile(
    r"^(?:num|max|min|n|total)_|_(?:size|len|length|blocks|seqs|reqs|tokens|count|bytes|gib|memory|dim|"
    r"heads|layers|experts|rank|index|capability|ratio)$|^(?:capability|tensor_parallel_size|block_size)$"
)
_TYPED = {
    "number": r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|-?inf|nan",
    "quoted": r"'[^'\n]*'|\"[^\"\n]*\"",
}


def field_type(part: Field) -> str:
    """ "number", "quoted" or "text": what the field renders as, from its conversion, its format spec,
    a format_gib() call, or the name of what it holds."""
    if part.conversion == "r":
        return "quoted" if not _NUMERIC_NAME.search(field_name(part.expr)) else "number"
    if re.fullmatch(r"[^{}]*[dfeg%]", part.spec or ""):
        return "number"
    if _GIB_CALL.match(part.expr) or _NUMERIC_NAME.search(field_name(part.expr)):
        return "number"
    return "text"


def _field_regex(part: Field) -> str:
    kind = field_type(part)
    if kind == "number":
        return f"(?:{_TYPED['number']})" + ("%?" if part.spec.endswith("%") else "")
    if kind == "quoted":
        return rf"(?:{_TYPED['quoted']}|.*?)"  # !r of a list or a number renders unquoted
    return r".*?"


def coerce(raw: str | None) -> int | float | str | None:
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
