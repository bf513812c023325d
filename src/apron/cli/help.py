"""`apron --help`: the usage, the options and the command list from SUMMARIES, written without click
(importing click is most of what --help would otherwise cost). The click group writes the same page
through `top_help` (cli/app.py), so both doors print one text."""

from __future__ import annotations

import os
import sys
import textwrap

from apron.cli.commands import SUMMARIES

DESCRIPTION = "Will this LLM fit, boot and answer on this GPU with this vLLM release - and with which flags?"
GROUP_OPTIONS = (("--version", "Show the version and exit."), ("-h, --help", "Show this message and exit."))
MAX_WIDTH = 100  # the group's max_content_width (cli/app.py)


def text_width() -> int:
    """The width click's help formatter takes: the terminal's columns (COLUMNS first, 80 off a
    terminal) up to MAX_WIDTH, less 2, and at least 50."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(min(columns, MAX_WIDTH) - 2, 50)


def top_help(width: int) -> str:
    """The page, WIDTH columns wide, without its last newline."""
    lines = ["Usage: apron [OPTIONS] COMMAND [ARGS]...", ""]
    lines += textwrap.wrap(DESCRIPTION, width, initial_indent="  ", subsequent_indent="  ")
    lines += ["", "Options:", *_rows(GROUP_OPTIONS, width), "", "Commands:"]
    names = sorted(SUMMARIES)
    limit = width - 6 - max(len(name) for name in names)
    lines += _rows([(name, shortened(SUMMARIES[name], limit)) for name in names], width)
    return "\n".join(lines)


def shortened(text: str, limit: int) -> str:
    """TEXT's first sentence if it fits in LIMIT characters, else its words up to LIMIT with '...'."""
    first = text.split(". ")[0].rstrip(".") + "." if ". " in text else text
    if len(first) <= limit:
        return first
    cut = text[: max(limit - 2, 0)]  # one character past the room left for '...': a word ending there fits
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut[:-1]).rstrip(",;:") + "..."


def _rows(rows: list[tuple[str, str]] | tuple[tuple[str, str], ...], width: int) -> list[str]:
    """Two columns: the names, and each text wrapped beside them."""
    column = max(len(name) for name, _ in rows) + 2
    out = []
    for name, text in rows:
        wrapped = textwrap.wrap(text, max(width - 2 - column, 10)) or [""]
        out.append(f"  {name.ljust(column)}{wrapped[0]}")
        out += [" " * (2 + column) + line for line in wrapped[1:]]
    return out


def print_top_help() -> int:
    sys.stdout.write(top_help(text_width()) + "\n")
    sys.stdout.flush()
    return 0
