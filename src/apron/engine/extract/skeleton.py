"""Blank out the bodies of functions the scan does not need, so `ast.parse` has half as much to read.

About half of vLLM's source is function bodies with no logger call and no raise. Parsing is most of
a sync's time, so `skeleton()` replaces such a body with `...` on its first line and blank lines
after it: line numbers and columns of everything kept stay those of the real file (hashes of
mirrored functions read the real text, not the skeleton).

A body is found by indentation. It is kept whole whenever that reading could be wrong: unbalanced
brackets or triple quotes, a trailing backslash, tabs, a one-line def, a `def` line that sits inside
a triple-quoted string. A wrong cut that slipped through would leave text that does not parse, and
the caller then parses the full file. A syntax error inside a body that is left out goes unnoticed:
nothing is read from that body.
"""

from __future__ import annotations

import fnmatch
import re
from bisect import bisect_left
from functools import lru_cache

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DEF = re.compile(r"\n( *)(?:async[ \t]+)?def[ \t]+(\w+)")  # a leading \n lets re skip ahead fast
_FIRST_CODE = re.compile(r"^( *)(?=[^ \r\n#])", re.M)
# What a body must keep: the scan reads logger calls, raises and message-returning helpers.
_NEEDED = re.compile(r"logger|logging\.|raise\b|return\s*\(?\s*[rbfuRBFU]*[\"']")


@lru_cache(maxsize=64)
def _dedent(indent: int) -> re.Pattern[str]:
    """The start of the first code line indented at most `indent` spaces: where a body ends."""
    return re.compile(rf"\n {{0,{indent}}}(?=[^ \r\n#])")


def _depth(text: str) -> int:
    return text.count("(") + text.count("[") + text.count("{") - text.count(")") - text.count("]") - text.count("}")


def _balanced(text: str) -> bool:
    return not (text.count('"""') % 2 or text.count("'''") % 2) and _depth(text) == 0


def _header_end(source: str, start: int) -> int | None:
    """Offset just past the line whose `:` ends the def header (brackets closed); None for a
    one-line def or a header this simple reading cannot follow."""
    depth, position = 0, start
    for _ in range(60):
        newline = source.find("\n", position)
        end = len(source) if newline < 0 else newline + 1
        code = source[position:end].split("#", 1)[0].rstrip()
        depth += _depth(code)
        if depth < 0:
            return None
        if depth == 0:
            return end if code.endswith(":") and newline >= 0 else None
        if newline < 0:
            return None
        position = end
    return None


@lru_cache(maxsize=8)
def protected_names(
    patterns: tuple[tuple[str, str | None], ...], extra: frozenset[str]
) -> tuple[re.Pattern[str], list[str]]:
    """(a regex of the def names whose bodies are kept, class names whose whole file is kept)."""
    names, classes = sorted(extra), []
    for qual, _ in patterns:
        head, _, last = qual.rpartition(".")
        if last == "*":
            classes.append(head.rpartition(".")[2])
        else:
            names.append(last)
    return re.compile("|".join(f"(?:{fnmatch.translate(name)})" for name in names) or "(?!)"), classes


def skeleton(source: str, keep_names: re.Pattern[str], keep_classes: list[str]) -> str | None:
    """The source with unneeded function bodies blanked, or None when nothing was blanked."""
    if "\t" in source or "\r" in source or any(f"class {name}" in source for name in keep_classes):
        return None
    pieces, done = [], 0
    quotes = {q: [m.start() for m in re.finditer(q, source)] for q in ('"""', "'''")}
    for match in _DEF.finditer("\n" + source):  # offsets in the padded text are one past the line start
        if match.start() < done or keep_names.match(match.group(2)):
            continue  # inside a body already blanked, or a function the scan reads
        if any(bisect_left(found, match.start()) % 2 for found in quotes.values()):
            continue  # a `def` line inside a triple-quoted string is text, not code
        body_start = _header_end(source, match.start())
        if body_start is None:
            continue
        found = _dedent(len(match.group(1))).search(source, body_start - 1)
        body_end = found.start() + 1 if found else len(source)
        body = source[body_start:body_end]
        first = _FIRST_CODE.search(body)
        if first is None or _NEEDED.search(body) or not _balanced(body) or body.rstrip().endswith("\\"):
            continue
        rest = body[first.start() :]
        pieces += [source[done:body_start], body[: first.start()], first.group(1), "...", "\n" * rest.count("\n")]
        done = body_end
    if not pieces:
        return None
    pieces.append(source[done:])
    return "".join(pieces)
