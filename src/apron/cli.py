"""The `apron` command line: thin wrappers over the packages; data on stdout, messages on stderr.

Exit codes: 0 ok, 1 failed, 2 bad input. A traceback only with APRON_DEBUG=1.
Options share one vocabulary across commands and show in groups in --help; an option renamed for that
keeps its old name as a hidden alias for one release (README, "Renamed options").
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from apron.errors import ApronError, BadInput, Failed

if TYPE_CHECKING:
    from apron.hardware import Gpu
    from apron.plan.planner import PlanRequest
    from apron.plan.result import Plan
    from apron.records.store import RecordStore
    from apron.rules import StatusStore

F = TypeVar("F", bound=Callable[..., Any])


def emit_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def say(message: str) -> None:
    """A message or progress line for a person: always stderr."""
    click.echo(message, err=True)


# Progress lines that are results or answers to the user's own action: shown even off a terminal.
NOTICES = ("interrupted", "rule ", "--fix", "engine mismatch", "answers not checked")


def progress_printer() -> Callable[[str], None]:
    """Progress of long work on stderr with the seconds since it began - on a terminal only (or with
    APRON_PROGRESS=1); a log or a pipe gets only the notices."""
    import time

    started = time.monotonic()
    shown = sys.stderr.isatty() or os.environ.get("APRON_PROGRESS") == "1"

    def show(message: str) -> None:
        if shown:
            say(f"apron: [{time.monotonic() - started:6.1f} s] {message}")
        elif message.startswith(NOTICES):
            say(f"apron: {message}")

    return show


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
                    say(f"apron: {old} is now {param.opts[0]}; the old name goes in the next release")
        return super().parse_args(ctx, args)


class GroupedGroup(click.Group):
    """Every command (and sub-group) of `apron` lists its options by group."""

    command_class = GroupedCommand
    group_class = type


def option(*decls: str, group: str, old: tuple[str, ...] = (), **kwargs: Any) -> Callable[[F], F]:
    return click.option(*decls, *old, cls=GroupedOption, group=group, old_names=old, **kwargs)


def json_option(what: str = "Print JSON.") -> Callable[[F], F]:
    return option("--json", "as_json", group="Output", is_flag=True, help=what)


def records_option(command: F) -> F:
    return option(
        "--records",
        group="Output",
        type=click.Path(file_okay=False),
        help="Record store folder (default: Apron's data dir).",
    )(command)


def apply(options: list[Callable[[F], F]], command: F) -> F:
    for decorator in reversed(options):
        command = decorator(command)
    return command


@click.group(
    cls=GroupedGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="apron", prog_name="apron")
def cli() -> None:
    """Will this LLM fit, boot and answer on this GPU with this vLLM release - and with which flags?"""


def _engine_option(value: str | None) -> str | None:
    from apron.engine.facts import parse_engine_spec

    return parse_engine_spec(value) if value else None


class ByteSize(click.ParamType):
    """A byte count as vLLM's human_readable_int reads it (vllm/utils/argparse_utils.py): 1k = 1,000,
    1K = 1,024, 25.6k = 25,600; M, G, T likewise."""

    name = "bytes"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from apron.plan.settings import parse_byte_size

        try:
            return parse_byte_size(str(value))
        except BadInput as exc:
            self.fail(exc.message, param, ctx)


def gpu_options(command: F) -> F:
    """The GPU a plan is made for (apron plan, apron boot SOURCE)."""
    group = "GPU"
    return apply(
        [
            option("--gpu", group=group, help='PyTorch device name ("NVIDIA H100 80GB HBM3") or alias (H100, 4090).'),
            option(
                "--gpu-memory-bytes",
                group=group,
                type=int,
                help="Total bytes per GPU as PyTorch reports them (overrides the catalog).",
            ),
            option("--gpu-capability", group=group, help="Compute capability (e.g. 8.9) for a GPU not in the catalog."),
        ],
        command,
    )


def settings_options(command: F) -> F:
    """The model and engine settings a plan is made for (apron plan, apron boot SOURCE)."""
    model, engine = "Model", "Engine settings"
    return apply(
        [
            option("--revision", group=model, help="Hub revision (branch, tag or commit)."),
            option(
                "--no-catalog",
                group=model,
                is_flag=True,
                help="Fetch from the Hub even for models in the bundled catalog.",
            ),
            option(
                "--engine",
                "engine",
                group=engine,
                help="vLLM release, e.g. vllm==0.33.0 (default: newest that supports the model).",
            ),
            option("--tp", "tp", group=engine, type=int, default=1, show_default=True, help="Tensor-parallel size."),
            option("--max-model-len", group=engine, type=int),
            option("--gpu-memory-utilization", group=engine, type=float),
            option("--max-num-seqs", group=engine, type=int),
            option("--max-num-batched-tokens", group=engine, type=int),
            option(
                "--kv-cache-memory-bytes",
                group=engine,
                type=ByteSize(),
                help="The KV cache size itself (vLLM's syntax: 67108864, 64M, 1G); the CPU platform's way.",
            ),
            option("--kv-cache-dtype", group=engine, default="auto", show_default=True),
            option("--dtype", group=engine, default="auto", show_default=True),
            option("--enforce-eager", group=engine, is_flag=True),
            option(
                "--language-model-only",
                group=engine,
                is_flag=True,
                help="Skip the vision/audio tower (text-only serving).",
            ),
            option(
                "--limit-mm-per-prompt",
                group=engine,
                help='Items per prompt per modality, as vLLM takes it: \'{"image": 1, "video": 0}\'.',
            ),
            option(
                "--mm-encoder-tp-mode",
                group=engine,
                type=click.Choice(["weights", "data"]),
                help="How the vision tower uses --tp.",
            ),
            option(
                "--host-ram-bytes",
                group="Machine",
                type=int,
                help="The machine's host RAM; the plan checks its pinned host tables fit.",
            ),
        ],
        command,
    )


def _limits(text: str | None) -> tuple[tuple[str, int], ...]:
    from apron.plan.encoder import parse_limit_mm_per_prompt

    return parse_limit_mm_per_prompt(text) if text else ()


def resolve_gpu_option(gpu: str, settings: dict[str, Any]) -> Gpu:
    from apron.hardware import resolve_gpu

    return resolve_gpu(gpu, memory_bytes=settings["gpu_memory_bytes"], capability=settings["gpu_capability"])


def plan_request(source: str, gpu: Gpu, settings: dict[str, Any]) -> PlanRequest:
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
        kv_cache_memory_bytes=settings.get("kv_cache_memory_bytes"),
    )
    return PlanRequest(
        source=source,
        gpu=gpu,
        user=user,
        engine_version=_engine_option(settings["engine"]),
        revision=settings["revision"],
        use_catalog=not settings["no_catalog"],
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
    "limit_mm_per_prompt": "limit_mm_per_prompt",
    "mm_encoder_tp_mode": "mm_encoder_tp_mode",
    "host_ram_bytes": "host_ram_bytes",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
}


def given_settings(settings: dict) -> dict:
    """The engine settings typed on the command line (not defaults), as UserSettings fields."""
    ctx = click.get_current_context()
    given = {}
    for key, name in _SETTING_FIELDS.items():
        if key in settings and ctx.get_parameter_source(key) is click.core.ParameterSource.COMMANDLINE:
            given[name] = _limits(settings[key]) if key == "limit_mm_per_prompt" else settings[key]
    return given


def _candidate_plan(
    from_file: str,
    source: str | None,
    gpu: str | None,
    settings: dict,
    use_catalog: bool = True,
    calibration: Any = None,
):
    """Plan a deployment file (`--from`): its settings, with the ones typed here winning."""
    from apron.plan.candidates import plan_candidate, read_candidate

    candidate = read_candidate(from_file)
    if source and source != candidate.model:
        raise BadInput(f"SOURCE {source} differs from the model {candidate.model} in {candidate.file}; give one")
    return plan_candidate(
        candidate,
        gpu,
        given_settings(settings),
        _engine_option(settings.get("engine")),
        use_catalog=use_catalog,
        calibration=calibration,
    )


@cli.command("plan")
@click.argument("source", required=False)
@gpu_options
@settings_options
@option(
    "--from",
    "from_file",
    group="Model",
    help="Check a deployment another tool proposed: a vllm serve command line (file or -), a recipe, "
    "SkyPilot or Kubernetes YAML.",
)
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
@option(
    "--calibration",
    "calibration_file",
    group="Model",
    type=click.Path(dir_okay=False),
    help="Scale the observed terms with a calibration from `apron calibrate --out` (never by default).",
)
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
        candidate = _candidate_plan(
            from_file, source, gpu, settings, use_catalog=not settings["no_catalog"], calibration=calibration
        )
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
        diff = diff_plans(plan, plan_checkpoint(checkpoint, target, user, _engine_option(engine_diff)))
    if as_json:
        if diff is not None:
            document["engine_diff"] = diff
        emit_json(document)
        _exit_by_verdict(plan)
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
    _exit_by_verdict(plan)


def _exit_by_verdict(plan: Plan) -> None:
    """0 fits; 1 does_not_fit, unsupported or unknown, after the whole document is printed."""
    if plan.verdict != "fits":
        raise Failed(f"verdict {plan.verdict}", quiet=True)


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
@json_option()
def gpus_command(as_json: bool) -> None:
    """List the GPU catalog: PyTorch's total bytes, compute capability and aliases."""
    from apron.hardware import all_gpus

    rows = [
        {
            "name": g.name,
            "total_bytes": g.total_bytes,
            "is_total_exact": g.is_total_exact,
            "compute_capability": "{}.{}".format(*g.compute_capability),
            "aliases": list(g.aliases),
            "total_bytes_basis": g.total_bytes_basis,
        }
        for g in all_gpus()
    ]
    if as_json:
        emit_json(rows)
        return
    from apron.report.tables import render_table
    from apron.units import format_bytes

    table = [
        (
            g.name,
            format_bytes(g.total_bytes),
            "exact" if g.is_total_exact else "approximate",
            "{}.{}".format(*g.compute_capability),
            ", ".join(g.aliases),
        )
        for g in all_gpus()
    ]
    click.echo(render_table(("GPU (PyTorch's name)", "total", "total is", "capability", "aliases"), table, right=(1,)))
    click.echo("\n--gpu cpu plans for vLLM's CPU platform on this machine (its NUMA node's memory).")


