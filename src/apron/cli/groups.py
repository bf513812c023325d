"""The click classes of `apron`'s commands: options listed under headings in --help, old option names
that still work (hidden, with a note). Apart from cli/options.py so that `apron --help`, which lists
the commands, does not build the option definitions."""

from __future__ import annotations

from typing import Any

import click


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
