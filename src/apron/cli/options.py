"""The options more than one command shares (and those of plan and fit, the questions agents also ask
through MCP), declared once as data in OPTIONS; the click decorators are generated from it.

One vocabulary: the same name for the same thing on every command, listed under a heading in --help.
An option renamed for that keeps its old name as a hidden alias for one release (README, "Renamed
options"). A command may change a spec's help text or heading where its use differs (`spec.but(...)`);
the flags, keyword and type stay those of the one definition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import click

from apron.cli.groups import GroupedOption
from apron.errors import BadInput
from apron.frozen import frozen

F = TypeVar("F", bound=Callable[..., Any])


# click's ParamType takes type parameters only in releases newer than the oldest this package allows
# (click>=8.1), where subscripting it would fail at import: the base stays unparameterized.
class HumanInt(click.ParamType):  # type: ignore[type-arg]
    """An integer as vLLM's argument parser reads it (apron.plan.settings.human_readable_int):
    32768, 32k = 32,000, 32K = 32,768, 25.6k = 25,600; with `or_auto`, -1 and "auto" are its auto-fit;
    with `optional`, "" and "None" are not given (arg_utils.py optional_type)."""

    name = "integer"

    def __init__(self, *, or_auto: bool = False, optional: bool = False) -> None:
        self.or_auto, self.optional = or_auto, optional

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | None:
        from apron.plan.settings import human_readable_int, human_readable_int_or_auto

        if isinstance(value, int):
            return value
        if self.optional and value in ("", "None"):
            return None
        try:
            parse = human_readable_int_or_auto if self.or_auto else human_readable_int
            return parse(str(value))  # click names the option
        except BadInput as exc:
            self.fail(exc.message, param, ctx)


@frozen
class OptionSpec:
    """One option as data: its flags, the keyword the command receives, its heading and help in --help,
    and click's type (a Python type, or a click type that names its choices, range or path kind)."""

    flags: tuple[str, ...]
    dest: str
    group: str = "Options"
    help: str | None = None
    type: Any = None
    default: Any = None
    show_default: bool = False
    is_flag: bool = False
    required: bool = False
    old: tuple[str, ...] = ()  # hidden old names, still accepted with a note

    def but(self, **changes: Any) -> OptionSpec:
        return replace(self, **changes)

    def decorator(self) -> Callable[[F], F]:
        given = {"help": self.help, "type": self.type, "default": self.default}
        kwargs: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
        for key in ("show_default", "is_flag", "required"):
            if getattr(self, key):
                kwargs[key] = True
        return click.option(
            *self.flags, self.dest, *self.old, cls=GroupedOption, group=self.group, old_names=self.old, **kwargs
        )


