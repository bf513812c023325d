"""One option vocabulary: the same name for the same thing on every command, options listed in groups
in --help, and each renamed option still working under its old name (hidden, with a note) for one
release (README, "Renamed options")."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from apron.cli import COMMANDS, SUMMARIES, cli

SERVING = ("--num-prompts", "--input-len", "--output-len", "--concurrency")
RENAMED = {
    ("boot", "--serve-prompts"): ("--num-prompts", "num_prompts"),
    ("boot", "--serve-input-len"): ("--input-len", "input_len"),
    ("boot", "--serve-output-len"): ("--output-len", "output_len"),
    ("boot", "--serve-concurrency"): ("--concurrency", "concurrency"),
    ("check", "--tool-parser"): ("--tool-call-parser", "tool_parser"),
}
ARGS = {"boot": ["plan.json", "--on", "local"], "check": ["http://127.0.0.1:1", "--model", "m"]}


def command(name: str) -> click.Command:
    found = cli.get_command(click.Context(cli), name)
    assert found is not None
    return found


def help_text(name: str) -> str:
    with click.Context(command(name), info_name=name) as ctx:
        return command(name).get_help(ctx)


def options(name: str) -> dict[str, click.Option]:
    return {opt: p for p in command(name).params if isinstance(p, click.Option) for opt in p.opts}


def test_the_serving_test_has_the_same_names_on_boot_and_serve_test():
    for name in SERVING:
        boot, serve = options("boot")[name], options("serve-test")[name]
        assert (boot.name, boot.default) == (serve.name, serve.default)


def test_shared_options_mean_the_same_thing_everywhere():
    for name in ("--engine", "--gpu", "--tp", "--max-model-len", "--revision", "--no-catalog"):
        assert options("plan")[name].name == options("boot")[name].name
    for cmd in ("boot", "diagnose"):
        assert options(cmd)["--records"].name == "records"
    assert options("boot")["--reasoning-effort"].type.choices == options("check")["--reasoning-effort"].type.choices


def test_help_lists_options_in_groups():
    text = help_text("boot")
    for heading in ("Targets:", "GPU:", "Engine settings:", "Engine on the target:", "Checks:", "Serving test:"):
        assert heading in text
    assert text.index("Targets:") < text.index("Serving test:") < text.index("Output:")


@pytest.mark.parametrize(("cmd", "old"), sorted(RENAMED))
def test_an_old_name_still_works_hidden_and_says_so(cmd, old, capsys):
    new, dest = RENAMED[(cmd, old)]
    assert old not in help_text(cmd) and new in help_text(cmd)
    ctx = command(cmd).make_context(cmd, [*ARGS[cmd], old, "8"])
    assert str(ctx.params[dest]) == "8"
    assert f"{old} is now {new}" in capsys.readouterr().err


def test_every_command_has_its_summary_and_the_summary_is_its_help():
    assert sorted(SUMMARIES) == sorted(COMMANDS)
    for name, summary in SUMMARIES.items():
        assert summary == " ".join((command(name).help or "").partition("\n\n")[0].split()), name


def test_the_group_s_help_imports_no_command():
    """The click group's page (`apron` alone) is cli/help.py's, from SUMMARIES: writing it builds no
    command (tests/test_cli_help.py checks it against the click-free door)."""
    fresh = type(cli)(name="apron", commands={})
    page = fresh.get_help(click.Context(fresh))
    assert all(name in page for name in SUMMARIES)
    assert fresh.commands == {}


def test_help_imports_no_command_module():
    code = (
        "import sys, apron.cli; apron.cli.main(['--help']); "
        "print(sorted(m for m in sys.modules if m.startswith(('apron.cli.', 'click'))), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "['apron.cli.commands', 'apron.cli.help']"