@cli.command("models")
@json_option()
def models_command(as_json: bool) -> None:
    """The bundled catalog: models `apron plan` reads with no network (id, architecture, layout, size)."""
    from apron.plan.models import catalog_models
    from apron.report.tables import render_table
    from apron.units import format_bytes

    rows = catalog_models()
    if as_json:
        emit_json([row.to_json() for row in rows])
        return
    click.echo(
        render_table(
            ("model", "architecture", "layout family", "size"),
            [(r.repo_id, r.architecture, r.layout_family, format_bytes(r.checkpoint_bytes)) for r in rows],
            right=(3,),
        )
    )


@cli.group("example")
def example_group() -> None:
    """Example inputs to try Apron with, made on this machine."""


@example_group.command("tiny")
@click.argument("folder", type=click.Path(file_okay=False))
@option(
    "--family",
    group="Model",
    type=click.Choice(["llama", "qwen3", "gemma2", "mamba", "idefics3"]),
    default="llama",
    show_default=True,
    help="The architecture: Llama, Qwen3, Gemma 2 (sliding + full attention), Mamba, Idefics3 (vision).",
)
@option("--layers", group="Model", type=click.IntRange(1, 64), default=8, show_default=True)
@option(
    "--max-position-embeddings",
    "max_positions",
    group="Model",
    type=click.IntRange(16),
    default=4096,
    show_default=True,
    help="The model's context length.",
)
@json_option("Print what was written as JSON.")
def example_tiny_command(folder: str, family: str, layers: int, max_positions: int, as_json: bool) -> None:
    """Write a tiny random-weight checkpoint of a real architecture to FOLDER (a few MiB, no network):
    config, tokenizer and safetensors that vLLM loads. Its answers mean nothing; boots skip the checks."""
    from pathlib import Path

    from apron.checkpoint.example import TinySpec, write_tiny_model
    from apron.units import format_bytes

    model = write_tiny_model(Path(folder), TinySpec(family=family, num_layers=layers, max_positions=max_positions))
    if as_json:
        emit_json(model.to_json())
        return
    click.echo(
        f"{model.folder}: {model.architecture}, {model.num_parameters:,} random parameters, "
        f"{format_bytes(model.total_bytes)} in {len(model.files)} files"
    )


