"""`apron plan` (one checkpoint on one GPU) and `apron fit` (the cheapest GPU x count for a load)."""

from __future__ import annotations

from typing import Any

import click

from apron.cli.groups import GroupedCommand
from apron.cli.options import GPU_OPTIONS, SETTINGS_OPTIONS, json_option, option, shared
from apron.cli.shared import (
    candidate_plans,
    emit_json,
    engine_option,
    exit_by_verdict,
    given_settings,
    plan_request,
    resolve_gpu_option,
    say,
)
from apron.errors import BadInput, Failed


@click.command("plan", cls=GroupedCommand)
@click.argument("source", required=False)
@shared(*GPU_OPTIONS)
@shared(*SETTINGS_OPTIONS)
@shared("from_file", "deployment_name")
@option("--explain", group="Output", is_flag=True, help="Show the memory breakdown and the tensors behind the peak.")
@option(
    "--engine-diff", "engine_diff", group="Output", help="Also plan on this vLLM release and show how the numbers move."
)
@option(
    "--html",
    "html_file",
    group="Output",
    type=click.Path(dir_okay=False),
    help="Also write the memory chart and card to FILE.",
)
@shared("calibration_file")
@json_option("Print the apron.plan/1 JSON document.")
def plan_command(
    source: str | None,
    gpu: str | None,
    from_file: str | None,
    explain: bool,
    engine_diff: str | None,
    html_file: str | None,
    calibration_file: str | None,
    as_json: bool,
    **settings: Any,
) -> None:
    """Will SOURCE fit, boot and answer on this GPU? SOURCE: a Hub repo id, a folder or a snapshot file."""
    from apron.plan.planner import engine_diff as diff_plans
    from apron.plan.planner import plan_checkpoint

    calibration = None
    if calibration_file:
        from apron.plan.calibration import read_calibration

        calibration = read_calibration(calibration_file)
    candidate = None
    if from_file:
        plans = candidate_plans(from_file, source, gpu, settings, calibration)
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

    click.echo(render_card(plan))
    if candidate is not None:
        from apron.report.fit import render_candidate

        click.echo("")
        click.echo(render_candidate(document["candidate"]))
    if explain:
        from apron.report.explain import render_explain

        click.echo("")
        click.echo(render_explain(plan))
    if diff is not None:
        click.echo("")
        click.echo(render_engine_diff(diff))
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
            click.echo(("" if n == 0 else "\n") + f"== deployment {n + 1} of {len(plans)}: {one.candidate.name}")
            click.echo(render_card(one.plan))
            click.echo("")
            click.echo(render_candidate(doc["candidate"]))
    failed = [str(p.candidate.name) for p in plans if p.plan.verdict != "fits"]
    if failed:
        raise Failed(f"not every deployment fits ({', '.join(failed)})", quiet=True)


@click.command("fit", cls=GroupedCommand)
@click.argument("source", required=False)
@shared("context", "users", "gpus", "max_gpus", "engine", "revision", "prices_file", "tier", group="Options")
@option(
    "--provider",
    group="Options",
    help="One provider's prices (e.g. RunPod, AWS; default: the cheapest listed per GPU).",
)
@option(
    "--allow-fp8-kv",
    group="Options",
    is_flag=True,
    help="Let fit switch the KV cache to fp8 where it falls short (changes accuracy).",
)
@option(
    "--min-tokens-per-second",
    group="Options",
    type=float,
    help="Drop rows whose decode bound per user is below this (a bound from bandwidth, not a benchmark).",
)
@option(
    "--top", group="Options", type=click.IntRange(min=1), default=10, show_default=True, help="Feasible rows to show."
)
@shared("from_file", group="Options", help="Start from a deployment another tool proposed (as `apron plan --from`).")
@shared("deployment_name", group="Options")
@shared(
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
@shared("as_json", group="Options", help="Print the apron.fit/1 JSON document.")
def fit_command(
    source: str | None,
    context: int | None,
    users: int,
    gpus: str | None,
    max_gpus: int,
    engine: str | None,
    revision: str | None,
    prices_file: str | None,
    tier: str,
    provider: str | None,
    allow_fp8_kv: bool,
    min_tokens_per_second: float | None,
    top: int,
    from_file: str | None,
    deployment_name: str | None,
    no_catalog: bool,
    as_json: bool,
    **settings: Any,
) -> None:
    """The cheapest GPU x count that serves --users requests of --context tokens, with the flags it needs.

    Exit 0 with a feasible configuration, 1 with none (the table says why)."""
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
        settings=given_settings(settings),
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

        click.echo(render_fit(document, top))
    if not document["num_feasible"]:
        raise Failed(f"no configuration serves {users} users at {document['request']['context_tokens']:,} tokens")
