"""The options more than one command shares (and those of plan and fit, the questions agents also ask
through MCP), declared once as data in OPTIONS; the click decorators are generated from it, and
`apron plan` / `apron fit` are parsed from it without click (cli/fast.py).

One vocabulary: the same name for the same thing on every command, listed under a heading in --help.
An option renamed for that keeps its old name as a hidden alias for one release (README, "Renamed
options"). A command may change a spec's help text or heading where its use differs (`spec.but(...)`);
the flags, keyword and type stay those of the one definition.

This module imports no click at import time: the option types below are data (Choice, PathArg,
AtLeast, HumanInt), turned into click's types only when a click command is built.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from apron.errors import BadInput
from apron.frozen import frozen, replace

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    import click

    F = TypeVar("F", bound=Callable[..., Any])


@frozen
class HumanInt:
    """An integer as vLLM's argument parser reads it (apron.plan.settings.human_readable_int):
    32768, 32k = 32,000, 32K = 32,768, 25.6k = 25,600; with `or_auto`, -1 and "auto" are its auto-fit;
    with `optional`, "" and "None" are not given (arg_utils.py optional_type)."""

    or_auto: bool = False
    optional: bool = False
    name = "integer"

    def parse(self, value: str) -> int | None:
        """The value, or BadInput with the reason (click and cli/fast.py name the option)."""
        from apron.plan.settings import human_readable_int, human_readable_int_or_auto

        if self.optional and value in ("", "None"):
            return None
        parse = human_readable_int_or_auto if self.or_auto else human_readable_int
        return parse(str(value))


@frozen
class Choice:
    """One of VALUES, exactly as written (click.Choice's default, case-sensitive)."""

    values: tuple[str, ...]


@frozen
class PathArg:
    """A path (click.Path): FILE_OKAY / DIR_OKAY say which kinds it may name where it exists."""

    file_okay: bool = True
    dir_okay: bool = True


@frozen
class AtLeast:
    """An integer of at least MIN (click.IntRange(min=MIN))."""

    min: int


def click_type(kind: Any) -> Any:
    """click's type for an option's type (a Python type is click's own already)."""
    import click

    if isinstance(kind, HumanInt):
        return _click_human_int()(kind)
    if isinstance(kind, Choice):
        return click.Choice(list(kind.values))
    if isinstance(kind, PathArg):
        return click.Path(file_okay=kind.file_okay, dir_okay=kind.dir_okay)
    if isinstance(kind, AtLeast):
        return click.IntRange(min=kind.min)
    return kind


@cache
def _click_human_int() -> type:
    import click

    # click's ParamType takes type parameters only in releases newer than the oldest this package
    # allows (click>=8.1), where subscripting it would fail at import: the base stays unparameterized.
    class HumanIntType(click.ParamType):  # type: ignore[type-arg]
        name = "integer"

        def __init__(self, kind: HumanInt) -> None:
            self.kind = kind

        def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | None:
            if isinstance(value, int):
                return value
            try:
                return self.kind.parse(value)  # click names the option
            except BadInput as exc:
                self.fail(exc.message, param, ctx)

    return HumanIntType


@frozen
class OptionSpec:
    """One option as data: its flags, the keyword the command receives, its heading and help in --help,
    and its type (a Python type, or Choice / PathArg / AtLeast / HumanInt)."""

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
        import click

        from apron.cli.groups import GroupedOption

        given = {"help": self.help, "type": click_type(self.type), "default": self.default}
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
        type=PathArg(dir_okay=True, file_okay=False),
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
        type=PathArg(dir_okay=False),
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
        type=Choice(("weights", "data")),
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
    OptionSpec(("--tier",), "tier", type=Choice(("on-demand", "spot")), default="on-demand", show_default=True),
    # A served endpoint (check, serve-test) and the requests sent to it (boot, check, serve-test).
    OptionSpec(("--model",), "model", "Endpoint", "The served model name (as /v1/models lists it).", required=True),
    OptionSpec(
        ("--reasoning-effort",),
        "reasoning_effort",
        "Checks",
        "Send reasoning_effort (for chat templates that read it; low keeps answers short).",
        type=Choice(("none", "minimal", "low", "medium", "high", "xhigh", "max")),
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

# Options only `apron plan` has.
OPTIONS += (
    OptionSpec(
        ("--explain",), "explain", "Output", "Show the memory breakdown and the tensors behind the peak.", is_flag=True
    ),
    OptionSpec(
        ("--engine-diff",), "engine_diff", "Output", "Also plan on this vLLM release and show how the numbers move."
    ),
    OptionSpec(
        ("--html",),
        "html_file",
        "Output",
        "Also write the memory chart and card to FILE.",
        type=PathArg(dir_okay=False),
    ),
)
# Options only `apron fit` has.
OPTIONS += (
    OptionSpec(
        ("--provider",),
        "provider",
        help="One provider's prices (e.g. RunPod, AWS; default: the cheapest listed per GPU).",
    ),
    OptionSpec(
        ("--allow-fp8-kv",),
        "allow_fp8_kv",
        help="Let fit switch the KV cache to fp8 where it falls short (changes accuracy).",
        is_flag=True,
    ),
    OptionSpec(
        ("--min-tokens-per-second",),
        "min_tokens_per_second",
        help="Drop rows whose decode bound per user is below this (a bound from bandwidth, not a benchmark).",
        type=float,
    ),
    OptionSpec(("--top",), "top", help="Feasible rows to show.", type=AtLeast(1), default=10, show_default=True),
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
    import click

    from apron.cli.groups import GroupedOption

    return click.option(*decls, *old, cls=GroupedOption, group=group, old_names=old, **kwargs)


def json_option(what: str = "Print JSON.") -> Callable[[F], F]:
    return SPECS["as_json"].but(help=what).decorator()


def records_option(command: F) -> F:
    return SPECS["records"].decorator()(command)


@frozen
class CommandSpec:
    """A command as data: its name, help, its one optional positional and its options in --help order.
    click's command is built from it (`click_command`), and so is cli/fast.py's parse."""

    name: str
    help: str
    argument: str
    options: tuple[OptionSpec, ...]

    def click_command(self, body: Callable[[dict[str, Any], frozenset[str]], None]) -> click.Command:
        """The click command calling BODY(params, the options typed on the command line)."""
        import click

        from apron.cli.groups import GroupedCommand, typed_on_command_line

        def callback(**params: Any) -> None:
            body(params, typed_on_command_line(params))

        decorators: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
            click.argument(self.argument, required=False),
            *(spec.decorator() for spec in self.options),
        ]
        return click.command(self.name, cls=GroupedCommand, help=self.help)(apply(decorators, callback))


def specs(*dests: str, **changes: Any) -> tuple[OptionSpec, ...]:
    """The OPTIONS named (by keyword), in this order, each with CHANGES (e.g. another heading)."""
    return tuple(SPECS[dest].but(**changes) for dest in dests)
