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
from typing import Any

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


# the commands cli/fast.py runs without click when their command line is well formed
FAST = ("plan", "fit")

# command name -> the first paragraph of its help: `apron --help` lists the commands from these and
# imports none of their modules (tests/test_cli_options.py: each is the command's own first paragraph).
SUMMARIES = {
    "plan": "Will SOURCE fit, boot and answer on this GPU? SOURCE: a Hub repo id, a folder or a snapshot file.",
    "fit": "The cheapest GPU x count that serves --users requests of --context tokens, with the flags it needs.",
    "boot": "Boot a plan on a real engine, measure it, and record prediction beside measurement.",
    "probe": "Boot a plan with the allocator probe: every block alive at the profiling peak, matched to the plan's "
    "buffers.",
    "records": "Plans, boots and fixes kept side by side (content-addressed JSON).",
    "calibrate": "Fit the terms the planner labels observed to the boots in the store, per release and GPU class, "
    "with the leave-one-out error of every quantity before and after (exit 1 when nothing is fitted).",
    "report": "Charts and a self-contained HTML page (OUT/index.html) from the records; prints the page's path.",
    "diagnose": "Find the decisive error in a failed boot's LOGFILE, the rule that corrects it, and whether the plan "
    "knew.",
    "rules": "Correction rules and their status (hypothesis or proven) per vLLM release.",
    "log": "Read vLLM logs.",
    "engine": "Engine facts: what each vLLM release supports and defaults to, read from its own source.",
    "check": "Will the model at URL answer the way users ask? Exit 1 if a check fails.",
    "serve-test": "How fast does the model at URL serve? vLLM's own `vllm bench serve`; exit 1 if requests fail.",
    "gpus": "List the GPU catalog: PyTorch's total bytes, compute capability, memory bandwidth, interconnect, aliases.",
    "models": "The bundled catalog: models `apron plan` reads with no network (id, architecture, layout, size).",
    "example": "Example inputs to try Apron with, made on this machine.",
    "mcp": "Serve Apron's tools (plan, fit, diagnose, records, engine list) to agents over MCP on stdio.",
}


def main(argv: list[str] | None = None) -> int:
    """Run the command line ARGV (default: this process's); the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in FAST:
        from apron.cli.fast import run_fast

        code = run_fast(args)
        if code is not None:
            return code
    from apron.cli.app import run_click

    return run_click(args)


def entry() -> None:
    sys.exit(main())


def __getattr__(name: str) -> Any:
    """`apron.cli.cli`, the click group (MCP and tests walk its commands), built on first use."""
    if name in ("cli", "LazyGroup"):
        from apron.cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'apron.cli' has no attribute {name!r}")
