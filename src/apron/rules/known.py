"""Could it have been known? Did the plan's preflight flag the failure the engine hit?

Flagged means the plan carried a proven-constraint problem of the failure's kind, or predicted
does_not_fit for a failure of memory. Anything else is a miss, reported as one line that feeds back
into the calculator ("plan said fits; engine refused: KV cache too small by 1.14 GiB - calculator
miss"). Host and harness faults are no plan's business.
"""

from __future__ import annotations

from typing import Any

from apron.frozen import frozen
from apron.plan.result import Plan
from apron.rules.fingerprint import Fingerprint

GIB = 2**30

# The plan problems (apron.plan) that announce each failure family.
FAMILY_PROBLEMS: dict[str, tuple[str, ...]] = {
    "kv_cache_too_small": ("kv_cache_too_small", "no_kv_memory", "weights_exceed_request"),
    "no_kv_cache_memory": ("no_kv_memory", "weights_exceed_request", "kv_cache_too_small"),
    "auto_fit_no_memory": ("no_kv_memory", "weights_exceed_request"),
    "cpu_kv_allocation": ("no_kv_memory", "weights_exceed_request", "kv_cache_too_small"),
    "cuda_oom": ("weights_exceed_request", "no_kv_memory", "kv_cache_too_small"),
    "sampler_warmup_oom": ("weights_exceed_request", "no_kv_memory"),
    "mamba_blocks_below_max_num_seqs": ("max_num_seqs_exceeds_state_blocks",),
    "max_model_len_over_derived": ("max_model_len",),
    "float16_unsupported": ("dtype",),
    "bfloat16_unsupported": ("dtype",),
    "architecture_unsupported": ("architecture_not_supported",),
    "quantization_capability": ("quantization_capability",),
    "tp_heads_indivisible": ("tensor_parallel_heads",),
    "batched_tokens_below_max_num_seqs": ("scheduler",),
    "invalid_reasoning_parser": ("reasoning_parser_missing",),
}
MEMORY_FAMILIES = frozenset(
    {
        "kv_cache_too_small",
        "no_kv_cache_memory",
        "auto_fit_no_memory",
        "cpu_kv_allocation",
        "cuda_oom",
        "sampler_warmup_oom",
        "pooler_warmup_oom",
        "mamba_blocks_below_max_num_seqs",
    }
)


@frozen
class KnownReport:
    flagged: bool | None  # None: not a question a plan answers (no plan, a host or harness fault)
    basis: str  # "proven_constraint", "does_not_fit", "miss", "no_plan", "not_a_plan_question"
    line: str

    def to_json(self) -> dict[str, Any]:
        return {"flagged": self.flagged, "basis": self.basis, "line": self.line}


# vLLM's `non-default args` names -> the plan's settings, for telling a boot that ran other settings
_COMPARED = (
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "max_num_seqs",
    "max_num_batched_tokens",
    "tensor_parallel_size",
    "kv_cache_dtype",
    "dtype",
    "enforce_eager",
)


def settings_differences(plan: Plan, ran: dict[str, Any] | None, engine: str | None) -> list[str]:
    """What the boot ran that the plan did not say (its log's `non-default args` and release banner):
    an --extra-args override, another engine. Empty when the boot ran the plan."""
    out = []
    planned = plan.settings.to_json()
    for name in _COMPARED:
        if not ran or name not in ran or ran[name] in (None, "auto"):
            continue
        if ran[name] != planned.get(name):
            shown = planned.get(name)
            out.append(f"--{name.replace('_', '-')} {ran[name]} (the plan: {'none' if shown is None else shown})")
    if engine and engine.split("+", 1)[0] != plan.engine_version:
        out.append(f"vLLM {engine} (the plan: {plan.engine_version})")
    return out