MODEL, ENGINE, GPU, SERVING = "Model", "Engine settings", "GPU", "Serving test"

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(("--json",), "as_json", "Output", "Print JSON.", is_flag=True),
    OptionSpec(
        ("--records",),
        "records",
        "Output",
        "Record store folder (default: Apron's data dir).",
        type=click.Path(file_okay=False),
    ),
    # The GPU a plan is made for (plan, boot SOURCE).
    OptionSpec(("--gpu",), "gpu", GPU, 'PyTorch device name ("NVIDIA H100 80GB HBM3") or alias (H100, 4090).'),
    OptionSpec(
        ("--gpu-memory-bytes",),
        "gpu_memory_bytes",
        GPU,
        "Total bytes per GPU as PyTorch reports them (overrides the catalog).",
        type=int,
    ),
    OptionSpec(
        ("--gpu-capability",), "gpu_capability", GPU, "Compute capability (e.g. 8.9) for a GPU not in the catalog."
    ),
    # The model and the engine settings a plan is made for (plan, boot SOURCE, fit).
    OptionSpec(("--revision",), "revision", MODEL, "Hub revision (branch, tag or commit)."),
    OptionSpec(
        ("--no-catalog",),
        "no_catalog",
        MODEL,
        "Fetch from the Hub even for models in the bundled catalog.",
        is_flag=True,
    ),
    OptionSpec(
        ("--from",),
        "from_file",
        MODEL,
        "Check a deployment someone already wrote: a shell script or command line (file or -), docker "
        "run/Compose, SkyPilot, Kubernetes/KServe, Helm values, a vLLM recipe or --config file.",
    ),
    OptionSpec(
        ("--name",),
        "deployment_name",
        MODEL,
        "With --from: the deployment of the file to use (a service, model entry, role or variant).",
    ),
    OptionSpec(
        ("--calibration",),
        "calibration_file",
        MODEL,
        "Scale the observed terms with a calibration from `apron calibrate --out` (never by default).",
        type=click.Path(dir_okay=False),
    ),
    OptionSpec(
        ("--engine",), "engine", ENGINE, "vLLM release, e.g. vllm==0.33.0 (default: newest that supports the model)."
    ),
    OptionSpec(("--tp",), "tp", ENGINE, "Tensor-parallel size.", type=int, default=1, show_default=True),
    OptionSpec(("--max-model-len",), "max_model_len", ENGINE, type=HumanInt(or_auto=True)),
    OptionSpec(("--gpu-memory-utilization",), "gpu_memory_utilization", ENGINE, type=float),
    OptionSpec(("--max-num-seqs",), "max_num_seqs", ENGINE, type=int),
    OptionSpec(("--max-num-batched-tokens",), "max_num_batched_tokens", ENGINE, type=HumanInt()),
    OptionSpec(
        ("--kv-cache-memory-bytes",),
        "kv_cache_memory_bytes",
        ENGINE,
        "The KV cache size itself (vLLM's syntax: 67108864, 64M, 1G); the CPU platform's way.",
        type=HumanInt(optional=True),
    ),
    OptionSpec(("--kv-cache-dtype",), "kv_cache_dtype", ENGINE, default="auto", show_default=True),
    OptionSpec(("--dtype",), "dtype", ENGINE, default="auto", show_default=True),
    OptionSpec(("--enforce-eager",), "enforce_eager", ENGINE, is_flag=True),
    OptionSpec(
        ("--language-model-only",),
        "language_model_only",
        ENGINE,
        "Skip the vision/audio tower (text-only serving).",
        is_flag=True,
    ),
    OptionSpec(
        ("--limit-mm-per-prompt",),
        "limit_mm_per_prompt",
        ENGINE,
        'Items per prompt per modality, as vLLM takes it: \'{"image": 1, "video": 0}\'.',
    ),
    OptionSpec(
        ("--mm-encoder-tp-mode",),
        "mm_encoder_tp_mode",
        ENGINE,
        "How the vision tower uses --tp.",
        type=click.Choice(["weights", "data"]),
    ),
    OptionSpec(
        ("--host-ram-bytes",),
        "host_ram_bytes",
        "Machine",
        "The machine's host RAM; the plan checks its pinned host tables fit.",
        type=int,
    ),
    # The load `apron fit` sizes for, and where its prices come from.
    OptionSpec(
        ("--context", "--max-model-len"),
        "context",
        help="Tokens each request may hold (prompt + output): the plans' --max-model-len.",
        type=HumanInt(or_auto=True),
    ),
    OptionSpec(
        ("--users",), "users", help="Requests served at once, each up to --context tokens.", type=int, required=True
    ),
    OptionSpec(
        ("--gpus",), "gpus", help="Comma-separated GPUs to consider (names or aliases; default: the whole catalog)."
    ),
    OptionSpec(
        ("--max-gpus",),
        "max_gpus",
        help="Largest machine: 1, 2, 4 or 8 GPUs.",
        type=int,
        default=8,
        show_default=True,
    ),
    OptionSpec(("--prices",), "prices_file", help="A price table (apron.prices/1 JSON) replacing the bundled one."),
    OptionSpec(("--tier",), "tier", type=click.Choice(["on-demand", "spot"]), default="on-demand", show_default=True),
    # A served endpoint (check, serve-test) and the requests sent to it (boot, check, serve-test).
    OptionSpec(("--model",), "model", "Endpoint", "The served model name (as /v1/models lists it).", required=True),
    OptionSpec(
        ("--reasoning-effort",),
        "reasoning_effort",
        "Checks",
        "Send reasoning_effort (for chat templates that read it; low keeps answers short).",
        type=click.Choice(("none", "minimal", "low", "medium", "high", "xhigh", "max")),
    ),
    OptionSpec(
        ("--num-prompts",),
        "num_prompts",
        SERVING,
        "Requests in the serving test.",
        type=int,
        default=50,
        show_default=True,
        old=("--serve-prompts",),
    ),
    OptionSpec(
        ("--input-len",),
        "input_len",
        SERVING,
        "Tokens in per request.",
        type=int,
        default=512,
        show_default=True,
        old=("--serve-input-len",),
    ),
    OptionSpec(
        ("--output-len",),
        "output_len",
        SERVING,
        "Tokens out per request.",
        type=int,
        default=128,
        show_default=True,
        old=("--serve-output-len",),
    ),
    OptionSpec(
        ("--concurrency",),
        "concurrency",
        SERVING,
        "Requests in flight at once.",
        type=int,
        default=4,
        show_default=True,
        old=("--serve-concurrency",),
    ),
)

SPECS = {spec.dest: spec for spec in OPTIONS}
GPU_OPTIONS = ("gpu", "gpu_memory_bytes", "gpu_capability")
SETTINGS_OPTIONS = (
    "revision",
    "no_catalog",
    "engine",
    "tp",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_memory_bytes",
    "kv_cache_dtype",
    "dtype",
    "enforce_eager",
    "language_model_only",
    "limit_mm_per_prompt",
    "mm_encoder_tp_mode",
    "host_ram_bytes",
)
SERVING_OPTIONS = ("num_prompts", "input_len", "output_len", "concurrency")


def apply(decorators: list[Callable[[F], F]], command: F) -> F:
    """Decorate as if the decorators were written in this order above the function."""
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def shared(*dests: str, **changes: Any) -> Callable[[F], F]:
    """The OPTIONS named (by keyword), in this order, each with CHANGES (e.g. another heading)."""

    def add(command: F) -> F:
        return apply([SPECS[dest].but(**changes).decorator() for dest in dests], command)

    return add


def option(*decls: str, group: str, old: tuple[str, ...] = (), **kwargs: Any) -> Callable[[F], F]:
    """An option only one command has, under a heading in its --help."""
    return click.option(*decls, *old, cls=GroupedOption, group=group, old_names=old, **kwargs)


def json_option(what: str = "Print JSON.") -> Callable[[F], F]:
    return SPECS["as_json"].but(help=what).decorator()


def records_option(command: F) -> F:
    return SPECS["records"].decorator()(command)