def _store(records: str | None) -> RecordStore:
    from apron.records.store import RecordStore

    return RecordStore(records)


REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def reasoning_effort_option(command: F) -> F:
    return option(
        "--reasoning-effort",
        group="Checks",
        type=click.Choice(REASONING_EFFORTS),
        help="Send reasoning_effort (for chat templates that read it; low keeps answers short).",
    )(command)


def serving_options(group: str, defaults: tuple[int, int, int, int], old: bool = False) -> Callable[[F], F]:
    """The serving test's shape: the same names on `apron serve-test` and `apron boot`."""
    prompts, input_len, output_len, concurrency = defaults

    def add(command: F) -> F:
        return apply(
            [
                option(
                    "--num-prompts",
                    group=group,
                    type=int,
                    default=prompts,
                    show_default=True,
                    old=("--serve-prompts",) if old else (),
                    help="Requests in the serving test.",
                ),
                option(
                    "--input-len",
                    group=group,
                    type=int,
                    default=input_len,
                    show_default=True,
                    old=("--serve-input-len",) if old else (),
                    help="Tokens in per request.",
                ),
                option(
                    "--output-len",
                    group=group,
                    type=int,
                    default=output_len,
                    show_default=True,
                    old=("--serve-output-len",) if old else (),
                    help="Tokens out per request.",
                ),
                option(
                    "--concurrency",
                    group=group,
                    type=int,
                    default=concurrency,
                    show_default=True,
                    old=("--serve-concurrency",) if old else (),
                    help="Requests in flight at once.",
                ),
            ],
            command,
        )

    return add


