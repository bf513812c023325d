"""Plain-text tables for the terminal: a header row, a rule, columns padded to their widest cell."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def render_table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Columns in RIGHT are right-aligned (numbers); the rest left-aligned. An empty table says so."""
    body = [[str(cell) for cell in row] for row in rows]
    if not body:
        return "(none)"
    widths = [max(len(headers[i]), *(len(row[i]) for row in body)) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(padded).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(row) for row in body)])
