"""The report's four charts as SVG (apron.report.svg), from the series (apron.report.series).

Every mark carries a <title> naming the record behind it, and the Chart lists the same marks for the
table under the chart. Text stays text, so axis labels and record ids can be searched and copied.
"""

from __future__ import annotations

from apron.frozen import frozen
from apron.report.series import (
    PANELS,
    SEGMENTS,
    ComparePoint,
    KvPoint,
    LatencyRow,
    LeftOut,
    MemoryBar,
    Panel,
    p99_sentence,
)
from apron.report.svg import MUTED, Canvas, Scale, legend, text_width_px, x_axis, y_axis

WIDTH_PX = 1000
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
SEGMENT_COLOURS = {
    "weights": "#4c72b0",
    "activation": "#dd8452",
    "cudagraph": "#937860",
    "non_torch": "#8172b3",
    "kv": "#55a868",
    "reserve": "#d9d9d9",
}
ACCENT = "#2a6f97"
ROW_PX = 22
MEMORY_AXIS = "memory per GPU (GiB); the black tick is the device's total as the engine sees it (PyTorch's, on a GPU)"


@frozen
class Mark:
    record_id: str
    text: str


@frozen
class Chart:
    name: str  # file stem and element id
    title: str
    reading: str  # what to read from it
    svg: str  # an <svg> element
    marks: tuple[Mark, ...]  # the record behind every mark, for the table under the chart
    notes: tuple[str, ...] = ()


def _colours(keys: list[str]) -> dict[str, str]:
    return {key: PALETTE[i % len(PALETTE)] for i, key in enumerate(sorted(set(keys)))}


def _label_column_px(labels: list[str]) -> float:
    return 16 + max((text_width_px(label) for label in labels), default=60)


# ---- 1. predicted vs measured ----------------------------------------------------------------------


def predicted_vs_measured(points: list[ComparePoint], left_out: list[LeftOut]) -> Chart:
    canvas = Canvas(WIDTH_PX, 330, "Predicted vs measured, one panel per quantity")
    colours = _colours([p.gpu_class for p in points])
    marks: list[Mark] = []
    panel_px = WIDTH_PX / len(PANELS)
    for i, panel in enumerate(PANELS):
        mine = [p for p in points if p.quantity == panel.quantity]
        marks += _panel(canvas, panel, mine, colours, i * panel_px + 62, panel_px - 82)
    legend(
        canvas, 62, 16, [("dot", colour, gpu) for gpu, colour in colours.items()] + [("box", "#e3e3e3", "target band")]
    )
    notes = tuple(f"left out: boot {o.record_id[:12]}: {o.reason}" for o in left_out)
    return Chart(
        "predicted-vs-measured",
        "Predicted vs measured",
        "Each dot is a boot: its plan's prediction (the plan it booted, made before the boot) against what "
        "vLLM logged. On the line y = x the plan was exact; inside the grey band it met Apron's accuracy "
        "target. Colour is the GPU class. Boots whose plan describes other hardware are listed under the chart, "
        "not drawn.",
        canvas.to_string(),
        tuple(marks),
        notes,
    )


def _panel(
    canvas: Canvas, panel: Panel, points: list[ComparePoint], colours: dict[str, str], left: float, width: float
) -> list[Mark]:
    top, bottom = 52, 270
    values = [v for p in points for v in (p.predicted, p.measured) if v > 0]
    low, high = (min(values) / 1.6, max(values) * 1.6) if values else (0.01, 100.0)
    xs, ys = Scale(low, high, left, left + width, True), Scale(low, high, bottom, top, True)
    canvas.text(
        left + width / 2, top - 10, f"{panel.title} (band {panel.tolerance_text})", anchor="middle", font_weight="bold"
    )
    x_axis(canvas, xs, bottom, top, f"predicted ({panel.unit})")
    y_axis(canvas, ys, left, left + width, f"measured ({panel.unit})")
    grid = [low * (high / low) ** (i / 40) for i in range(41)]
    upper = [(xs(x), ys(min(_band(panel, x, +1), high))) for x in grid]
    lower = [(xs(x), ys(max(_band(panel, x, -1), low))) for x in reversed(grid)]
    canvas.polygon(upper + lower, "#e3e3e3", opacity="0.8", class_="band")
    canvas.line(xs(low), ys(low), xs(high), ys(high), "#444444", class_="identity")
    if not points:
        canvas.text(left + width / 2, (top + bottom) / 2, "no boot comparable", anchor="middle", fill=MUTED)
        canvas.text(left + width / 2, (top + bottom) / 2 + 15, "with its plan yet", anchor="middle", fill=MUTED)
        return []
    marks = []
    for p in points:
        text = (
            f"boot {p.record_id[:12]} ({p.model}, {p.gpu_class}): predicted {p.predicted:,.3f}, measured "
            f"{p.measured:,.3f} {panel.unit}; plan {p.plan_id[:12]}"
        )
        canvas.circle(xs(p.predicted), ys(p.measured), 4.5, colours[p.gpu_class], "white", text, class_="mark")
        marks.append(Mark(p.record_id, f"{panel.title}: {text}"))
    return marks


