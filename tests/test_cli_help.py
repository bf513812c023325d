"""`apron --help` without click (cli/help.py) prints the page the click group prints (`apron` alone, or
--help after another option, goes through click): one text at every width, every command listed from
its summary, no line wider than the width."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from apron.cli.commands import SUMMARIES
from apron.cli.help import shortened, top_help

FAST = "import sys; from apron.cli import main; sys.exit(main(['--help']))"
CLICK = "import sys; from apron.cli.app import run_click; sys.exit(run_click(['--help']))"


def _page(code: str, columns: int) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("columns", [40, 64, 80, 100, 160])
def test_both_doors_print_one_page(columns):
    assert _page(FAST, columns) == _page(CLICK, columns)


@pytest.mark.parametrize("width", [50, 62, 78, 98])
def test_every_command_is_listed_within_the_width(width):
    page = top_help(width)
    assert all(len(line) <= width for line in page.splitlines()), page
    listed = {line.split()[0]: line.split(None, 1)[1] for line in page.split("Commands:\n")[1].splitlines()}
    assert sorted(listed) == sorted(SUMMARIES)
    for name, text in listed.items():
        assert SUMMARIES[name].startswith(text.removesuffix("...").rstrip(",;:")), name


def test_a_summary_is_cut_at_a_word_with_an_ellipsis():
    assert shortened("Read vLLM logs.", 30) == "Read vLLM logs."
    assert shortened("Will the model answer? Exit 1 if a check fails.", 30) == "Will the model answer? Exit..."
    assert shortened("One two three four", 12) == "One two..."
    assert len(shortened("A very long sentence without a stop", 20)) <= 20
