"""`apron` as a click group: every command but the fast path's (cli/fast.py) runs through it, and
so do --help, --version and every command line the fast path leaves to click."""

from __future__ import annotations

import importlib

import click

from apron.cli.commands import COMMANDS
from apron.cli.groups import GroupedGroup, run


class LazyGroup(GroupedGroup):
    """`apron`'s commands, each imported from its module the first time it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The page cli/help.py writes without click (`apron --help`), so both doors print one text; it
        lists the commands from SUMMARIES and imports none of their modules."""
        from apron.cli.help import top_help

        formatter.write(top_help(formatter.width) + "\n")

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return self.commands.get(cmd_name)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="apron", prog_name="apron")
def cli() -> None:
    """Will this LLM fit, boot and answer on this GPU with this vLLM release - and with which flags?"""


def run_click(argv: list[str]) -> int:
    return run(cli, argv)
