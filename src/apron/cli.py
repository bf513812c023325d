"""The `apron` command line: thin wrappers over the packages; data on stdout, messages on stderr.

Exit codes: 0 ok, 1 failed, 2 bad input. A traceback only with APRON_DEBUG=1.
"""

from __future__ import annotations

import json
import os
import sys

import click

from apron.errors import ApronError, BadInput, Failed


def emit_json(data) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def say(message: str) -> None:
    """A message or progress line for a person: always stderr."""
    click.echo(message, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="apron", prog_name="apron")
def cli() -> None:
    """Will this LLM fit, boot and answer on this GPU with this vLLM release - and with which flags?"""


def _engine_option(value: str | None) -> str | None:
    from apron.engine.facts import parse_engine_spec

    return parse_engine_spec(value) if value else None


def settings_options(command):
    """The engine settings a plan is made for (apron plan, apron boot SOURCE)."""
    options = [
        click.option("--tp", "tp", type=int, default=1, show_default=True, help="Tensor-parallel size (GPUs)."),
        click.option(
            "--engine", "engine", help="vLLM release, e.g. vllm==0.33.0 (default: newest that supports the model)."
        ),
        click.option("--revision", help="Hub revision (branch, tag or commit)."),
        click.option("--max-model-len", type=int),
        click.option("--gpu-memory-utilization", type=float),
        click.option("--max-num-seqs", type=int),
        click.option("--max-num-batched-tokens", type=int),
        click.option("--kv-cache-dtype", default="auto", show_default=True),
        click.option("--dtype", default="auto", show_default=True),
        click.option("--enforce-eager", is_flag=True),
        click.option("--language-model-only", is_flag=True, help="Skip the vision/audio tower (text-only serving)."),
        click.option(
            "--limit-mm-per-prompt",
            help='Items per prompt per modality, as vLLM takes it: \'{"image": 1, "video": 0}\'.',
        ),
        click.option(
            "--mm-encoder-tp-mode", type=click.Choice(["weights", "data"]), help="How the vision tower uses --tp."
        ),
        click.option("--host-ram-bytes", type=int, help="The machine's host RAM; the plan checks its host tables fit."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _limits(text: str | None) -> tuple[tuple[str, int], ...]:
    from apron.plan.encoder import parse_limit_mm_per_prompt

    return parse_limit_mm_per_prompt(text) if text else ()


def plan_request(source: str, gpu, settings: dict, use_catalog: bool = True):
    from apron.plan.planner import PlanRequest
    from apron.plan.settings import UserSettings

    user = UserSettings(
        tensor_parallel_size=settings["tp"],
        max_model_len=settings["max_model_len"],
        gpu_memory_utilization=settings["gpu_memory_utilization"],
        max_num_seqs=settings["max_num_seqs"],
        max_num_batched_tokens=settings["max_num_batched_tokens"],
        kv_cache_dtype=settings["kv_cache_dtype"],
        dtype=settings["dtype"],
        enforce_eager=settings["enforce_eager"],
        language_model_only=settings["language_model_only"],
        limit_mm_per_prompt=_limits(settings.get("limit_mm_per_prompt")),
        mm_encoder_tp_mode=settings.get("mm_encoder_tp_mode"),
        host_ram_bytes=settings.get("host_ram_bytes"),
    )
    return PlanRequest(
        source=source,
        gpu=gpu,
        user=user,
        engine_version=_engine_option(settings["engine"]),
        revision=settings["revision"],
        use_catalog=use_catalog,
    )


_SETTING_FIELDS = {
    "tp": "tensor_parallel_size",
    "max_model_len": "max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "kv_cache_dtype": "kv_cache_dtype",
    "dtype": "dtype",
    "enforce_eager": "enforce_eager",
    "language_model_only": "language_model_only",
}


def given_settings(settings: dict) -> dict:
    """The engine settings typed on the command line (not defaults), as UserSettings fields."""
    ctx = click.get_current_context()
    given = {}
    for key, name in _SETTING_FIELDS.items():
        if key in settings and ctx.get_parameter_source(key) is click.core.ParameterSource.COMMANDLINE:
            given[name] = settings[key]
    return given


def _candidate_plan(from_file: str, source: str | None, gpu: str | None, settings: dict, use_catalog: bool = True):
    """Plan a deployment file (`--from`): its settings, with the ones typed here winning."""
    from apron.plan.candidates import plan_candidate, read_candidate

    candidate = read_candidate(from_file)
    if source and source != candidate.model:
        raise BadInput(f"SOURCE {source} differs from the model {candidate.model} in {candidate.file}; give one")
    return plan_candidate(
        candidate, gpu, given_settings(settings), _engine_option(settings.get("engine")), use_catalog=use_catalog
    )


@cli.command("plan")
@click.argument("source", required=False)
@click.option("--gpu", help='PyTorch device name ("NVIDIA H100 80GB HBM3") or alias (H100, 4090).')
@click.option(
    "--from",
    "from_file",
    help="Check a deployment another tool proposed: a vllm serve command line (file or -), a recipe, "
    "SkyPilot or Kubernetes YAML.",
)
@click.option(
    "--gpu-memory-bytes", type=int, help="Total bytes per GPU as PyTorch reports them (overrides the catalog)."
)
@click.option("--gpu-capability", help="Compute capability (e.g. 8.9) for a GPU not in the catalog.")
@settings_options
@click.option("--no-catalog", is_flag=True, help="Fetch from the Hub even for models in the bundled catalog.")
@click.option("--explain", is_flag=True, help="Show the memory breakdown and the tensors behind the peak.")
@click.option("--engine-diff", "engine_diff", help="Also plan on this vLLM release and show how the numbers move.")
@click.option("--json", "as_json", is_flag=True, help="Print the apron.plan/1 JSON document.")
@click.option(
    "--html", "html_file", type=click.Path(dir_okay=False), help="Also write the memory chart and card to FILE."
)
def plan_command(
    source,
    gpu,
    from_file,
    gpu_memory_bytes,
    gpu_capability,
    no_catalog,
    explain,
    engine_diff,
    as_json,
    html_file,
    **settings,
) -> None:
    """Will SOURCE fit, boot and answer on this GPU? SOURCE: a Hub repo id, a folder or a snapshot file."""
    from apron.hardware import resolve_gpu
    from apron.plan.planner import engine_diff as diff_plans
    from apron.plan.planner import plan_checkpoint

    candidate = None
    if from_file:
        candidate = _candidate_plan(from_file, source, gpu, settings, use_catalog=not no_catalog)
        plan, document = candidate.plan, candidate.to_json()
        checkpoint, target, user = candidate.checkpoint, candidate.gpu, candidate.user
    else:
        if not source:
            raise BadInput("Missing argument 'SOURCE': give a model, or --from FILE (a deployment to check)")
        if not gpu:
            raise BadInput("Missing option '--gpu': the GPU to plan for (or --from FILE, a deployment naming one)")
        target = resolve_gpu(gpu, memory_bytes=gpu_memory_bytes, capability=gpu_capability)
        request = plan_request(source, target, settings, use_catalog=not no_catalog)
        from apron.checkpoint import load_checkpoint

        checkpoint = load_checkpoint(request.source, request.revision, use_catalog=request.use_catalog)
        user = request.user
        plan = plan_checkpoint(checkpoint, target, user, request.engine_version)
        document = plan.to_json()
    if html_file:
        from pathlib import Path

        from apron.report.page import write_plan_html  # the chart library loads only here

        say(f"apron: wrote {write_plan_html(document, Path(html_file))}")
    diff = None
    if engine_diff:
        diff = diff_plans(plan, plan_checkpoint(checkpoint, target, user, _engine_option(engine_diff)))
    if as_json:
        if diff is not None:
            document["engine_diff"] = diff
        emit_json(document)
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


@cli.command("fit")
@click.argument("source", required=False)
@click.option(
    "--context",
    "--max-model-len",
    "context",
    type=int,
    help="Tokens each request may hold (prompt + output): the plans' --max-model-len.",
)
@click.option("--users", type=int, required=True, help="Requests served at once, each up to --context tokens.")
@click.option("--gpus", help="Comma-separated GPUs to consider (names or aliases; default: the whole catalog).")
@click.option("--max-gpus", type=int, default=8, show_default=True, help="Largest machine: 1, 2, 4 or 8 GPUs.")
@click.option("--engine", "engine", help="vLLM release, e.g. vllm==0.33.0 (default: newest that supports the model).")
@click.option("--revision", help="Hub revision (branch, tag or commit).")
@click.option("--prices", "prices_file", help="A price table (apron.prices/1 JSON) replacing the bundled one.")
@click.option("--tier", type=click.Choice(["on-demand", "spot"]), default="on-demand", show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Feasible rows to show.")
@click.option("--from", "from_file", help="Start from a deployment another tool proposed (as `apron plan --from`).")
@click.option("--gpu-memory-utilization", type=float)
@click.option("--max-num-seqs", type=int)
@click.option("--max-num-batched-tokens", type=int)
@click.option("--kv-cache-dtype", default="auto", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option("--enforce-eager", is_flag=True)
@click.option("--language-model-only", is_flag=True, help="Skip the vision/audio tower (text-only serving).")
@click.option("--no-catalog", is_flag=True, help="Fetch from the Hub even for models in the bundled catalog.")
@click.option("--json", "as_json", is_flag=True, help="Print the apron.fit/1 JSON document.")
def fit_command(
    source,
    context,
    users,
    gpus,
    max_gpus,
    engine,
    revision,
    prices_file,
    tier,
    top,
    from_file,
    no_catalog,
    as_json,
    **settings,
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
        engine_version=_engine_option(engine),
        prices=prices_file,
        revision=revision,
        use_catalog=not no_catalog,
        settings=given_settings(settings),
        candidate_file=from_file,
    )
    document = run_fit(query).to_json()
    if as_json:
        emit_json(document)
    else:
        from apron.report.fit import render_fit

        click.echo(render_fit(document, top))
    if not document["num_feasible"]:
        raise Failed(f"no configuration serves {users} users at {document['request']['context_tokens']:,} tokens")


@cli.command("mcp")
def mcp_command() -> None:
    """Serve Apron's tools (plan, fit, diagnose, records, engine list) to agents over MCP on stdio."""
    from apron.mcp import serve

    serve()


@cli.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gpus_command(as_json: bool) -> None:
    """List the GPU catalog: PyTorch's total bytes, compute capability and aliases."""
    from apron.hardware import all_gpus

    rows = [
        {
            "name": g.name,
            "total_bytes": g.total_bytes,
            "is_total_exact": g.is_total_exact,
            "compute_capability": "%d.%d" % g.compute_capability,
            "aliases": list(g.aliases),
            "total_bytes_basis": g.total_bytes_basis,
        }
        for g in all_gpus()
    ]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        mark = "" if r["is_total_exact"] else " (approx.)"
        click.echo(
            f"{r['name']:<34} {r['total_bytes'] / 2**30:8.2f} GiB{mark:<10} cc {r['compute_capability']:<5} "
            f"{', '.join(r['aliases'])}"
        )


def _store(records: str | None):
    from apron.records.store import RecordStore

    return RecordStore(records)


@cli.command("boot")
@click.argument("source_or_plan", required=False)
@click.option(
    "--from",
    "from_file",
    help="Boot a deployment another tool proposed (as `apron plan --from` reads it), planned first.",
)
@click.option(
    "--on",
    "targets",
    multiple=True,
    required=True,
    help="local | ssh://user@host[:port] | sky[:cloud]. Repeat to name machines to retry a host fault on.",
)
@click.option("--gpu", help="When SOURCE is a model: the GPU to plan for (as in `apron plan`).")
@settings_options
@click.option("--vllm", "vllm_path", help="The vllm executable on the target (default: vllm on PATH).")
@click.option("--venv", help="A venv on the target that holds vllm (DIR/bin/vllm).")
@click.option(
    "--profile",
    type=click.Choice(["gpu", "cpu"]),
    default="gpu",
    show_default=True,
    help="cpu adds the vLLM CPU build's flags: a 64 MiB KV cache, one process.",
)
@click.option("--extra-args", help='More vllm serve arguments, appended last (e.g. "--kv-cache-memory-bytes 1e8").')
@click.option("--env", "env_pairs", multiple=True, help="KEY=VALUE for the engine's environment (repeatable).")
@click.option(
    "--log-level",
    type=click.Choice(["INFO", "DEBUG"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="The engine's VLLM_LOGGING_LEVEL.",
)
@click.option("--health-timeout", type=float, default=1800, show_default=True, help="Seconds to wait for /health.")
@click.option("--weights", help="A local checkpoint folder to boot instead of the plan's source.")
@click.option("--served-model-name", help="Default: the repo id or the folder name.")
@click.option("--workdir", help="Folder on the target for runs and downloads (default ~/.cache/apron).")
@click.option("--keep-run-dir", is_flag=True, help="Leave the run folder on the target (debugging).")
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=2,
    show_default=True,
    help="Further attempts after a host fault, on the next --on target.",
)
@click.option("--identity", "identity_file", type=click.Path(exists=True, dir_okay=False), help="ssh: private key.")
@click.option(
    "--known-hosts",
    "known_hosts_file",
    type=click.Path(exists=True, dir_okay=False),
    help="ssh: known_hosts file to check the host key against.",
)
@click.option("--ssh-option", "ssh_options", multiple=True, help="ssh: an extra -o Key=Value (repeatable).")
@click.option(
    "--suite",
    type=click.Choice(["short", "deploy", "none"]),
    help="Checks after /health (default: short on one GPU, deploy on several).",
)
@click.option(
    "--serve-test/--no-serve-test",
    default=True,
    show_default=True,
    help="Run vllm bench serve next to the engine after the checks.",
)
@click.option("--serve-prompts", type=int, default=50, show_default=True)
@click.option("--serve-input-len", type=int, default=512, show_default=True)
@click.option("--serve-output-len", type=int, default=128, show_default=True)
@click.option("--serve-concurrency", type=int, default=4, show_default=True)
@click.option("--reasoning-effort", help="Sent with the checks where the chat template reads it (e.g. low).")
@click.option("--fix", is_flag=True, help="On a model failure, apply the matching correction rule and boot again.")
@click.option(
    "--fix-attempts", type=click.IntRange(1, 5), default=2, show_default=True, help="Corrected boots at most."
)
@click.option("--records", type=click.Path(file_okay=False), help="Record store folder (default: Apron's data dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the boot record as JSON.")
def boot_command(
    source_or_plan,
    from_file,
    targets,
    gpu,
    vllm_path,
    venv,
    profile,
    extra_args,
    env_pairs,
    log_level,
    health_timeout,
    weights,
    served_model_name,
    workdir,
    keep_run_dir,
    retries,
    identity_file,
    known_hosts_file,
    ssh_options,
    suite,
    serve_test,
    serve_prompts,
    serve_input_len,
    serve_output_len,
    serve_concurrency,
    reasoning_effort,
    fix,
    fix_attempts,
    records,
    as_json,
    **settings,
) -> None:
    """Boot a plan on a real engine, measure it, and record prediction beside measurement.

    SOURCE_OR_PLAN: a saved plan (apron.plan/1 JSON, a plan record file or id) or a model SOURCE,
    which is planned first (then --gpu is needed)."""
    from apron.boot.command import parse_extra_args
    from apron.boot.runner import SshSettings, load_plan_input
    from apron.boot.session import BootOptions
    from apron.boot.targets import parse_target

    store = _store(records)
    specs = [parse_target(t) for t in targets]
    if from_file:
        say(f"planning the deployment in {from_file}")
        plan = _candidate_plan(from_file, source_or_plan, gpu, settings).to_json()
    elif not source_or_plan:
        raise BadInput("give SOURCE_OR_PLAN, or --from FILE (a deployment to boot)")
    else:
        plan = load_plan_input(source_or_plan, store)
    if plan is None:
        if not gpu:
            raise BadInput(f"{source_or_plan} is a model, not a saved plan: give --gpu to plan it first")
        from apron.hardware import resolve_gpu
        from apron.plan.planner import make_plan

        say(f"planning {source_or_plan} for {gpu}")
        plan = make_plan(plan_request(source_or_plan, resolve_gpu(gpu), settings)).to_json()
    env = {}
    for pair in env_pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInput(f"--env '{pair}' must be KEY=VALUE")
        env[key] = value
    options = BootOptions(
        vllm=vllm_path,
        venv=venv,
        profile=profile,
        extra_args=parse_extra_args(extra_args),
        extra_env=env,
        log_level=log_level.upper(),
        health_timeout_seconds=health_timeout,
        workdir=workdir,
        weights=weights,
        served_model_name=served_model_name,
        keep_run_dir=keep_run_dir,
        retries=retries,
        hf_token=os.environ.get("HF_TOKEN"),
    )
    from apron.boot.answers import AnswerSettings
    from apron.boot.fix import boot_with_fix, replan_from_plan

    answers = AnswerSettings(
        suite, serve_test, serve_prompts, serve_input_len, serve_output_len, serve_concurrency, reasoning_effort
    )
    outcome = boot_with_fix(
        plan,
        specs,
        options,
        store,
        answers,
        replan_from_plan,
        ssh=SshSettings(identity_file, known_hosts_file, tuple(ssh_options)),
        max_attempts=fix_attempts if fix else 0,
        progress=lambda m: say(f"apron: {m}"),
    )
    if fix:
        say(
            f"apron: --fix: {len(outcome.boots)} boot(s); {outcome.stopped_because}"
            + (f"; fix records {', '.join(f[:12] for f in outcome.fixes)}" if outcome.fixes else "")
        )
    result = outcome.final
    if as_json:
        emit_json({"id": result.record_id, **result.record})
    else:
        from apron.records.report import render_boot
        from apron.records.store import StoredRecord

        click.echo(render_boot(StoredRecord(result.record_id, result.record)))
    fault = result.record.get("fault")
    if result.record["outcome"] != "healthy" or fault:
        what = "healthy, but" if result.record["outcome"] == "healthy" else result.record["outcome"]
        raise Failed(
            f"boot {what}: {fault.get('reason')}: {str(fault.get('evidence'))[:300]} (record {result.record_id[:12]})"
        )
    verdicts = (result.record.get("after_healthy") or {}).get("verdicts") or {}
    missed = [name for name, value in verdicts.items() if value is False]
    if missed:
        raise Failed(f"booted, but not {' / '.join(missed)}: see the checks in record {result.record_id[:12]}")


@cli.group("log")
def log_group() -> None:
    """Read vLLM logs."""


@log_group.command("parse")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print every field as JSON.")
def log_parse_command(file, as_json) -> None:
    """What a vLLM start-up log says: memory accounting, timings, config, errors (null when not printed)."""
    from apron.measure.logparse import parse_file

    parsed = parse_file(file).to_json()
    if as_json:
        emit_json(parsed)
        return
    for name, value in parsed.items():
        if name in ("sources", "per_rank") or value in (None, [], {}):
            continue
        if name == "errors":
            for line in value:
                click.echo(f"error: {line[:300]}")
            continue
        click.echo(f"{name:<36} {value}")


@cli.group("records")
def records_group() -> None:
    """Plans and boots kept side by side (content-addressed JSON)."""


@records_group.command("list")
@click.option("--records", type=click.Path(file_okay=False), help="Record store folder.")
@click.option("--kind", type=click.Choice(["plan", "boot", "fix"]))
@click.option("--json", "as_json", is_flag=True)
def records_list_command(records, kind, as_json) -> None:
    """Every record in the store, newest boots last."""
    from apron.records.report import render_list
    from apron.records.views import list_rows

    rows = list_rows(_store(records), kind)
    if as_json:
        emit_json(rows)
    else:
        click.echo(render_list(rows))


@records_group.command("show")
@click.argument("record_id")
@click.option("--records", type=click.Path(file_okay=False))
@click.option("--log", "with_log", is_flag=True, help="Print the engine log stored with a boot record.")
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--html", "html_file", is_flag=False, flag_value="", help="Write the record's page (default ./apron-ID.html)."
)
def records_show_command(record_id, records, with_log, as_json, html_file) -> None:
    """One record (a unique id prefix is enough)."""
    from apron.records.report import render_boot

    store = _store(records)
    if html_file is not None:
        from pathlib import Path

        from apron.report.page import write_record_page

        click.echo(write_record_page(store, record_id, Path(html_file) if html_file else None))
        return
    record = store.get(record_id)
    if with_log:
        sha = record.document.get("log", {}).get("sha256")
        if not sha:
            raise BadInput(f"record {record.id[:12]} has no log")
        sys.stdout.write(store.get_blob(sha).decode("utf-8", errors="replace"))
        return
    if as_json or record.kind in ("plan", "fix"):
        from apron.records.views import show_document

        emit_json(show_document(store, record.id))
    else:
        click.echo(render_boot(record))


@records_group.command("compare")
@click.argument("record_id")
@click.option("--records", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
def records_compare_command(record_id, records, as_json) -> None:
    """Predicted (the linked plan) beside measured (the boot), with the error per quantity."""
    from apron.records.report import render_compare
    from apron.records.views import compare_document

    table = compare_document(_store(records), record_id)
    if as_json:
        emit_json(table)
    else:
        click.echo(render_compare(table))


@cli.command("report")
@click.argument("record_ids", nargs=-1, metavar="[IDS]...")
@click.option("--all", "select_all", is_flag=True, help="Every record in the store (the default without IDS).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="apron-report", show_default=True)
@click.option("--open", "open_page", is_flag=True, help="Open the page in the default browser.")
@click.option("--records", type=click.Path(file_okay=False), help="Record store folder (default: Apron's data dir).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def report_command(record_ids, select_all, out_dir, open_page, records, as_json) -> None:
    """Charts and a self-contained HTML page (OUT/index.html) from the records; prints the page's path."""
    from pathlib import Path

    from apron.report.page import build_report

    if record_ids and select_all:
        raise BadInput("give record IDS or --all, not both")
    written = build_report(_store(records), list(record_ids), Path(out_dir))
    if as_json:
        emit_json(written)
    else:
        click.echo(written["index"])
    if open_page:
        import webbrowser

        webbrowser.open(Path(written["index"]).resolve().as_uri())


@cli.command("diagnose")
@click.argument("logfile", type=click.Path(dir_okay=False))
@click.option("--plan", "plan_ref", help="The plan the boot ran: a plan JSON file (apron plan --json) or a record id.")
@click.option(
    "--engine",
    "engine",
    help="vLLM release of the boot, e.g. vllm==0.32.0 (default: the plan's, else the log's banner).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the apron.diagnosis/1 JSON document.")
def diagnose_command(logfile, plan_ref, engine, as_json) -> None:
    """Find the decisive error in a failed boot's LOGFILE, the rule that corrects it, and whether the plan knew."""
    from apron.report.diagnosis import render_diagnosis
    from apron.rules import diagnose
    from apron.rules.plans import load_plan_ref, read_log

    plan = load_plan_ref(plan_ref) if plan_ref else None
    diagnosis = diagnose(read_log(logfile), plan_json=plan, engine_version=_engine_option(engine))
    if as_json:
        emit_json(diagnosis.to_json())
        return
    click.echo(render_diagnosis(diagnosis, logfile))


@cli.group("rules")
def rules_group() -> None:
    """Correction rules and their status (hypothesis or proven) per vLLM release."""


def _status_store(records: str | None):
    """Rule statuses live beside the boot records that prove them (RECORDS/rules)."""
    from pathlib import Path

    from apron.rules import StatusStore

    return StatusStore(Path(records) / "rules" if records else None)


@rules_group.command("list")
@click.option("--engine", "engine", help="Show each rule's status on this release, e.g. vllm==0.32.0.")
@click.option("--records", type=click.Path(file_okay=False), help="Record store folder (default: Apron's data dir).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules_list_command(engine, records, as_json) -> None:
    """Every correction rule, the failure families it answers, and where it is proven."""
    from apron.report.diagnosis import render_rules, rule_json
    from apron.rules import all_rules

    store, version = _status_store(records), _engine_option(engine)
    statuses = {rule.id: store.statuses(rule.id) for rule in all_rules()}
    if version:
        statuses = {rid: {version: store.status(rid, version)} for rid in statuses}
    if as_json:
        emit_json([rule_json(rule, statuses[rule.id]) for rule in all_rules()])
        return
    click.echo(render_rules(all_rules(), statuses, version))


@rules_group.command("show")
@click.argument("rule_id")
@click.option("--records", type=click.Path(file_okay=False), help="Record store folder (default: Apron's data dir).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules_show_command(rule_id, records, as_json) -> None:
    """One rule: what it changes, why, and its status and evidence on every release."""
    from apron.report.diagnosis import render_rule, rule_json
    from apron.rules import get_rule

    rule = get_rule(rule_id)
    statuses = _status_store(records).statuses(rule.id)
    if as_json:
        emit_json(rule_json(rule, statuses))
        return
    click.echo(render_rule(rule, statuses))


@cli.group("engine")
def engine_group() -> None:
    """Engine facts: what each vLLM release supports and defaults to, read from its own source."""


@engine_group.command("sync")
@click.argument("spec", metavar="vllm==X|WHEEL|TREE")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the facts file here instead of Apron's cache.",
)
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Parser processes (default: CPUs).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def engine_sync_command(spec: str, out_dir: str | None, jobs: int | None, as_json: bool) -> None:
    """Read a release's facts from its wheel (pip download) or a local wheel or source tree."""
    from pathlib import Path

    from apron.engine.sync import sync

    result = sync(spec, Path(out_dir) if out_dir else None, say=say, jobs=jobs)
    row = {
        "version": result.version,
        "path": str(result.path),
        "sha256": result.facts["source"]["sha256"],
        "num_architectures": len(result.facts["registry"]["architectures"]),
        "extract_seconds": round(result.extract_seconds, 2),
        "gaps": result.facts["gaps"],
    }
    if as_json:
        emit_json(row)
    else:
        click.echo(str(result.path))


@engine_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def engine_list_command(as_json: bool) -> None:
    """List the releases Apron has facts for (shipped and synced)."""
    from apron.engine.summary import list_rows

    rows = list_rows()
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        click.echo(
            f"{r['version']:<10} {r['origin']:<8} {r['num_architectures']:>4} architectures  "
            f"{r['torch'] or '':<14} {r['filename']}"
        )


@engine_group.command("show")
@click.argument("version", metavar="X")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a summary; --full for everything).")
@click.option("--full", is_flag=True, help="With --json: the whole facts document.")
def engine_show_command(version: str, as_json: bool, full: bool) -> None:
    """Show one release's facts: counts, pins, defaults and gaps."""
    from apron.engine.facts import load_facts, parse_engine_spec
    from apron.engine.summary import render_summary, summary

    facts = load_facts(parse_engine_spec(version))
    if as_json:
        emit_json(facts.full_data if full else summary(facts))
        return
    for line in render_summary(summary(facts)):
        click.echo(line)


@engine_group.command("diff")
@click.argument("old", metavar="X")
@click.argument("new", metavar="Y")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def engine_diff_command(old: str, new: str, as_json: bool) -> None:
    """What changed from release X to release Y, and which mirrored functions need re-checking."""
    from apron.engine.diff import diff_facts
    from apron.engine.facts import load_facts, parse_engine_spec
    from apron.engine.summary import render_diff

    diff = diff_facts(load_facts(parse_engine_spec(old)).full_data, load_facts(parse_engine_spec(new)).full_data)
    if as_json:
        emit_json(diff)
        return
    for line in render_diff(diff):
        click.echo(line)


@cli.command("check")
@click.argument("url")
@click.option("--model", required=True, help="The served model name (as /v1/models lists it).")
@click.option(
    "--suite",
    type=click.Choice(["short", "deploy"]),
    default="short",
    show_default=True,
    help="short: three exact questions; deploy: needle, tool call, JSON schema, image, reasoning.",
)
@click.option("--only", multiple=True, help="Run only this check (repeatable), e.g. --only tool_call.")
@click.option("--multimodal", is_flag=True, help="The model takes images: run the image check.")
@click.option(
    "--reasoning-effort",
    type=click.Choice(["none", "minimal", "low", "medium", "high", "xhigh", "max"]),
    help="Send reasoning_effort (for chat templates that read it; low keeps answers short).",
)
@click.option(
    "--reasoning/--no-reasoning",
    default=None,
    help="The model thinks before answering (default: judge from its replies).",
)
@click.option("--reasoning-parser", help="The model's reasoning parser, named in fixes.")
@click.option("--tool-parser", help="The model's tool-call parser, named in fixes.")
@click.option(
    "--tool-choice",
    type=click.Choice(["auto", "required", "named"]),
    default="auto",
    show_default=True,
    help="auto goes through the server's tool parser; required/named are constrained by the server.",
)
@click.option("--answer-budget-tokens", type=int, default=64, show_default=True, help="max_tokens for a short answer.")
@click.option("--seed", type=int, help="Seed for the needle, its depth and the image colour (default: random).")
@click.option("--timeout", "timeout_seconds", type=float, default=600, show_default=True, help="Seconds per request.")
@click.option("--json", "as_json", is_flag=True, help="Print the apron.check/1 JSON document.")
def check_command(
    url,
    model,
    suite,
    only,
    multimodal,
    reasoning_effort,
    reasoning,
    reasoning_parser,
    tool_parser,
    tool_choice,
    answer_budget_tokens,
    seed,
    timeout_seconds,
    as_json,
) -> None:
    """Will the model at URL answer the way users ask? Exit 1 if a check fails."""
    from apron.errors import Failed
    from apron.measure.checks import run_checks

    report = run_checks(
        url,
        model,
        suite,
        multimodal=multimodal,
        reasoning_effort=reasoning_effort,
        reasoning=reasoning,
        reasoning_parser=reasoning_parser,
        tool_parser=tool_parser,
        tool_choice=tool_choice,
        answer_budget_tokens=answer_budget_tokens,
        seed=seed,
        timeout_seconds=timeout_seconds,
        only=tuple(only) or None,
        progress=say,
    )
    if as_json:
        emit_json(report.to_json())
    else:
        from apron.report.answers import render_check_report

        click.echo(render_check_report(report))
    if report.verdict != "answered":
        failed = [r.name for r in report.results if r.status == "fail"]
        raise Failed(f"not answered: {len(failed)} of {len(report.results)} checks failed ({', '.join(failed)})")


@cli.command("serve-test")
@click.argument("url")
@click.option("--model", required=True, help="The served model name (as /v1/models lists it).")
@click.option("--vllm", "vllm_executable", help="The `vllm` executable (default: the one on PATH).")
@click.option("--num-prompts", type=int, default=50, show_default=True)
@click.option("--input-len", type=int, default=512, show_default=True, help="Tokens in per request.")
@click.option("--output-len", type=int, default=128, show_default=True, help="Tokens out per request.")
@click.option("--concurrency", type=int, default=4, show_default=True, help="Requests in flight at once.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--tokenizer", help="Tokenizer for the prompts (default: the served model's root from /v1/models).")
@click.option(
    "--result-dir", type=click.Path(file_okay=False), help="Where the result JSON goes (default: Apron's data dir)."
)
@click.option("--timeout", "timeout_seconds", type=float, default=1800, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the apron.serve_test/1 JSON document.")
def serve_test_command(
    url,
    model,
    vllm_executable,
    num_prompts,
    input_len,
    output_len,
    concurrency,
    seed,
    tokenizer,
    result_dir,
    timeout_seconds,
    as_json,
) -> None:
    """How fast does the model at URL serve? vLLM's own `vllm bench serve`; exit 1 if requests fail."""
    from apron.errors import Failed
    from apron.measure.servetest import run_serve_test

    report = run_serve_test(
        url,
        model,
        vllm_executable=vllm_executable,
        num_prompts=num_prompts,
        input_len=input_len,
        output_len=output_len,
        concurrency=concurrency,
        seed=seed,
        tokenizer=tokenizer,
        result_dir=result_dir,
        timeout_seconds=timeout_seconds,
        progress=say,
    )
    if as_json:
        emit_json(report.to_json())
    else:
        from apron.report.answers import render_serve_report

        click.echo(render_serve_report(report))
    if report.verdict != "served":
        raise Failed(f"not served: {report.reason}")


def main(argv: list[str] | None = None) -> int:
    debug = os.environ.get("APRON_DEBUG") == "1"
    try:
        cli.main(args=argv, prog_name="apron", standalone_mode=False)
    except ApronError as exc:
        if debug:
            raise
        say(f"apron: error: {exc.message}")
        return exc.exit_code
    except click.exceptions.Abort:
        say("apron: interrupted")
        return 130
    except click.ClickException as exc:
        if debug:
            raise
        say(f"apron: error: {exc.format_message()}")
        return BadInput.exit_code if exc.exit_code == 2 else exc.exit_code
    except KeyboardInterrupt:
        say("apron: interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence against a bare traceback
        if debug:
            raise
        say(f"apron: internal error: {type(exc).__name__}: {exc} (run with APRON_DEBUG=1 for a traceback)")
        return 1
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
