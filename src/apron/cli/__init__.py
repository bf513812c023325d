"""The `apron` command line: thin command modules over the packages; data on stdout, messages on stderr.

Exit codes: 0 ok, 1 failed, 2 bad input. A traceback only with APRON_DEBUG=1 (cli/shared.py).
Each command lives in the module of its group (plan/fit, boot/probe, records/report, rules/diagnose/log,
engine, models/gpus/example, check/serve-test, mcp) and is imported only when it runs, so a plan does
not pay for the other commands' imports, and `apron --help` lists them from SUMMARIES without importing
any; options shared between commands are declared once (cli/options.py).

This module imports no click: `apron plan` and `apron fit` on a well-formed command line run without it
(cli/fast.py, parsed from the same option definitions), the rest through the click group (cli/app.py).
"""

from __future__ import annotations

import sys

from apron.cli.commands import COMMANDS, FAST, SUMMARIES

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["COMMANDS", "FAST", "SUMMARIES", "entry", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line ARGV (default: this process's); the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args in (["--help"], ["-h"]):
        from apron.cli.help import print_top_help

        return print_top_help()
    if args and args[0] in FAST:
        from apron.cli.fast import run_fast

        code = run_fast(args)
        if code is not None:
            return code
    from apron.cli.app import run_click

    return run_click(args)


def entry() -> None:
    """The `apron` console script. `apron plan`, `apron fit` and `apron --help` are short-lived
    processes that make no reference cycles worth collecting: the cyclic collector only costs them
    time (its passes over the modules being imported), and freezing what is alive at the end spares
    the interpreter's collection at exit; together about a seventh of a plan's wall time
    (benchmarks/plan_speed.py). Every other command (a boot, the MCP server) keeps the collector on."""
    args = sys.argv[1:]
    if not (args in (["--help"], ["-h"]) or (args and args[0] in FAST)):
        sys.exit(main(args))
    import gc

    gc.disable()
    try:
        code = main(args)
    finally:
        gc.freeze()
    sys.exit(code)


def __getattr__(name: str) -> Any:
    """`apron.cli.cli`, the click group (MCP and tests walk its commands), built on first use."""
    if name in ("cli", "LazyGroup"):
        from apron.cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'apron.cli' has no attribute {name!r}")
