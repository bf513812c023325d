"""cli/fast.py parses `apron plan` / `apron fit` without click: on every command line it takes, its params
and the options it says were typed equal click's own (the click commands built from the same
declarations); every command line it does not take exactly so goes to click (None), which then reports
the error. And a plan through the console entry point imports no click at all."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import click
import pytest

from apron.cli.fast import parse
from apron.cli.options import AtLeast, Choice, CommandSpec, HumanInt, OptionSpec, PathArg
from apron.cli.plan import FIT, PLAN, fit_command, plan_command

COMMANDS = [(PLAN, plan_command), (FIT, fit_command)]


def _value(spec: OptionSpec, rng: random.Random) -> str:
    kind = spec.type
    if kind is int:
        return rng.choice(["1", "2", "8", "007", "1_024", "65536", " 4", "-3"])
    if kind is float:
        return rng.choice(["0.9", "0.85", "1e-1", "1", ".5"])
    if isinstance(kind, HumanInt):
        return rng.choice(["4096", "32k", "32K", "25.6k", "1M", "1g"] + (["auto"] if kind.or_auto else []))
    if isinstance(kind, Choice):
        return rng.choice(kind.values)
    if isinstance(kind, AtLeast):
        return str(rng.randint(kind.min, kind.min + 20))
    return rng.choice(["H100", "vllm==0.30.0", "fp8", "bfloat16", "main", "x y", "{}", "a=b"])


def _valid_line(command: CommandSpec, rng: random.Random) -> list[str]:
    """A command line click accepts: some of the options (each once, never a path), maybe SOURCE."""
    options = [s for s in command.options if not isinstance(s.type, PathArg)]
    chosen = rng.sample(options, rng.randint(0, min(8, len(options))))
    chosen += [s for s in command.options if s.required and s not in chosen]
    words: list[list[str]] = []
    for spec in chosen:
        flag = rng.choice(spec.flags)
        if spec.is_flag:
            words.append([flag])
        else:
            value = _value(spec, rng)
            words.append([f"{flag}={value}"] if rng.random() < 0.3 else [flag, value])
    if rng.random() < 0.8:
        words.insert(rng.randint(0, len(words)), [rng.choice(["Qwen/Qwen3-8B", "./model", "snap.json"])])
    return [word for group in words for word in group]


def _value_like_an_option(args: list[str]) -> bool:
    return any(args[i].startswith("--") and args[i + 1].startswith("-") for i in range(len(args) - 1))


def _click_parse(command: click.Command, args: list[str]) -> tuple[dict[str, Any], frozenset[str]]:
    ctx = command.make_context(command.name, list(args))
    typed = frozenset(
        key for key in ctx.params if ctx.get_parameter_source(key) is click.core.ParameterSource.COMMANDLINE
    )
    return ctx.params, typed


@pytest.mark.parametrize(("declaration", "command"), COMMANDS, ids=["plan", "fit"])
def test_the_parse_equals_click_s_on_generated_command_lines(declaration, command):
    rng = random.Random(f"fast-{declaration.name}")
    taken = 0
    for _ in range(400):
        args = _valid_line(declaration, rng)
        ours = parse(declaration, args)
        try:
            theirs = _click_parse(command, args)
        except click.ClickException:
            theirs = None  # click refuses it (e.g. --max-model-len auto): ours must leave it to click
        if ours is None:
            assert theirs is None or _value_like_an_option(args), args
            continue
        assert ours == theirs, args
        taken += 1
    assert taken > 300


@pytest.mark.parametrize(
    "args",
    [
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--tp", "x"],  # not an integer
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--tp"],  # no value
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--gpu", "L4"],  # twice
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--nope"],  # unknown
        ["Qwen/Qwen3-8B", "second", "--gpu", "H100"],  # a second positional
        ["--help"],
        ["-h"],
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--mm-encoder-tp-mode", "Weights"],  # not a choice
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "-1"],  # a value like an option
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--enforce-eager=1"],  # a flag with a value
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--html", "out.html"],  # a path: click checks its kind
        ["Qwen/Qwen3-8B", "--", "--gpu"],
        ["Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "32q"],
    ],
)
def test_what_it_does_not_take_goes_to_click(args):
    assert parse(PLAN, args) is None


def test_fit_without_its_required_option_goes_to_click():
    assert parse(FIT, ["Qwen/Qwen3-8B", "--context", "8k"]) is None
    assert parse(FIT, ["Qwen/Qwen3-8B", "--users", "4", "--top", "0"]) is None  # below IntRange(min=1)


def test_a_plan_through_the_entry_point_imports_no_click_and_keeps_the_exit_codes():
    code = (
        "import sys; from apron.cli import main; codes = [main(['plan', 'Qwen/Qwen3-8B', '--gpu', 'H100', '--json'])];"
        "clicked = 'click' in sys.modules; codes.append(main(['plan', 'Qwen/Qwen3-8B', '--gpu', 'H100', '--tp', 'x']));"
        "print(codes, clicked, 'click' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    last = out.stderr.strip().splitlines()
    assert last[-1] == "[0, 2] False True", out.stderr
    assert "Invalid value for '--tp'" in out.stderr  # click's own message, from the fallback
    assert '"schema": "apron.plan/1"' in out.stdout
