"""The plan card: what a person reads in the terminal after `apron plan`."""

from __future__ import annotations

from apron.plan.result import REQUIRED_QUANTITIES, Plan
from apron.report.reading import reading_lines
from apron.units import format_bytes, format_count

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Any, Protocol
else:
    from apron.lite_typing import Protocol


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
# Quantities beyond the required ones, shown after the named row where a plan has them: the CPU
# worker's resident memory, which its automatic KV size subtracts (apron.plan.cpu_resident).
EXTRA_ROWS = {"non_torch_bytes": ("non_kv_bytes", "worker memory (non-KV)")}
_VERDICT = {
    "fits": "FITS",
    "tight": "TIGHT",
    "does_not_fit": "DOES NOT FIT",
    "unsupported": "UNSUPPORTED",
    "unknown": "UNKNOWN",
}


_EXACT_BYTES = {"kv_bytes_per_token"}


def format_value(q: QuantityLike, name: str = "") -> str:
    """A quantity in a unit that fits; "unknown" where it is not modelled, "none" where the platform
    has no such term (a CPU's CUDA graphs)."""
    if q.value is None:
        return "unknown" if q.label == "unknown" else "none"
    if q.unit == "bytes" and name in _EXACT_BYTES:
        return f"{q.value:,} B"
    if q.unit == "bytes":
        return format_bytes(q.value)
    if q.unit == "sequences":
        return f"{q.value:,.2f}x"
    return format_count(q.value, q.unit)


def format_range(q: Any) -> str:
    """ "(49.80-52.31)" in the value's own unit where the quantity states a range; "" where it is exact."""
    low, high, value = getattr(q, "low", None), getattr(q, "high", None), q.value
    if value is None or low is None or high is None or low == high:
        return ""
    if q.unit == "bytes":
        scale, unit = 1.0, value
        for _ in _BYTE_UNITS:
            if abs(unit) < 1024:
                break
            unit, scale = unit / 1024, scale * 1024
        return f"({low / scale:,.2f}-{high / scale:,.2f})"
    if q.unit == "sequences":
        return f"({low:,.2f}-{high:,.2f})"
    return f"({int(low):,}-{int(high):,})"


_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def verdict_line(plan: Plan) -> str:
    """The verdict, and for an unsupported or unknown plan the one thing to know about it."""
    text = f"verdict: {_VERDICT[plan.verdict]}"
    if plan.verdict == "unsupported":
        from apron.plan.planner import unsupported_summary

        return f"{text}: {unsupported_summary(plan)}"
    hint = next((p.message for p in plan.problems if p.kind == "fix" and "--language-model-only" in p.message), None)
    if plan.verdict == "unknown" and hint:
        return f"{text}: the vision tower's profiling peak is not modelled; {hint}"
    return text


def _hardware_line(plan: Plan) -> str:
    if plan.gpu_name == "cpu":
        return f"vLLM {plan.engine_version} on the CPU platform ({format_bytes(plan.total_bytes_per_gpu)} NUMA node)"
    return f"vLLM {plan.engine_version} on {plan.gpu_count} x {plan.gpu_name} ({format_bytes(plan.total_bytes_per_gpu)} each)"


def render_card(plan: Plan) -> str:
    m = plan.model
    revision = f"@{m.revision[:12]}" if m.revision else ""
    kv_size = plan.settings.kv_cache_memory_bytes
    lines = [
        f"{m.repo_id or m.source}{revision}  ({m.architecture}, {m.source_kind}"
        f"{', random weights' if m.has_random_weights else ''})",
        _hardware_line(plan),
        f"settings: max_model_len {plan.settings.max_model_len:,}, dtype {plan.settings.dtype}, "
        + (
            f"KV cache {format_bytes(kv_size)}, "
            if kv_size is not None
            else f"util {plan.settings.gpu_memory_utilization}, "
        )
        + f"max_num_seqs {plan.settings.max_num_seqs}, "
        f"max_num_batched_tokens {plan.settings.max_num_batched_tokens:,}"
        f"{', eager' if plan.settings.enforce_eager else ''}",
        "",
        verdict_line(plan),
        "",
    ]
    titles = dict(QUANTITY_TITLES, weights_bytes_per_gpu="weights") if plan.gpu_name == "cpu" else QUANTITY_TITLES
    width = max(len(t) for t in QUANTITY_TITLES.values())
    shown_names = [*REQUIRED_QUANTITIES, *(extra for extra, _ in EXTRA_ROWS.values() if extra in plan.quantities)]
    ranges = {name: format_range(plan.quantities[name]) for name in shown_names}
    span = max((len(r) for r in ranges.values()), default=0)
    for name in REQUIRED_QUANTITIES:
        q = plan.quantities[name]
        shown = f"  {ranges[name]:<{span}}" if span else ""
        lines.append(f"  {titles[name]:<{width}}  {format_value(q, name):>16}{shown}  [{q.label}]")
        extra, title = EXTRA_ROWS.get(name, ("", ""))
        if extra in plan.quantities:
            q = plan.quantities[extra]
            shown = f"  {format_range(q):<{span}}" if span else ""
            lines.append(f"  {title:<{width}}  {format_value(q, extra):>16}{shown}  [{q.label}]")
    lines += reading_lines(plan)
    if plan.problems:
        lines += ["", "problems:"] + [f"  - [{p.label}] {p.message}" for p in plan.problems]
    if plan.unknowns:
        lines += ["", "unknown:"] + [f"  - {u}" for u in plan.unknowns]
    if plan.notes:
        lines += ["", "notes:"] + [f"  - {n}" for n in plan.notes]
    lines += ["", *command_lines(plan)]
    return "\n".join(lines)


def command_lines(plan: Plan) -> list[str]:
    """The command; a plan that does not fit (or fits only above the low end of its range) shows the
    command as given and, where a fix of its problems fits, the fixed command under it, each saying
    which it is."""
    if plan.fixed is None:
        return ["command:", f"  {plan.command}"]
    given = "fits only above the low end of its range" if plan.verdict == "tight" else "does not fit"
    return [
        f"command as given ({given}):",
        f"  {plan.command}",
        f"fixed command (with {' '.join(plan.fixed.flags)}, the fix above, which fits):",
        f"  {plan.fixed.command}",
    ]


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
