"""The plan card: what a person reads in the terminal after `apron plan`."""

from __future__ import annotations

from typing import Any, Protocol

from apron.plan.result import REQUIRED_QUANTITIES, Plan


class QuantityLike(Protocol):
    """A plan quantity, or a report row's copy of one (apron.report.rows.Quantity)."""

    @property
    def value(self) -> int | float | None: ...
    @property
    def unit(self) -> str: ...
    @property
    def label(self) -> str: ...


QUANTITY_TITLES = {
    "weights_bytes_per_gpu": "weights per GPU",
    "activation_peak_bytes": "activation peak (profiling)",
    "cudagraph_bytes": "CUDA graphs",
    "non_torch_bytes": "non-torch memory",
    "requested_bytes": "requested (util x total)",
    "available_kv_bytes": "KV cache budget",
    "kv_bytes_per_token": "KV bytes per token",
    "kv_block_bytes": "KV block",
    "num_kv_blocks": "KV blocks",
    "kv_tokens": "KV cache size",
    "max_concurrency": "max concurrency",
    "host_ram_bytes": "host RAM needed",
}
_VERDICT = {"fits": "FITS", "does_not_fit": "DOES NOT FIT", "unknown": "UNKNOWN"}


_EXACT_BYTES = {"kv_bytes_per_token", "kv_block_bytes"}


def format_value(q: QuantityLike, name: str = "") -> str:
    if q.value is None:
        return "unknown" if q.label == "unknown" else "n/a"
    if q.unit == "bytes" and name in _EXACT_BYTES:
        return f"{q.value:,} B"
    if q.unit == "bytes":
        return f"{q.value / 2**30:,.2f} GiB" if abs(q.value) >= 2**24 else f"{q.value:,} B"
    if q.unit == "sequences":
        return f"{q.value:,.2f}x"
    return f"{q.value:,} {q.unit}"


def render_card(plan: Plan) -> str:
    m = plan.model
    revision = f"@{m.revision[:12]}" if m.revision else ""
    lines = [
        f"{m.repo_id or m.source}{revision}  ({m.architecture}, {m.source_kind})",
        f"vLLM {plan.engine_version} on {plan.gpu_count} x {plan.gpu_name} "
        f"({plan.total_bytes_per_gpu / 2**30:.2f} GiB each)",
        f"settings: max_model_len {plan.settings.max_model_len}, dtype {plan.settings.dtype}, "
        f"util {plan.settings.gpu_memory_utilization}, max_num_seqs {plan.settings.max_num_seqs}, "
        f"max_num_batched_tokens {plan.settings.max_num_batched_tokens}"
        f"{', eager' if plan.settings.enforce_eager else ''}",
        "",
        f"verdict: {_VERDICT[plan.verdict]}",
        "",
    ]
    width = max(len(t) for t in QUANTITY_TITLES.values())
    for name in REQUIRED_QUANTITIES:
        q = plan.quantities[name]
        lines.append(f"  {QUANTITY_TITLES[name]:<{width}}  {format_value(q, name):>16}  [{q.label}]")
    if plan.problems:
        lines += ["", "problems:"] + [f"  - [{p.label}] {p.message}" for p in plan.problems]
    if plan.unknowns:
        lines += ["", "unknown:"] + [f"  - {u}" for u in plan.unknowns]
    if plan.notes:
        lines += ["", "notes:"] + [f"  - {n}" for n in plan.notes]
    lines += ["", "command:", f"  {plan.command}"]
    return "\n".join(lines)


def _shown(value: float | None, unit: str) -> str:
    if value is None:
        return "unknown"
    if unit:
        return f"{value / 2**30:,.2f}"
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def render_engine_diff(diff: dict[str, Any]) -> str:
    mine, theirs = diff["versions"]
    lines = [f"vLLM {mine} vs {theirs}: verdict {diff['verdicts'][0]} vs {diff['verdicts'][1]}"]
    for name, row in diff["quantities"].items():
        a, b, delta = row[mine], row[theirs], row["delta"]
        if a == b:
            continue
        unit = "GiB" if "bytes" in name else ""
        scale = 2**30 if unit else 1
        change = (
            ""
            if delta is None
            else f"  ({delta / scale:+,.2f} {unit})"
            if unit
            else f"  ({delta:+,.2f})"
            if isinstance(delta, float)
            else f"  ({delta:+,})"
        )
        lines.append(f"  {QUANTITY_TITLES.get(name, name):<28} {_shown(a, unit):>14} {_shown(b, unit):>14}{change}")
    for version, flags in diff["flags_only_in"].items():
        if flags:
            lines.append(f"  flags only with {version}: {' '.join(flags)}")
    if len(lines) == 1:
        lines.append("  no quantity changes")
    return "\n".join(lines)
