"""Put a plan together: checkpoint + GPU + engine release + settings -> every number, labelled."""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from apron.checkpoint import Checkpoint, load_checkpoint
from apron.engine.facts import EngineFacts, known_versions, load_facts
from apron.errors import BadInput
from apron.hardware import Gpu
from apron.plan import memory
from apron.plan.model_config import ModelConfig
from apron.plan.parsers import parser_flags
from apron.plan.quantity import Problem, Quantity
from apron.plan.result import ModelIdentity, Plan
from apron.plan.settings import EngineSettings, UserSettings, resolve_settings, user_flags
from apron.plan.weights import WeightSettings, WeightsEstimate, estimate_weights


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


def plan_checkpoint(checkpoint: Checkpoint, gpu: Gpu, user: UserSettings,
                    engine_version: str | None = None) -> Plan:
    config = ModelConfig.from_config(checkpoint.config)
    facts, engine_note = choose_engine(checkpoint.architecture, engine_version)
    problems = registry_problems(checkpoint, config, gpu, facts)
    settings = resolve_settings(checkpoint, config, gpu, facts, user)
    weights = estimate_weights(checkpoint, config, WeightSettings(
        tensor_parallel_size=settings.tensor_parallel_size, runtime_dtype=settings.dtype,
        capability=gpu.compute_capability, language_model_only=settings.language_model_only,
        vocab_padding_size=facts.defaults.get("vocab_padding_size", 64)))
    problems += list(settings.problems) + list(weights.problems)
    budget = memory.plan_memory(checkpoint, config, gpu, facts, settings, weights)
    problems += list(budget.problems)
    quantities = {"weights_bytes_per_gpu": weights_quantity(weights), **budget.quantities}
    parser_flag_list, parser_problems, parser_note = parser_flags(checkpoint, facts)
    problems += parser_problems
    flags = required_flags(settings, budget.extra_flags + tuple(parser_flag_list))
    unknowns = list(budget.unknowns)
    if weights.unknown_layout_tensors:
        unknowns.append(f"tensor-parallel layout of {len(weights.unknown_layout_tensors)} tensors not "
                        f"recognised (counted whole on every GPU), e.g. {weights.unknown_layout_tensors[0]}")
    notes = list(checkpoint.notes) + [engine_note] + list(budget.notes) + [parser_note]
    if not gpu.is_total_exact:
        notes.append(f"GPU total bytes are {gpu.total_bytes_basis}")
    return Plan(
        model=ModelIdentity(source=checkpoint.source, repo_id=checkpoint.repo_id, revision=checkpoint.revision,
                            architecture=checkpoint.architecture, model_type=checkpoint.model_type,
                            source_kind=checkpoint.source_kind),
        engine_version=facts.version, gpu_name=gpu.name, gpu_count=settings.tensor_parallel_size,
        total_bytes_per_gpu=gpu.total_bytes, settings=settings.to_json(),
        verdict=verdict(problems, budget.verdict), quantities=quantities, flags=tuple(flags),
        command=serve_command(checkpoint, flags, user.env_dict), problems=tuple(problems), unknowns=tuple(unknowns),
        notes=tuple(n for n in notes if n),
        details={"weights": weights_details(weights), "model_shape": model_shape(config), **budget.details},
    )


def choose_engine(architecture: str, requested: str | None) -> tuple[EngineFacts, str]:
    """A pinned version, or the newest known release whose registry holds the architecture."""
    if requested:
        return load_facts(requested), f"engine pinned with --engine vllm=={requested}"
    versions = known_versions()
    if not versions:
        raise BadInput("no engine facts are installed; run `apron engine sync vllm==X` first")
    for version in reversed(versions):
        facts = load_facts(version)
        if facts.architecture(architecture) is not None:
            newest = versions[-1]
            why = "the newest known release" if version == newest else \
                f"the newest known release whose registry holds {architecture} ({newest} does not)"
            return facts, f"vLLM {version} chosen: {why}"
    return load_facts(versions[-1]), f"no known release registers {architecture}; planned against the newest"


