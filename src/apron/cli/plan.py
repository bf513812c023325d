"""`apron plan` (one checkpoint on one GPU) and `apron fit` (the cheapest GPU x count for a load).

Declared as data (PLAN, FIT) with plain bodies: cli/fast.py parses a well-formed command line from the
declarations without click, and `plan_command` / `fit_command` are the click commands built from the
same declarations for everything else (--help, errors, MCP).
"""

from __future__ import annotations

from functools import cache

from apron.cli.options import GPU_OPTIONS, SETTINGS_OPTIONS, CommandSpec, specs
from apron.cli.shared import (
    candidate_plans,
    echo,
    emit_json,
    engine_option,
    exit_by_verdict,
    given_settings,
    plan_request,
    resolve_gpu_option,
    say,
)
from apron.errors import BadInput, Failed

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

PLAN = CommandSpec(
    "plan",
    "Will SOURCE fit, boot and answer on this GPU? SOURCE: a Hub repo id, a folder or a snapshot file.",
    "source",
    specs(*GPU_OPTIONS)
    + specs(*SETTINGS_OPTIONS)
    + specs("from_file", "deployment_name", "explain", "engine_diff", "html_file", "calibration_file")
    + specs("as_json", help="Print the apron.plan/1 JSON document."),
)

FIT = CommandSpec(
    "fit",
    "The cheapest GPU x count that serves --users requests of --context tokens, with the flags it needs.\n\n"
    "Exit 0 with a feasible configuration, 1 with none (the table says why).",
    "source",
    specs("context", "users", "gpus", "max_gpus", "engine", "revision", "prices_file", "tier", group="Options")
    + specs("provider", "allow_fp8_kv", "min_tokens_per_second", "top")
    + specs(
        "from_file", group="Options", help="Start from a deployment another tool proposed (as `apron plan --from`)."
    )
    + specs("deployment_name", group="Options")
    + specs(
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "kv_cache_dtype",
        "dtype",
        "enforce_eager",
        "language_model_only",
        "no_catalog",
        group="Options",
    )
    + specs("as_json", group="Options", help="Print the apron.fit/1 JSON document."),
)


def run_plan(params: dict[str, Any], typed: frozenset[str]) -> None:
    """`apron plan`: PARAMS as PLAN declares them; TYPED, those given on the command line."""
    settings = dict(params)
    source, gpu, from_file = settings.pop("source"), settings.pop("gpu"), settings.pop("from_file")
    explain, engine_diff, html_file = settings.pop("explain"), settings.pop("engine_diff"), settings.pop("html_file")
    calibration_file, as_json = settings.pop("calibration_file"), settings.pop("as_json")
    from apron.plan.planner import engine_diff as diff_plans
    from apron.plan.planner import plan_checkpoint

    calibration = None
    if calibration_file:
        from apron.plan.calibration import read_calibration

        calibration = read_calibration(calibration_file)
    candidate = None
    if from_file:
        plans = candidate_plans(from_file, source, gpu, settings, calibration, typed)
        if len(plans) > 1:
            _print_deployments(plans, as_json)
            return
        candidate = plans[0]
        plan, document = candidate.plan, candidate.to_json()
        checkpoint, target, user = candidate.checkpoint, candidate.gpu, candidate.user
    else:
        if not source:
            raise BadInput("Missing argument 'SOURCE': give a model, or --from FILE (a deployment to check)")
        if not gpu:
            raise BadInput(
                "--gpu is required: the GPU to plan for (e.g. H100, 4090; see `apron gpus`), "
                "or --from FILE, a deployment naming one"
            )
        target = resolve_gpu_option(gpu, settings)
        request = plan_request(source, target, settings)
        from apron.checkpoint import load_checkpoint

        checkpoint = load_checkpoint(request.source, request.revision, use_catalog=request.use_catalog)
        user = request.user
        plan = plan_checkpoint(checkpoint, target, user, request.engine_version, calibration)
        document = plan.to_json()
    if html_file:
        from pathlib import Path

        from apron.report.page import write_plan_html  # the chart library loads only here

        say(f"apron: wrote {write_plan_html(document, Path(html_file))}")
    diff = None
    if engine_diff:
        diff = diff_plans(plan, plan_checkpoint(checkpoint, target, user, engine_option(engine_diff)))
    if as_json:
        if diff is not None:
            document["engine_diff"] = diff
        emit_json(document)
        exit_by_verdict(plan)
        return
    from apron.report.card import render_card, render_engine_diff

    echo(render_card(plan))
    if candidate is not None:
        from apron.report.fit import render_candidate

        echo("")
        echo(render_candidate(document["candidate"]))
    if explain:
        from apron.report.explain import render_explain

        echo("")
        echo(render_explain(plan))
    if diff is not None:
        echo("")
        echo(render_engine_diff(diff))
    exit_by_verdict(plan)