@cli.command("boot")
@click.argument("source_or_plan", required=False)
@option(
    "--from",
    "from_file",
    group="Plan",
    help="Boot a deployment another tool proposed (as `apron plan --from` reads it), planned first.",
)
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
@gpu_options
@settings_options
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
@reasoning_effort_option
@option(
    "--serve-test/--no-serve-test",
    group="Serving test",
    default=True,
    show_default=True,
    help="Run vllm bench serve next to the engine after the checks.",
)
@serving_options("Serving test", (50, 512, 128, 4), old=True)
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
    from apron.boot.request import BootRequest, failure, parse_env, probe_failure, run_boot
    from apron.boot.runner import SshSettings
    from apron.boot.session import BootOptions

    plan = None
    if from_file:
        say(f"apron: planning the deployment in {from_file}")
        plan = _candidate_plan(from_file, source_or_plan, gpu, opts, use_catalog=not opts["no_catalog"]).plan
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
cli.add_command(probe_command)


@cli.group("log")
def log_group() -> None:
    """Read vLLM logs."""


@log_group.command("parse")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@json_option("Print every field as JSON.")
def log_parse_command(file: str, as_json: bool) -> None:
    """What a vLLM start-up log says: memory accounting, timings, config, errors (null when not printed)."""
    from apron.measure.logparse import parse_file
    from apron.rules.fingerprint import fingerprint
    from apron.rules.formats import FORMATS
    from apron.units import shorten

    log = parse_file(file, FORMATS)
    if not log.has_vllm_lines:
        raise Failed(
            f"{file} has no vLLM log lines (none carries vLLM's 'INFO MM-DD HH:MM:SS [file.py:N]' prefix or "
            "matches one of the release's format strings): give the engine's start-up log"
        )
    decisive = fingerprint(log)
    parsed = {**log.to_json(), "decisive_error": decisive.decisive_json() if decisive else None}
    if as_json:
        emit_json(parsed)
        return
    for name, value in parsed.items():
        if name in ("sources", "per_rank", "decisive_error") or value in (None, [], {}):
            continue
        if name == "template_lines":
            click.echo(f"{name:<36} {len(value):,} lines without vLLM's prefix, read by their message")
            continue
        if name in ("errors", "errors_after_shutdown"):
            for line in value:
                click.echo(f"{'error' if name == 'errors' else 'error after shutdown'}: {shorten(line, 300)}")
            continue
        click.echo(f"{name:<36} {_log_value(name, value)}")
    if decisive is not None:
        click.echo(
            f"{'decisive error':<36} line {decisive.line_number}: {shorten(decisive.decisive_json()['error'], 300)}"
        )