def registry_problems(checkpoint: Checkpoint, config: ModelConfig, gpu: Gpu, facts: EngineFacts) -> list[Problem]:
    problems = []
    arch = checkpoint.architecture
    if facts.architecture(arch) is None:
        problems.append(Problem("architecture_not_supported", unsupported_message(facts, arch, checkpoint),
                                "proven_constraint"))
    method = config.quant_method
    if method:
        info = facts.quantization(_facts_quant_name(method))
        need = info.get("min_capability") if info else None
        if need is not None and gpu.capability_int < need:
            problems.append(Problem("quantization_capability", f"The quantization method {method} is not "
                                    f"supported for the current GPU. Minimum capability: {need}. Current "
                                    f"capability: {gpu.capability_int}.", "proven_constraint"))
    return problems


def _facts_quant_name(method: str) -> str:
    # models/config.py GptOssForCausalLMConfig rewrites gpt-oss's "mxfp4" to "gpt_oss_mxfp4", whose
    # class inherits Mxfp4Config's capability.
    return {"gpt_oss_mxfp4": "mxfp4"}.get(method, method)


def unsupported_message(facts: EngineFacts, arch: str, checkpoint: Checkpoint) -> str:
    """registry.py _raise_for_unsupported, rendered for this architecture."""
    last = facts.previously_supported(arch)
    if last:
        return (f"Model architecture {arch} was supported in vLLM until v{last}, and is not supported "
                "anymore. Please use an older version of vLLM if you want to use this model architecture.")
    plugin = facts.out_of_tree(arch)
    if plugin:
        return (f"Model architecture {arch} is not supported in-tree anymore. Please install the plugin "
                f"at {plugin} to use this model architecture.")
    return (f"Model architectures {checkpoint.architectures} are not supported for now. (vLLM "
            f"{facts.version} registers {len(facts.architectures)} architectures.)")


def model_shape(config: ModelConfig) -> dict:
    """What correction rules need to pick a tensor-parallel size the engine accepts."""
    return {"num_attention_heads": config.num_heads, "num_key_value_heads": config.num_kv_heads,
            "vocab_size": config.vocab_size}


def weights_quantity(weights: WeightsEstimate) -> Quantity:
    label = "predicted" if weights.unknown_layout_tensors else "derived"
    return Quantity(weights.bytes_per_gpu, "bytes", "predicted" if weights.notes else label, weights.basis)


def weights_details(weights: WeightsEstimate) -> dict:
    return {"runtime_dtype": weights.runtime_dtype, "checkpoint_bytes": weights.checkpoint_bytes,
            "groups": [{"group": line.group, "checkpoint_bytes": line.checkpoint_bytes,
                        "bytes_per_gpu": line.bytes_per_gpu} for line in weights.lines],
            "skipped": [{"reason": r, "bytes": n} for r, n in weights.skipped],
            "unknown_layout_tensors": list(weights.unknown_layout_tensors[:20])}


def verdict(problems: list[Problem], memory_verdict: str) -> str:
    if any(p.label == "proven_constraint" and p.kind not in _ADVISORY for p in problems):
        return "does_not_fit"
    return memory_verdict


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


def ceil_util(total_bytes: int, utilization: float) -> int:
    """v1/worker/utils.py request_memory: math.ceil(total * gpu_memory_utilization)."""
    return math.ceil(total_bytes * utilization)


def engine_diff(plan: Plan, other: Plan) -> dict:
    """How a plan's numbers move between two releases (`apron plan ... --engine-diff X`)."""
    rows = {}
    for name, mine in plan.quantities.items():
        theirs = other.quantities[name]
        delta = None
        if mine.value is not None and theirs.value is not None:
            delta = mine.value - theirs.value
        rows[name] = {plan.engine_version: mine.value, other.engine_version: theirs.value, "delta": delta,
                      "labels": [mine.label, theirs.label]}
    return {"versions": [plan.engine_version, other.engine_version],
            "verdicts": [plan.verdict, other.verdict], "quantities": rows,
            "flags_only_in": {plan.engine_version: sorted(set(plan.flags) - set(other.flags)),
                              other.engine_version: sorted(set(other.flags) - set(plan.flags))}}
