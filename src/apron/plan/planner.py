"""Put a plan together: checkpoint + GPU + engine release + settings -> every number, labelled."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from apron.checkpoint import Checkpoint, load_checkpoint
from apron.engine.facts import EngineFacts, choose_version, engine_change, known_versions, load_facts
from apron.errors import BadInput
from apron.hardware import Gpu
from apron.plan import memory
from apron.plan.encoder import is_tower_whole_on_every_rank
from apron.plan.model_config import ModelConfig
from apron.plan.parsers import parser_flags, tokenizer_note
from apron.plan.quantity import Problem, Quantity, one_of
from apron.plan.result import VERDICTS, ModelIdentity, Plan, PlanSettings, Verdict
from apron.plan.settings import EngineSettings, UserSettings, resolve_settings, user_flags
from apron.plan.weights import WeightsEstimate, WeightSettings, estimate_weights


@dataclass(frozen=True)
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


def plan_checkpoint(checkpoint: Checkpoint, gpu: Gpu, user: UserSettings, engine_version: str | None = None) -> Plan:
    architecture = checkpoint.architecture  # first: a config without one is not worth checking further
    config = ModelConfig.from_config(checkpoint.config, config_file(checkpoint))
    facts, engine_note = choose_engine(architecture, engine_version)
    problems = registry_problems(checkpoint, config, gpu, facts)
    settings = resolve_settings(checkpoint, config, gpu, facts, user)
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
        ),
    )
    problems += list(settings.problems) + list(weights.problems)
    budget = memory.plan_memory(checkpoint, config, gpu, facts, settings, weights)
    problems += list(budget.problems)
    quantities = {"weights_bytes_per_gpu": weights_quantity(weights), **budget.quantities}
    parser_flag_list, parser_problems, parser_note = parser_flags(checkpoint, facts)
    problems += parser_problems
    flags = required_flags(settings, budget.extra_flags + tuple(parser_flag_list))
    unknowns = list(budget.unknowns)
    if weights.unknown_layout_tensors:
        unknowns.append(
            f"tensor-parallel layout of {len(weights.unknown_layout_tensors)} tensors not "
            f"recognised (counted whole on every GPU), e.g. {weights.unknown_layout_tensors[0]}"
        )
    notes = list(checkpoint.notes) + [engine_note] + list(budget.notes) + [parser_note]
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
        ),
        engine_version=facts.version,
        gpu_name=gpu.name,
        gpu_count=settings.tensor_parallel_size,
        total_bytes_per_gpu=gpu.total_bytes,
        settings=PlanSettings.from_json(settings.to_json()),
        compute_capability="{}.{}".format(*gpu.compute_capability),
        verdict=verdict(problems, budget.verdict),
        quantities=quantities,
        flags=tuple(flags),
        command=serve_command(checkpoint, flags, user.env_dict),
        problems=tuple(problems),
        unknowns=tuple(unknowns),
        notes=tuple(n for n in notes if n),
        details={"weights": weights_details(weights), "model_shape": model_shape(config), **budget.details},
    )


def choose_engine(architecture: str, requested: str | None) -> tuple[EngineFacts, str]:
    """A pinned version, or the newest known release whose registry holds the architecture."""
    if requested:
        return load_facts(requested), f"engine pinned with --engine vllm=={requested}"
    choice = choose_version(architecture)
    if choice.version is not None:
        return load_facts(choice.version), choice.reason
    versions = known_versions()
    if not versions:
        raise BadInput("no engine facts are installed; run `apron engine sync vllm==X` first")
    return load_facts(versions[-1]), choice.reason + "; planned against the newest"


def registry_problems(checkpoint: Checkpoint, config: ModelConfig, gpu: Gpu, facts: EngineFacts) -> list[Problem]:
    """Refusals the release raises before any memory is touched, in the release's own words; and
    whether the release runs engine code Apron's tests have not covered."""
    problems = engine_changed_problems(facts)
    refusal = facts.unregistered_architecture_refusal(checkpoint.architectures or [checkpoint.architecture])
    if refusal is not None:
        problems.append(Problem("architecture_not_supported", _short(refusal.message), "proven_constraint"))
    method = config.quant_method
    if method:
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


def _short(message: str, limit: int = 600) -> str:
    """The 'not supported' refusal lists every registered architecture; keep the message readable."""
    return message if len(message) <= limit else message[:limit] + " ...]"


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


def weights_quantity(weights: WeightsEstimate) -> Quantity:
    known = not (weights.unknown_layout_tensors or weights.notes)
    return Quantity(weights.bytes_per_gpu, "bytes", "derived" if known else "predicted", weights.basis)


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
    if any(p.label == "proven_constraint" and p.kind not in _ADVISORY for p in problems):
        return "does_not_fit"
    return one_of(memory_verdict, VERDICTS, "the memory budget's verdict")


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
