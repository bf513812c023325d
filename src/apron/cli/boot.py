"""`apron boot` (a plan on a real engine, measured and recorded) and `apron probe` (the same boot with the
allocator probe, printing the probe record)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from apron.cli.groups import GroupedCommand
from apron.cli.options import (
    GPU_OPTIONS,
    SERVING_OPTIONS,
    SETTINGS_OPTIONS,
    json_option,
    option,
    records_option,
    shared,
)
from apron.cli.shared import candidate_plans, emit_json, plan_request, progress_printer, resolve_gpu_option, say
from apron.errors import BadInput, Failed

if TYPE_CHECKING:
    from apron.plan.result import Plan


@click.command("boot", cls=GroupedCommand)
@click.argument("source_or_plan", required=False)
@shared(
    "from_file",
    group="Plan",
    help="Boot a deployment another tool proposed (as `apron plan --from` reads it), planned first.",
)
@shared("deployment_name", group="Plan")
@option(
    "--on",
    "targets",
    group="Targets",
    multiple=True,
    required=True,
    help="local | ssh://user@host[:port] | sky[:cloud]. Repeat to name machines to retry a host fault on.",
)
@option(
    "--retries",
    group="Targets",
    type=click.IntRange(0, 10),
    default=2,
    show_default=True,
    help="Further attempts after a host fault, on the next --on target.",
)
@option(
    "--identity",
    "identity_file",
    group="Targets",
    type=click.Path(exists=True, dir_okay=False),
    help="ssh: private key.",
)
@option(
    "--known-hosts",
    "known_hosts_file",
    group="Targets",
    type=click.Path(exists=True, dir_okay=False),
    help="ssh: known_hosts file to check the host key against.",
)
@option("--ssh-option", "ssh_options", group="Targets", multiple=True, help="ssh: an extra -o Key=Value (repeatable).")
@shared(*GPU_OPTIONS)
@shared(*SETTINGS_OPTIONS)
@option(
    "--vllm",
    "vllm_path",
    group="Engine on the target",
    help="The vllm executable on the target (default: vllm on PATH).",
)
@option("--venv", group="Engine on the target", help="A venv on the target that holds vllm (DIR/bin/vllm).")
@option(
    "--profile",
    group="Engine on the target",
    type=click.Choice(["gpu", "cpu"]),
    help="cpu adds the vLLM CPU build's flags: one process, a 64 MiB KV cache unless the plan sizes it "
    "(default: cpu for a plan made with --gpu cpu, else gpu).",
)
@option(
    "--extra-args",
    group="Engine on the target",
    help='More vllm serve arguments, appended last (e.g. "--kv-cache-memory-bytes 1e8").',
)
@option(
    "--env",
    "env_pairs",
    group="Engine on the target",
    multiple=True,
    help="KEY=VALUE for the engine's environment (repeatable).",
)
@option(
    "--log-level",
    group="Engine on the target",
    type=click.Choice(["INFO", "DEBUG"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="The engine's VLLM_LOGGING_LEVEL.",
)
@option(
    "--health-timeout",
    group="Engine on the target",
    type=float,
    default=1800,
    show_default=True,
    help="Seconds to wait for /health.",
)
@option(
    "--weights", group="Engine on the target", help="A local checkpoint folder to boot instead of the plan's source."
)
@option("--served-model-name", group="Engine on the target", help="Default: the repo id or the folder name.")
@option(
    "--allow-engine-mismatch",
    group="Engine on the target",
    is_flag=True,
    help="Boot a plan made for another vLLM release than the engine's (the record notes it).",
)
@option(
    "--workdir",
    group="Engine on the target",
    help="Folder on the target for runs and downloads (default ~/.cache/apron).",
)
@option(
    "--keep-run-dir", group="Engine on the target", is_flag=True, help="Leave the run folder on the target (debugging)."
)
@option(
    "--suite",
    group="Checks",
    type=click.Choice(["short", "deploy", "none"]),
    help="Checks after /health (default: short on one GPU, deploy on several).",
)
@shared("reasoning_effort")
@option(
    "--serve-test/--no-serve-test",
    group="Serving test",
    default=True,
    show_default=True,
    help="Run vllm bench serve next to the engine after the checks.",
)
@shared(*SERVING_OPTIONS)
@option(
    "--fix",
    group="Corrections",
    is_flag=True,
    help="On a model failure, apply the matching correction rule and boot again.",
)
@option(
    "--fix-attempts",
    group="Corrections",
    type=click.IntRange(1, 5),
    default=2,
    show_default=True,
    help="Corrected boots at most.",
)
@option(
    "--probe",
    group="Measurement",
    is_flag=True,
    help="Record the allocator inside the engine's profiling run and write a probe record (as apron probe).",
)
@records_option
@json_option("Print the boot record as JSON.")
def boot_command(
    source_or_plan: str | None,
    from_file: str | None,
    targets: tuple[str, ...],
    gpu: str | None,
    as_json: bool,
    **opts: Any,
) -> None:
    """Boot a plan on a real engine, measure it, and record prediction beside measurement.

    SOURCE_OR_PLAN: a saved plan (apron.plan/1 JSON, a plan record file or id) or a model SOURCE,
    which is planned first (then --gpu is needed)."""
    from apron.boot.answers import AnswerSettings
    from apron.boot.command import parse_extra_args
    from apron.boot.hosts import SshSettings
    from apron.boot.request import BootRequest, failure, parse_env, probe_failure, run_boot
    from apron.boot.session import BootOptions

    plan = None
    if from_file:
        say(f"apron: planning the deployment in {from_file}")
        from apron.plan.candidate import one_deployment

        chosen = one_deployment(candidate_plans(from_file, source_or_plan, gpu, opts), "boot")
        plan = chosen.boot_plan()  # the file's flags; boot sets how the server is reached
        opts["env_pairs"] = tuple(f"{k}={v}" for k, v in chosen.engine_env.items()) + tuple(opts["env_pairs"])
    elif not source_or_plan:
        raise BadInput("give SOURCE_OR_PLAN, or --from FILE (a deployment to boot)")
    request = BootRequest(
        source_or_plan=source_or_plan or str(from_file),
        plan=plan,
        targets=targets,
        options=BootOptions(
            vllm=opts["vllm_path"],
            venv=opts["venv"],
            profile=opts["profile"],
            extra_args=parse_extra_args(opts["extra_args"]),
            extra_env=parse_env(opts["env_pairs"]),
            log_level=opts["log_level"].upper(),
            health_timeout_seconds=opts["health_timeout"],
            workdir=opts["workdir"],
            weights=opts["weights"],
            served_model_name=opts["served_model_name"],
            keep_run_dir=opts["keep_run_dir"],
            retries=opts["retries"],
            allow_engine_mismatch=opts["allow_engine_mismatch"],
        ),
        answers=AnswerSettings(
            opts["suite"],
            opts["serve_test"],
            opts["num_prompts"],
            opts["input_len"],
            opts["output_len"],
            opts["concurrency"],
            opts["reasoning_effort"],
        ),
        ssh=SshSettings(opts["identity_file"], opts["known_hosts_file"], tuple(opts["ssh_options"])),
        fix_attempts=opts["fix_attempts"] if opts["fix"] else 0,
        records=opts["records"],
        gpu=gpu,
        engine=opts["engine"],
        probe=opts["probe"] or opts.get("show_probe", False),
    )

    def planner(source: str, gpu_name: str, engine: str | None) -> Plan:
        from apron.plan.planner import make_plan

        settings = {**opts, "engine": engine}
        return make_plan(plan_request(source, resolve_gpu_option(gpu_name, settings), settings))

    outcome = run_boot(request, planner, progress=progress_printer())
    result = outcome.final
    if opts.get("show_probe"):
        _show_probe(result, as_json)
    elif as_json:
        emit_json({"id": result.record_id, **result.record.to_json()})
    else:
        from apron.records.report import render_boot

        click.echo(render_boot(result.record_id, result.record))
    if result.probe_id and not opts.get("show_probe"):
        say(f"apron: probe record {result.probe_id[:12]} ({result.probe.status if result.probe else '?'})")
    problem = failure(result) or (probe_failure(result) if request.probe else None)
    if problem:
        raise Failed(problem)


def _show_probe(result: Any, as_json: bool) -> None:
    """`apron probe` prints the probe record; the boot record is named on stderr."""
    probe = f"probe record {result.probe_id[:12]} of " if result.probe is not None else "no probe record; "
    say(f"apron: {probe}boot record {result.record_id[:12]} ({result.record.outcome})")
    if result.probe is None:
        return
    if as_json:
        emit_json({"id": result.probe_id, **result.probe.to_json()})
    else:
        from apron.records.probe_view import render_probe

        click.echo(render_probe(result.probe_id, result.probe))


def _probe_callback(**kwargs: Any) -> None:
    kwargs["probe"] = True
    boot_command.callback(**kwargs, show_probe=True)  # type: ignore[misc]


def _probe_params() -> list[click.Parameter]:
    import copy

    params = []
    for param in boot_command.params:
        if param.name == "probe":
            continue
        if param.name == "as_json":
            param = copy.copy(param)
            param.help = "Print the probe record as JSON."
        params.append(param)
    return params


probe_command = GroupedCommand(
    "probe",
    params=_probe_params(),
    callback=_probe_callback,
    help="Boot a plan with the allocator probe: every block alive at the profiling peak, matched to the "
    "plan's buffers.\n\nSOURCE_OR_PLAN and every option as `apron boot` takes them; prints the probe record "
    "(exit 1 when the boot fails or the probe records nothing).",
)
