"""`apron plan` and `apron fit` without click: a well-formed command line is parsed here from the same
declarations click's commands are built from (cli/plan.py PLAN and FIT, cli/options.py OPTIONS), and
the same body runs. Importing click is about 3x the interpreter's own start-up, more than the plan
itself; users run `plan` in loops and scripts and `fit` per question.

Anything this parser does not take exactly as click would is left to click (None), which then parses,
reports the error or prints the help as always: an unknown or old option name, a short option,
`--`, a repeated option, a missing value, a value that does not convert, a second positional, a path
option (click checks the path's kind), a missing required option. tests/test_cli_fast.py checks the
parse against click's on generated command lines.
"""

from __future__ import annotations

from apron.cli.options import AtLeast, Choice, CommandSpec, HumanInt, OptionSpec
from apron.errors import BadInput

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# command -> (module, declaration, body), the commands this path runs (apron.cli.FAST)
BODIES = {
    "plan": ("apron.cli.plan", "PLAN", "run_plan"),
    "fit": ("apron.cli.plan", "FIT", "run_fit_command"),
}


class _NotMine(Exception):
    """The command line is click's to parse."""


def run_fast(argv: list[str]) -> int | None:
    """The exit code of ARGV run here, or None when click should run it."""
    if not argv or argv[0] not in BODIES:
        return None
    import importlib

    module_name, declaration, body_name = BODIES[argv[0]]
    module = importlib.import_module(module_name)
    parsed = parse(getattr(module, declaration), argv[1:])
    if parsed is None:
        return None
    from apron.cli.shared import guarded

    body = getattr(module, body_name)
    return guarded(lambda: body(*parsed))


def parse(command: CommandSpec, args: list[str]) -> tuple[dict[str, Any], frozenset[str]] | None:
    """(params as click would pass them, the options typed), or None: not a command line for here."""
    try:
        return _parse(command, args)
    except _NotMine:
        return None


def _parse(command: CommandSpec, args: list[str]) -> tuple[dict[str, Any], frozenset[str]]:
    by_flag = {flag: spec for spec in command.options for flag in spec.flags}
    params: dict[str, Any] = {command.argument: None}
    params.update({spec.dest: False if spec.is_flag else spec.default for spec in command.options})
    typed: set[str] = set()
    positional = False
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if not word.startswith("-"):
            if positional:
                raise _NotMine
            params[command.argument], positional = word, True
            typed.add(command.argument)
            continue
        name, has_value, value = word.partition("=")
        spec = by_flag.get(name) if name.startswith("--") else None
        if spec is None or spec.dest in typed:
            raise _NotMine
        if spec.is_flag:
            if has_value:
                raise _NotMine
            params[spec.dest] = True
        else:
            if not has_value:
                if not rest or rest[0].startswith("-"):
                    raise _NotMine
                value = rest.pop(0)
            params[spec.dest] = _convert(spec, value)
        typed.add(spec.dest)
    if any(spec.required and spec.dest not in typed for spec in command.options):
        raise _NotMine
    return params, frozenset(typed)


def _convert(spec: OptionSpec, value: str) -> Any:
    """VALUE as click's type for SPEC converts it; _NotMine where click would refuse it (or checks
    the file system, as its Path type does)."""
    kind = spec.type
    try:
        if kind is None or kind is str:
            return value
        if kind is int or kind is float:
            return kind(value)
        if isinstance(kind, HumanInt):
            return kind.parse(value)
        if isinstance(kind, Choice) and value in kind.values:
            return value
        if isinstance(kind, AtLeast) and int(value) >= kind.min:
            return int(value)
    except (ValueError, BadInput):
        pass
    raise _NotMine
