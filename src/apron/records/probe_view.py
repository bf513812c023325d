"""A probe record as a table for people (`apron records show ID`, `apron probe`): the blocks alive at the
profiling peak, largest first, each with the planner buffer it is or "unmatched", and the matched total
against the peak the engine logged (or, where it logs none, the peak the allocator counted)."""

from __future__ import annotations

from apron.records.documents import ProbePhase, ProbeRecord
from apron.records.probe import ProbeBlock

MAX_ROWS = 40


def size_text(num_bytes: int | None) -> str:
    if num_bytes is None:
        return "-"
    if abs(num_bytes) >= 2**30:
        return f"{num_bytes / 2**30:.2f} GiB"
    return f"{num_bytes / 2**20:.2f} MiB"


def render_probe(record_id: str, doc: ProbeRecord) -> str:
    lines = [f"probe {record_id}", f"  boot      {doc.boot_id}", f"  plan      {doc.plan_id}"]
    where = f"{doc.function} on {doc.platform}" if doc.function else "no profiling function ran"
    took = f", {doc.seconds:.1f} s" if doc.seconds is not None else ""
    lines.append(f"  status    {doc.status}: {where}{took}")
    if doc.error:
        lines.append(f"  error     {doc.error}")
    peak = doc.peak
    if peak is not None:
        lines += _summary(doc, peak)
    for phase in sorted(doc.phases, key=lambda p: p is not peak):
        lines += _phase_lines(phase, is_peak=phase is peak)
    lines += _segment_lines(doc)
    if doc.non_torch_growth_bytes is not None:
        lines += ["", f"  non-torch growth  {size_text(doc.non_torch_growth_bytes)} ({doc.non_torch_basis})"]
    for note in doc.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _summary(doc: ProbeRecord, peak: ProbePhase) -> list[str]:
    reference, what = (
        (doc.logged_peak_bytes, "vLLM's logged peak")
        if doc.logged_peak_bytes is not None
        else (doc.peak_bytes, "the probe's peak")
    )
    counter = "allocator" if doc.platform == "cuda" else "profiler"
    share = f" ({peak.matched_bytes / reference:.0%} of {what})" if reference else ""
    predicted = f"{size_text(doc.predicted_peak_bytes)} ({doc.predicted_moment})" if doc.predicted_peak_bytes else "-"
    return [
        f"  peak      {size_text(doc.peak_bytes)} in {peak.name} ({doc.peak_bytes or 0:,} bytes; the {counter}'s "
        f"own counter {doc.allocator_peak_bytes or 0:,})",
        f"  logged    {size_text(doc.logged_peak_bytes)} (vLLM's activation peak line)"
        if doc.logged_peak_bytes is not None
        else "  logged    - (this engine prints no activation peak)",
        f"  predicted {predicted}",
        f"  matched   {size_text(peak.matched_bytes)} to the plan's {peak.moment!r} buffers{share}; "
        f"{size_text((doc.peak_bytes or 0) - peak.matched_bytes)} unmatched",
    ]


def _phase_lines(phase: ProbePhase, is_peak: bool) -> list[str]:
    right = sum(1 for b in phase.predicted if b.status == "right")
    title = "the peak of the run" if is_peak else "the peak of this part"
    lines = [
        "",
        f"  {phase.name}: {title}, {size_text(phase.peak_bytes)}; the plan's {phase.moment!r} moment: {right} of "
        f"{len(phase.predicted)} buffers right, {size_text(phase.matched_bytes)} matched",
    ]
    lines += _block_table(phase.blocks)
    lines += ["    the plan's buffers of that moment:"]
    lines += [f"    {b.num_bytes:>12,}  {_shape(b.shape):<16} {'':<9} {b.name:<40} {b.status}" for b in phase.predicted]
    return lines


def _block_table(blocks: tuple[ProbeBlock, ...]) -> list[str]:
    rows = [f"    {'bytes':>12}  {'shape':<16} {'dtype':<9} {'buffer':<40} allocated by; read by"]
    for block in blocks[:MAX_ROWS]:
        made = " < ".join(([block.op] if block.op else []) + list(block.frames[:2]))
        if block.used_by:
            made += "; " + ", ".join(block.used_by[:2])
        rows.append(
            f"    {block.num_bytes:>12,}  {_shape(block.shape):<16} {block.dtype or '-':<9} "
            f"{block.buffer or 'unmatched':<40} {made[:110]}"
        )
    if len(blocks) > MAX_ROWS:
        rest = blocks[MAX_ROWS:]
        rows.append(f"    {sum(b.num_bytes for b in rest):>12,}  ({len(rest)} smaller blocks)")
    return rows


def _segment_lines(doc: ProbeRecord) -> list[str]:
    if doc.retained_free_bytes is None:
        return []
    lines = [
        "",
        f"  retained  {size_text(doc.retained_free_bytes)} free in segments that hold a live block "
        f"(plan: {size_text(doc.predicted_retained_bytes)})",
    ]
    for segment in doc.segments[:10]:
        held = ", ".join(f"{b.num_bytes:,} B {b.frames[0] if b.frames else ''}".strip() for b in segment.live[:3])
        lines.append(f"    segment {size_text(segment.num_bytes)}, {size_text(segment.free_bytes)} free; holds {held}")
    return lines


def _shape(shape: tuple[int, ...] | None) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]" if shape is not None else "-"