def could_have_known(
    plan: Plan | None, fingerprint: Fingerprint, ran: dict[str, Any] | None = None, engine: str | None = None
) -> KnownReport:
    """RAN and ENGINE: the boot's own settings and release, as its log prints them (when known)."""
    if plan is None:
        return KnownReport(None, "no_plan", "no plan given: cannot say whether the preflight knew")
    if fingerprint.blame in ("host", "harness", "input"):
        return KnownReport(
            None, "not_a_plan_question", f"{fingerprint.family} is a {fingerprint.blame} fault; no plan predicts it"
        )
    kinds = FAMILY_PROBLEMS.get(fingerprint.family, ())
    problems = [p for p in plan.problems if p.kind in kinds]
    proven = [p for p in problems if p.label == "proven_constraint"]
    if proven:
        return KnownReport(
            True,
            "proven_constraint",
            f"plan flagged it: proven constraint ({proven[0].kind}): {_clip(proven[0].message)}",
        )
    if plan.verdict == "does_not_fit" and (problems or fingerprint.family in MEMORY_FAMILIES):
        why = f" ({problems[0].kind})" if problems else ""
        return KnownReport(True, "does_not_fit", f"plan flagged it: predicted does_not_fit{why}")
    differences = settings_differences(plan, ran, engine)
    if differences:
        return KnownReport(
            None,
            "settings_differ",
            "the boot's settings differed from the plan: " + "; ".join(differences) + " - not a calculator miss",
        )
    if problems and not _ran_the_plans_fix(plan, fingerprint):
        # an advisory problem the plan works around with a flag the failed boot did not run
        return KnownReport(
            True,
            "advisory",
            f"plan flagged it ({problems[0].kind}) and its flags avoid it; "
            f"the boot ran without them{_settings_gap(plan, fingerprint)}",
        )
    return KnownReport(False, "miss", _miss_line(plan, fingerprint))


def _ran_the_plans_fix(plan: Plan, fingerprint: Fingerprint) -> bool:
    """The boot used the plan's own max_num_seqs and still failed: the plan's numbers were wrong."""
    ran, planned = fingerprint.fields.get("max_num_seqs"), plan.flag_value("--max-num-seqs")
    return isinstance(ran, int) and planned is not None and str(ran) == planned


def _miss_line(plan: Plan, fingerprint: Fingerprint) -> str:
    head = f"plan said {plan.verdict}"
    what = _what_engine_said(plan, fingerprint)
    kind = "calculator miss" if fingerprint.family in MEMORY_FAMILIES else "preflight miss"
    gap = _settings_gap(plan, fingerprint)
    return f"{head}; engine refused: {what} — {kind}{gap}"


def _what_engine_said(plan: Plan, fingerprint: Fingerprint) -> str:
    fields = fingerprint.fields
    family = fingerprint.family
    if family == "kv_cache_too_small" and fields.get("needed_gib") is not None:
        short = fields["needed_gib"] - (fields.get("available_gib") or 0.0)
        predicted = plan.quantity_value("available_kv_bytes")
        plan_part = f"; plan predicted {predicted / GIB:.2f} GiB available" if predicted is not None else ""
        return (
            f"KV cache too small by {short:.2f} GiB (needs {fields['needed_gib']:.2f} GiB for "
            f"{fields.get('max_model_len')} tokens, engine had {fields.get('available_gib', 0.0):.2f} GiB"
            f"{plan_part})"
        )
    if family == "mamba_blocks_below_max_num_seqs":
        predicted = plan.quantity_value("num_kv_blocks")
        plan_part = f", plan predicted {predicted}" if predicted is not None else ""
        return f"max_num_seqs {fields.get('max_num_seqs')} exceeds {fields.get('num_blocks')} state blocks{plan_part}"
    if family == "cuda_oom":
        tried = fields.get("tried_bytes")
        size = f" (tried to allocate {tried / GIB:.2f} GiB)" if tried else ""
        where = f" while {fingerprint.phase.replace('_', ' ')}" if fingerprint.phase else ""
        return f"CUDA out of memory{where}{size}"
    from apron.rules.families import family_summary

    return f"{family} ({family_summary(family)})"


def _settings_gap(plan: Plan, fingerprint: Fingerprint) -> str:
    """When the boot ran other settings than the plan's, the plan was not what failed."""
    ran = fingerprint.fields.get("max_model_len")
    planned = plan.settings.max_model_len
    if isinstance(ran, int) and isinstance(planned, int) and ran != planned:
        return f" (the boot ran max_model_len {ran}, the plan {planned})"
    return ""


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