def _band(panel: Panel, x: float, sign: int) -> float:
    return x * (1 + sign * panel.tolerance) if panel.is_relative else x + sign * panel.tolerance


# ---- 2. where the GPU memory goes ------------------------------------------------------------------


def memory_stacks(bars: list[MemoryBar], name: str = "memory") -> Chart:
    label_px = _label_column_px([b.label for b in bars])
    top, left, right = 44, label_px, WIDTH_PX - 150
    bottom = top + ROW_PX * max(len(bars), 1) + 6
    canvas = Canvas(WIDTH_PX, bottom + 44, "Where the GPU memory goes, one bar per plan and per boot")
    high = max([b.total_gib or 0 for b in bars] + [sum(b.gib.values()) for b in bars] + [1.0]) * 1.02
    xs = Scale(0, high, left, right)
    x_axis(canvas, xs, bottom, top, MEMORY_AXIS)
    legend(canvas, left, 16, [("box", SEGMENT_COLOURS[s], title) for s, title in SEGMENTS])
    marks = []
    for i, bar in enumerate(bars):
        y, at = top + 4 + i * ROW_PX, 0.0
        canvas.text(left - 8, y + 11, bar.label, anchor="end", class_="bar-label")
        for segment, title in SEGMENTS:
            gib = bar.gib.get(segment)
            if gib is None:
                continue
            text = f"{bar.label}: {title} {gib:,.2f} GiB [{bar.labels.get(segment)}]; record {bar.record_id[:12]}"
            canvas.rect(
                xs(at), y, xs(at + max(gib, 0)) - xs(at), ROW_PX - 6, SEGMENT_COLOURS[segment], text, class_="mark"
            )
            marks.append(Mark(bar.record_id, text))
            at += max(gib, 0)
        if bar.total_gib:
            canvas.line(xs(bar.total_gib), y - 2, xs(bar.total_gib), y + ROW_PX - 4, "#111111", 1.5)
        if bar.missing:
            word = "not logged" if bar.side == "measured" else "unknown"
            canvas.text(xs(at) + 6, y + 11, f"{word}: {', '.join(bar.missing)}", size_px=9, fill=MUTED)
    if not bars:
        canvas.text((left + right) / 2, top + 16, "no plans or boots selected", anchor="middle", fill=MUTED)
    return Chart(
        name,
        "Where the GPU memory goes",
        "One bar per plan and per boot, a boot's plan above its measurement: weights, the profiling run's "
        "activation peak, CUDA graphs, memory outside PyTorch, the KV cache, and the part "
        "gpu_memory_utilization leaves alone. A piece the log does not print is named, never drawn as zero.",
        canvas.to_string(),
        tuple(marks),
    )


# ---- 3. tokens per GiB of KV by attention layout ---------------------------------------------------


