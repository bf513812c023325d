"""The click classes of `apron`'s commands: options listed under headings in --help, old option names
that still work (hidden, with a note), and running the group with Apron's exit codes."""

from __future__ import annotations

from typing import Any

import click

from apron.cli.shared import guarded, say
from apron.errors import BadInput


class GroupedOption(click.Option):
    """An option listed under a heading in --help; OLD names still work but are not shown."""

    def __init__(self, *args: Any, group: str = "Options", old_names: tuple[str, ...] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.group, self.old_names = group, old_names

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown, self.opts = self.opts, [o for o in self.opts if o not in self.old_names]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


class GroupedCommand(click.Command):
    """Options in --help by group, in the order they are declared; a note on stderr for an old name."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is not None:
                groups.setdefault(getattr(param, "group", "Options"), []).append(record)
        groups["Options"] = groups.pop("Options", [])  # --help and the ungrouped ones, last
        for name, rows in groups.items():
            with formatter.section(name):
                formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for param in self.params:
            for old in getattr(param, "old_names", ()):
                if any(arg == old or arg.startswith(old + "=") for arg in args):
                    click.echo(f"apron: {old} is now {param.opts[0]}; the old name goes in the next release", err=True)
        return super().parse_args(ctx, args)


class GroupedGroup(click.Group):
    """A sub-group of `apron` whose commands list their options by group."""

    command_class = GroupedCommand
    group_class = type


def typed_on_command_line(params: dict[str, Any]) -> frozenset[str]:
    """The PARAMS the running click command got from its command line (not defaults)."""
    ctx = click.get_current_context()
    return frozenset(key for key in params if ctx.get_parameter_source(key) is click.core.ParameterSource.COMMANDLINE)


def run(group: click.Group, argv: list[str] | None) -> int:
    """Run the command line through click; every error becomes one line on stderr and its exit code."""
    return guarded(lambda: group.main(args=argv, prog_name="apron", standalone_mode=False), _click_error)


def _click_error(exc: Exception, debug: bool) -> int | None:
    if isinstance(exc, click.exceptions.Abort):
        say("apron: interrupted")
        return 130
    if isinstance(exc, click.ClickException):
        if debug:
            raise exc
        say(f"apron: error: {exc.format_message()}")
        return BadInput.exit_code if exc.exit_code == 2 else exc.exit_code
    return None
