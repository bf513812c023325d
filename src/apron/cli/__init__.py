"""The `apron` command line: thin command modules over the packages; data on stdout, messages on stderr.

Exit codes: 0 ok, 1 failed, 2 bad input. A traceback only with APRON_DEBUG=1 (cli/shared.py).
Each command lives in the module of its group (plan/fit, boot/probe, records/report, rules/diagnose/log,
engine, models/gpus/example, check/serve-test, mcp) and is imported only when it runs, so a plan does
not pay for the other commands' imports; options shared between commands are declared once
(cli/options.py).
"""

from __future__ import annotations

import importlib
import sys

import click

from apron.cli.options import GroupedGroup
from apron.cli.shared import run

# command name -> "module:attribute" of the click command, imported on first use
COMMANDS = {
    "plan": "apron.cli.plan:plan_command",
    "fit": "apron.cli.plan:fit_command",
    "boot": "apron.cli.boot:boot_command",
    "probe": "apron.cli.boot:probe_command",
    "records": "apron.cli.records:records_group",
    "calibrate": "apron.cli.records:calibrate_command",
    "report": "apron.cli.records:report_command",
    "diagnose": "apron.cli.rules:diagnose_command",
    "rules": "apron.cli.rules:rules_group",
    "log": "apron.cli.rules:log_group",
    "engine": "apron.cli.engine:engine_group",
    "check": "apron.cli.measure:check_command",
    "serve-test": "apron.cli.measure:serve_test_command",
    "gpus": "apron.cli.catalog:gpus_command",
    "models": "apron.cli.catalog:models_command",
    "example": "apron.cli.catalog:example_group",
    "mcp": "apron.cli.mcp:mcp_command",
}


class LazyGroup(GroupedGroup):
    """`apron`'s commands, each imported from its module the first time it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

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


def main(argv: list[str] | None = None) -> int:
    return run(cli, argv)


def entry() -> None:
    sys.exit(main())
