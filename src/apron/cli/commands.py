"""`apron`'s commands as data: where each lives, its one-line summary for `apron --help`, and the ones
cli/fast.py runs without click."""

from __future__ import annotations

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