def _print_deployments(plans: tuple[Any, ...], as_json: bool) -> None:
    """Several deployments in one file: a card each (or the apron.plan-set/1 document); exit 0 when all fit."""
    from apron.plan.candidate import deployments_json

    document = deployments_json(plans)
    if as_json:
        emit_json(document)
    else:
        from apron.report.card import render_card
        from apron.report.fit import render_candidate

        for n, (one, doc) in enumerate(zip(plans, document["plans"], strict=True)):
            echo(("" if n == 0 else "\n") + f"== deployment {n + 1} of {len(plans)}: {one.candidate.name}")
            echo(render_card(one.plan))
            echo("")
            echo(render_candidate(doc["candidate"]))
    failed = [str(p.candidate.name) for p in plans if p.plan.verdict != "fits"]
    if failed:
        raise Failed(f"not every deployment fits ({', '.join(failed)})", quiet=True)


def run_fit_command(params: dict[str, Any], typed: frozenset[str]) -> None:
    """`apron fit`: PARAMS as FIT declares them; TYPED, those given on the command line."""
    settings = dict(params)
    source, users, context = settings.pop("source"), settings.pop("users"), settings.pop("context")
    gpus, max_gpus, engine = settings.pop("gpus"), settings.pop("max_gpus"), settings.pop("engine")
    revision, prices_file, tier = settings.pop("revision"), settings.pop("prices_file"), settings.pop("tier")
    provider, allow_fp8_kv = settings.pop("provider"), settings.pop("allow_fp8_kv")
    min_tokens_per_second, top = settings.pop("min_tokens_per_second"), settings.pop("top")
    from_file, deployment_name = settings.pop("from_file"), settings.pop("deployment_name")
    no_catalog, as_json = settings.pop("no_catalog"), settings.pop("as_json")
    from apron.plan.fit import FitQuery, run_fit

    query = FitQuery(
        source,
        users,
        context,
        gpus=gpus,
        max_gpus=max_gpus,
        tier=tier,
        engine_version=engine_option(engine),
        prices=prices_file,
        revision=revision,
        use_catalog=not no_catalog,
        settings=given_settings(settings, typed),
        candidate_file=from_file,
        candidate_name=deployment_name,
        allow_fp8_kv=allow_fp8_kv,
        min_tokens_per_second=min_tokens_per_second,
        provider=provider,
    )
    document = run_fit(query).to_json()
    if as_json:
        emit_json(document)
    else:
        from apron.report.fit import render_fit

        echo(render_fit(document, top))
    if not document["num_feasible"]:
        raise Failed(f"no configuration serves {users} users at {document['request']['context_tokens']:,} tokens")


@cache
def __getattr__(name: str) -> Any:
    """The click commands (`apron.cli.COMMANDS` names them), built from the declarations on first use."""
    if name == "plan_command":
        return PLAN.click_command(run_plan)
    if name == "fit_command":
        return FIT.click_command(run_fit_command)
    raise AttributeError(f"module 'apron.cli.plan' has no attribute {name!r}")