def _log_value(name: str, value: Any) -> str:
    from apron.units import format_bytes, format_count, format_seconds

    if name.endswith("_bytes") and isinstance(value, (int, float)):
        return f"{format_bytes(value)} ({int(value):,} B)"
    if name.endswith("_seconds") and isinstance(value, (int, float)):
        return format_seconds(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return format_count(value)


@cli.group("records")
def records_group() -> None:
    """Plans, boots and fixes kept side by side (content-addressed JSON)."""


@records_group.command("list")
@option("--kind", group="Options", type=click.Choice(["plan", "boot", "fix", "probe"]))
@records_option
@json_option()
def records_list_command(kind: str | None, records: str | None, as_json: bool) -> None:
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
@option("--log", "with_log", group="Options", is_flag=True, help="Print the engine log stored with a boot record.")
@option(
    "--html",
    "html_file",
    group="Output",
    is_flag=False,
    flag_value="",
    help="Write the record's page (default ./apron-ID.html).",
)
@records_option
@json_option()
def records_show_command(
    record_id: str, with_log: bool, html_file: str | None, records: str | None, as_json: bool
) -> None:
    """One record (a unique id prefix is enough)."""
    from apron.records.documents import BootRecord

    store = _store(records)
    if html_file is not None:
        from pathlib import Path

        from apron.report.page import write_record_page

        click.echo(write_record_page(store, record_id, Path(html_file) if html_file else None))
        return
    record = store.get(record_id)
    document = record.document
    if with_log:
        if not isinstance(document, BootRecord):
            raise BadInput(f"record {record.id[:12]} is a {record.kind}: only boot records keep a log")
        if document.log is None:
            raise BadInput(f"boot record {record.id[:12]} was imported from a published record: it keeps no log")
        sys.stdout.write(store.get_blob(document.log.sha256).decode("utf-8", errors="replace"))
        return
    from apron.records.documents import ProbeRecord

    if isinstance(document, ProbeRecord) and not as_json:
        from apron.records.probe_view import render_probe

        click.echo(render_probe(record.id, document))
    elif as_json:
        from apron.records.views import show_document

        emit_json(show_document(store, record.id))
    else:
        from apron.report.record_text import render_record

        click.echo(render_record(record))


@records_group.command("import")
@click.argument("file")
@option(
    "--snapshots",
    group="Options",
    type=click.Path(file_okay=False),
    help="Plan the boots from checkpoint snapshot files here (<org>--<name>.json.gz) where the Hub is out of reach.",
)
@records_option
@json_option()
def records_import_command(file: str, snapshots: str | None, records: str | None, as_json: bool) -> None:
    """Import published boots (tests/fixtures/boots-training.json's format) as boot records beside their plans.

    Every boot is planned first, with the settings it was served with; nothing is written unless all are."""
    from pathlib import Path

    from apron.records.imports import import_boots, published_planner

    path = Path(file)
    if not path.is_file():
        raise BadInput(f"{file}: no such file")
    imported = import_boots(path, _store(records), published_planner(Path(snapshots) if snapshots else None))
    rows = [
        {"id": i.boot_id, "plan_id": i.plan_id, "model": i.model, "outcome": i.boot.outcome, **_hardware(i.boot)}
        for i in imported
    ]
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        click.echo(f"{row['id'][:12]}  {row['outcome']:<13} vllm {row['engine']:<8} {row['gpu']:<28} {row['model']}")
    say(f"apron: {len(rows)} boots from {path.name} (plans beside them)")


def _hardware(boot: Any) -> dict[str, Any]:
    return {"engine": boot.engine.version, "gpu": boot.hardware.gpu_name}


@cli.command("calibrate")
@option("--engine", "engine", group="Options", help="Only boots of this release, e.g. vllm==0.29.0.")
@option("--gpu", group="Options", help="Only boots on this GPU class (name or alias, as `apron plan --gpu`).")
@option(
    "--out",
    "out_file",
    group="Output",
    type=click.Path(dir_okay=False),
    help="Write the calibration here, for `apron plan --calibration FILE`.",
)
@records_option
@json_option()
def calibrate_command(
    engine: str | None, gpu: str | None, out_file: str | None, records: str | None, as_json: bool
) -> None:
    """Fit the terms the planner labels observed to the boots in the store, per release and GPU class,
    with the leave-one-out error of every quantity before and after (exit 1 when nothing is fitted)."""
    from apron.records.calibrate import calibrate, render

    gpu_name = None
    if gpu:
        from apron.hardware import resolve_gpu

        gpu_name = resolve_gpu(gpu).name
    run = calibrate(_store(records), engine=_engine_option(engine), gpu=gpu_name)
    calibration = run.calibration
    written = None
    if out_file and calibration.groups:
        from pathlib import Path

        from apron.paths import write_atomic

        written = Path(out_file)
        write_atomic(written, (json.dumps(calibration.to_json(), indent=1) + "\n").encode())
    if as_json:
        emit_json({**run.to_json(), "calibration": calibration.to_json(), "written": str(written) if written else None})
    else:
        click.echo(render(run) if run.groups else "no healthy GPU boot beside its plan matches")
    if written:
        say(f"apron: wrote {written}")
    if not calibration.groups:
        raise Failed("nothing fitted: no group of at least 3 boots whose observed terms a factor improves")


@records_group.command("compare")
@click.argument("record_id", required=False)
@records_option
@json_option()
def records_compare_command(record_id: str | None, records: str | None, as_json: bool) -> None:
    """Predicted (the linked plan) beside measured (a boot: RECORD_ID, default the newest), with the error."""
    from apron.records.report import render_compare
    from apron.records.views import compare_document, newest_boot

    store = _store(records)
    table = compare_document(store, record_id or newest_boot(store))
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
@option(
    "--plan",
    "plan_ref",
    group="Options",
    help="The plan the boot ran: a plan JSON file (apron plan --json) or a plan record id.",
)
@option(
    "--engine",
    "engine",
    group="Options",
    help="vLLM release of the boot, e.g. vllm==0.32.0 (default: the plan's, else the log's banner).",
)
@records_option
@json_option("Print the apron.diagnosis/1 JSON document.")
def diagnose_command(
    logfile: str, plan_ref: str | None, engine: str | None, records: str | None, as_json: bool
) -> None:
    """Find the decisive error in a failed boot's LOGFILE, the rule that corrects it, and whether the plan knew."""
    from apron.records.saved import not_a_plan, saved_plan
    from apron.report.diagnosis import render_diagnosis
    from apron.rules import StatusStore, diagnose
    from apron.rules.diagnose import read_log

    store = _store(records)
    plan = saved_plan(plan_ref, store) if plan_ref else None
    if plan_ref and plan is None:
        raise not_a_plan(f"--plan {plan_ref}")
    diagnosis = diagnose(
        read_log(logfile), plan=plan, engine_version=_engine_option(engine), store=StatusStore(store.rules_dir)
    )
    if as_json:
        emit_json(diagnosis.to_json())
        return
    click.echo(render_diagnosis(diagnosis, logfile))


@cli.group("rules")
def rules_group() -> None:
    """Correction rules and their status (hypothesis or proven) per vLLM release."""


def _status_store(records: str | None) -> StatusStore:
    """Rule statuses live beside the boot records that prove them (RECORDS/rules)."""
    from apron.rules import StatusStore

    return StatusStore(_store(records).rules_dir)


@rules_group.command("list")
@option("--engine", "engine", group="Options", help="Show each rule's status on this release, e.g. vllm==0.32.0.")
@records_option
@json_option()
def rules_list_command(engine: str | None, records: str | None, as_json: bool) -> None:
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
@records_option
@json_option()
def rules_show_command(rule_id: str, records: str | None, as_json: bool) -> None:
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
@json_option()
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
@json_option()
def engine_list_command(as_json: bool) -> None:
    """List the releases Apron has facts for (shipped and synced)."""
    from apron.engine.summary import list_rows

    rows = list_rows()
    if as_json:
        emit_json(rows)
        return
    from apron.report.tables import render_table

    table = [
        (r["version"], r["origin"], f"{r['num_architectures']:,}", r["torch"] or "not pinned", r["filename"])
        for r in rows
    ]
    click.echo(render_table(("release", "facts", "architectures", "torch", "read from"), table, right=(2,)))


@engine_group.command("show")
@click.argument("version", metavar="X")
@json_option("Print JSON (a summary; --full for everything).")
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
@json_option()
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
@option("--model", group="Endpoint", required=True, help="The served model name (as /v1/models lists it).")
@option(
    "--timeout",
    "timeout_seconds",
    group="Endpoint",
    type=float,
    default=600,
    show_default=True,
    help="Seconds per request.",
)
@option(
    "--suite",
    group="Checks",
    type=click.Choice(["short", "deploy"]),
    default="short",
    show_default=True,
    help="short: three exact questions; deploy: needle, tool call, JSON schema, image, reasoning.",
)
@option("--only", group="Checks", multiple=True, help="Run only this check (repeatable), e.g. --only tool_call.")
@option("--multimodal", group="Checks", is_flag=True, help="The model takes images: run the image check.")
@reasoning_effort_option
@option(
    "--reasoning/--no-reasoning",
    group="Checks",
    default=None,
    help="The model thinks before answering (default: judge from its replies).",
)
@option("--reasoning-parser", group="Checks", help="The model's reasoning parser, named in fixes.")
@option(
    "--tool-call-parser",
    "tool_parser",
    group="Checks",
    old=("--tool-parser",),
    help="The model's tool-call parser (vLLM's --tool-call-parser), named in fixes.",
)
@option(
    "--tool-choice",
    group="Checks",
    type=click.Choice(["auto", "required", "named"]),
    default="auto",
    show_default=True,
    help="auto goes through the server's tool parser; required/named are constrained by the server.",
)
@option(
    "--answer-budget-tokens",
    group="Checks",
    type=int,
    default=64,
    show_default=True,
    help="max_tokens for a short answer.",
)
@option(
    "--seed", group="Checks", type=int, help="Seed for the needle, its depth and the image colour (default: random)."
)
@json_option("Print the apron.check/1 JSON document.")
def check_command(url: str, model: str, as_json: bool, only: tuple[str, ...], **opts: Any) -> None:
    """Will the model at URL answer the way users ask? Exit 1 if a check fails."""
    from apron.measure.checks import run_checks

    report = run_checks(url, model, only=only or None, progress=say, **opts)
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
@option("--model", group="Endpoint", required=True, help="The served model name (as /v1/models lists it).")
@option(
    "--timeout",
    "timeout_seconds",
    group="Endpoint",
    type=float,
    default=1800,
    show_default=True,
    help="Seconds for the whole test.",
)
@option("--vllm", "vllm_executable", group="Serving test", help="The `vllm` executable (default: the one on PATH).")
@serving_options("Serving test", (50, 512, 128, 4))
@option("--seed", group="Serving test", type=int, default=0, show_default=True)
@option(
    "--tokenizer",
    group="Serving test",
    help="Tokenizer for the prompts (default: the served model's root from /v1/models).",
)
@option(
    "--result-dir",
    group="Output",
    type=click.Path(file_okay=False),
    help="Where the result JSON goes (default: Apron's data dir).",
)
@json_option("Print the apron.serve_test/1 JSON document.")
def serve_test_command(url: str, model: str, as_json: bool, **opts: Any) -> None:
    """How fast does the model at URL serve? vLLM's own `vllm bench serve`; exit 1 if requests fail."""
    from apron.measure.servetest import run_serve_test

    report = run_serve_test(url, model, progress=say, **opts)
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
        if debug and not exc.quiet:
            raise
        if not exc.quiet:
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
