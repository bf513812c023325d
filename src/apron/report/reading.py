"""The lines under a plan card's numbers that keep them from reading as contradictions: what "KV bytes per
token: none" and "KV cache size" count on a layout with sliding windows or per-request state, and the
multimodal tower the plan profiled (it changes the activation peak and the budget)."""

from __future__ import annotations

import re

from apron.plan.result import Plan
from apron.units import format_bytes

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# details.kv.layers keys: "<kind> page <bytes> B, block <tokens>" (apron.plan.kv.planning layer_kinds)
_LAYER_KEY = re.compile(r"^(?P<kind>\w+) page (?P<page>\d+) B, block (?P<block>\d+)$")
# Layer kinds whose page holds a request's whole state, whatever its length (plan/kv/specs.py).
PER_REQUEST_KINDS = {"mamba": "state", "ring": "ring buffer"}
KIND_NAMES = {
    "full": "full attention",
    "sliding": "sliding-window",
    "sliding_mla": "sliding-window MLA",
    "chunked": "chunked local attention",
    "mla": "MLA",
}
# Kinds whose need per request grows with its length alone: on these, KV cache size is tokens x bytes.
PROPORTIONAL = {"full", "mla"}


def reading_lines(plan: Plan) -> list[str]:
    lines = _kv_lines(plan) + _tower_lines(plan)
    return ["", "reading these numbers:", *(f"  - {line}" for line in lines)] if lines else []


def _layers(plan: Plan) -> list[tuple[str, int, int, int]]:
    """(kind, page bytes, block tokens, layers) per layer kind, as the plan's KV details list them."""
    kv = plan.details.get("kv")
    layers = kv.get("layers") if isinstance(kv, dict) else None
    out = []
    for key, count in (layers or {}).items():
        match = _LAYER_KEY.match(str(key))
        if match and isinstance(count, int):
            out.append((match["kind"], int(match["page"]), int(match["block"]), count))
    return out


def per_kind_bytes(plan: Plan) -> list[str]:
    """ "50 x sliding-window layers: 16,384 B per token each (in the window)", one per kind."""
    out = []
    for kind, page, block, count in _layers(plan):
        if kind in PER_REQUEST_KINDS:
            out.append(f"{count} x {kind} layers: a {page:,} B {PER_REQUEST_KINDS[kind]} per request each")
            continue
        scope = " (the window's tokens only)" if kind.startswith("sliding") else ""
        scope = " (one chunk's tokens only)" if kind == "chunked" else scope
        out.append(f"{count} x {KIND_NAMES.get(kind, kind)} layers: {page // block:,} B per token each{scope}")
    return out


def _kv_lines(plan: Plan) -> list[str]:
    per_token = plan.quantities.get("kv_bytes_per_token")
    kinds = {kind for kind, *_ in _layers(plan)}
    lines = []
    if per_token is not None and per_token.value is None and per_token.label != "unknown" and kinds:
        lines.append("KV bytes per token is none: no single figure on this layout; " + "; ".join(per_kind_bytes(plan)))
    tokens, concurrency = plan.quantity_value("kv_tokens"), plan.quantity_value("max_concurrency")
    if tokens is not None and concurrency is not None and kinds - PROPORTIONAL:
        longest = _longest_fitting(plan)
        lines.append(
            f"KV cache size is vLLM's max concurrency x max_model_len ({concurrency:,.2f} x "
            f"{plan.settings.max_model_len:,} = {tokens:,} tokens): how many requests of max_model_len fit at "
            "once, counted over every layer group, not the tokens of one request (windows and per-request "
            "state cost the same at any length)"
            + (f"; one request fits up to {longest:,} tokens (the fix below)" if longest and concurrency < 1 else "")
        )
    return lines


def _longest_fitting(plan: Plan) -> int | None:
    for problem in plan.problems:
        match = re.search(r"largest max_model_len that fits: --max-model-len (\d+)", problem.message)
        if problem.kind == "fix" and match:
            return int(match.group(1))
    return None


def _tower_lines(plan: Plan) -> list[str]:
    if not plan.model.is_multimodal:
        return []
    if plan.settings.language_model_only:
        return ["multimodal model served text-only (--language-model-only): its tower is not loaded or profiled"]
    encoder = plan.details.get("encoder")
    if not isinstance(encoder, dict):
        return ["multimodal model: its tower is not described in this plan"]
    family = encoder.get("family") or "unnamed"
    batch = encoder.get("batch")
    if not isinstance(batch, dict) or not isinstance(batch.get("tokens_per_item"), int):
        why = encoder.get("skipped") or encoder.get("unknown") or "its profiling batch is not modelled"
        return [f"multimodal model, {family} tower: {why}"]
    moment = _moment_bytes(plan, "vision encoder")
    activation = plan.details.get("activation")
    peak = activation.get("peak") if isinstance(activation, dict) else None
    peak_value = plan.quantity_value("activation_peak_bytes")
    where = (
        f"; the activation peak is the {peak}'s {format_bytes(peak_value)}"
        if peak and peak != "vision encoder" and peak_value
        else ("; it is the activation peak" if peak == "vision encoder" else "")
    )
    return [
        f"multimodal model, {family} tower: profiled on {batch.get('items')} dummy {batch.get('modality')} item(s) "
        f"of {batch.get('tokens_per_item'):,} tokens"
        + (f" ({format_bytes(moment)} at its moment of the profiling run{where})" if moment else where)
        + "; --language-model-only leaves it out"
    ]


def _moment_bytes(plan: Plan, name: str) -> int | None:
    activation: Any = plan.details.get("activation")
    for moment in activation.get("moments", []) if isinstance(activation, dict) else []:
        if moment.get("name") == name and isinstance(moment.get("bytes"), int):
            return int(moment["bytes"])
    return None