def kv_by_layout(points: list[KvPoint]) -> Chart:
    plain = sorted({p.layout for p in points if not p.holds_state})
    state = sorted({p.layout for p in points if p.holds_state})
    layouts = plain + state
    left = _label_column_px(layouts)
    top, right = 44, WIDTH_PX - 30
    bottom = top + 30 * max(len(layouts), 1) + (18 if state and plain else 0)
    canvas = Canvas(WIDTH_PX, bottom + 44, "KV cache tokens per GiB, by attention layout")
    values = [p.tokens_per_gib for p in points] or [1e3, 1e6]
    xs = Scale(min(values) / 2, max(values) * 2, left, right, True)
    x_axis(canvas, xs, bottom, top, "KV cache tokens per GiB of KV memory (at each record's settings)")
    legend(canvas, left, 16, [("ring", ACCENT, "planned"), ("dot", ACCENT, "measured")])

    def row_y(layout: str) -> float:
        index = layouts.index(layout)
        return top + 15 + 30 * index + (18 if layout in state and plain else 0)

    for layout in layouts:
        canvas.text(left - 8, row_y(layout) + 4, layout, anchor="end", class_="bar-label")
    if state and plain:
        y = row_y(state[0]) - 22
        canvas.line(left, y, right, y, "#999999", 1, stroke_dasharray="4 3")
        canvas.text(
            right, y + 12, "below: the pool also holds a fixed state per request", anchor="end", size_px=9, fill=MUTED
        )
    marks = []
    for p in sorted(points, key=lambda p: p.side != "predicted"):
        text = f"{p.side} · {p.model} ({p.layout}): {p.tokens_per_gib:,.0f} tokens per GiB; record {p.record_id[:12]}"
        offset, fill = (-5, "white") if p.side == "predicted" else (5, ACCENT)
        canvas.circle(
            xs(p.tokens_per_gib), row_y(p.layout) + offset, 4.5, fill, ACCENT, text, stroke_width=1.5, class_="mark"
        )
        marks.append(Mark(p.record_id, text))
    if not points:
        canvas.text(
            (left + right) / 2, top + 20, "no record with both KV tokens and KV memory", anchor="middle", fill=MUTED
        )
    return Chart(
        "kv-by-layout",
        "Tokens per GiB of KV cache, by attention layout",
        "How many tokens one GiB of KV memory holds depends on the attention layout, not on model size: GQA "
        "and MLA hold more than full attention, sliding windows more again at long contexts. Hybrids are shown "
        "apart: their pool also holds a fixed state per request. Hollow: planned; filled: measured.",
        canvas.to_string(),
        tuple(marks),
    )


# ---- 4. time to first token ----------------------------------------------------------------------


NO_SERVING_TEST = "no serving test in these records"


def time_to_first_token(rows: list[LatencyRow]) -> Chart:
    if not rows:
        return _no_serving_test()
    left = _label_column_px([r.label for r in rows])
    top, right = 44, WIDTH_PX - 170
    bottom = top + ROW_PX * max(len(rows), 1) + 6
    canvas = Canvas(WIDTH_PX, bottom + 44, "Time to first token, p50 and p99 per boot")
    high = max([r.p99_seconds for r in rows] + [r.p50_seconds for r in rows] + [1e-3]) * 1.1
    xs = Scale(0, high, left, right)
    x_axis(canvas, xs, bottom, top, "time to first token (s)")
    legend(canvas, left, 16, [("dot", ACCENT, "TTFT p50"), ("ring", ACCENT, "TTFT p99")])
    canvas.text(right + 14, top - 4, "decode speed per user", size_px=10, fill=MUTED)
    marks = []
    for i, r in enumerate(rows):
        y = top + 4 + i * ROW_PX + 8
        canvas.text(left - 8, y + 4, r.label, anchor="end", class_="bar-label")
        canvas.line(xs(r.p50_seconds), y, xs(r.p99_seconds), y, "#999999", 2)
        for percentile, value, fill in (("p50", r.p50_seconds, ACCENT), ("p99", r.p99_seconds, "white")):
            text = f"{r.label}: TTFT {percentile} {value:.3f} s over {r.num_requests} requests"
            canvas.circle(xs(value), y, 5, fill, ACCENT, text, stroke_width=1.5, class_="mark")
            marks.append(Mark(r.record_id, text))
        speed = f"{r.tokens_per_second_per_user:,.1f} tokens/s" if r.tokens_per_second_per_user else "-"
        canvas.text(right + 14, y + 4, speed, size_px=10)
    return Chart(
        "time-to-first-token",
        "Time to first token",
        "Per boot, the median (filled) and p99 (hollow) time to first token of vLLM's own serving benchmark, "
        "and each user's decode speed at the right. " + p99_sentence(rows),
        canvas.to_string(),
        tuple(marks),
    )


def _no_serving_test() -> Chart:
    """No axis without a value on it: the chart says there is nothing to draw and how to get it."""
    canvas = Canvas(WIDTH_PX, 90, "Time to first token: no serving test in these records")
    canvas.text(WIDTH_PX / 2, 40, NO_SERVING_TEST, anchor="middle", fill=MUTED)
    canvas.text(
        WIDTH_PX / 2,
        62,
        "apron boot runs vLLM's serving benchmark unless --no-serve-test; apron serve-test runs it on an endpoint",
        anchor="middle",
        size_px=10,
        fill=MUTED,
    )
    return Chart(
        "time-to-first-token",
        "Time to first token",
        f"{NO_SERVING_TEST[0].upper()}{NO_SERVING_TEST[1:]}: no boot among them ran vLLM's serving benchmark.",
        canvas.to_string(),
        (),
    )
