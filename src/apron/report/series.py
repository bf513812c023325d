"""What each chart plots, worked out from the rows (apron.report.rows) without drawing anything.

Kept apart from the drawing so the numbers behind every mark can be tested, listed in the tables
under the charts and printed with `apron report --json`, and so this module imports no chart library.
"""

from __future__ import annotations

from apron.frozen import frozen
from apron.report.rows import BootRow, PlanRow, Selection

GIB = 2**30


@frozen
class Panel:
    quantity: str
    title: str
    unit: str  # GiB | tokens
    tolerance: float
    is_relative: bool  # the tolerance is a fraction of the measured value, else an absolute amount in `unit`

    @property
    def tolerance_text(self) -> str:
        return f"±{self.tolerance:.0%}" if self.is_relative else f"±{self.tolerance:g} {self.unit}"


# The planner's accuracy targets against real boots (the bounds tests/test_training_boots.py holds
# it to): the band around y = x in chart 1.
PANELS = (
    Panel("weights_bytes_per_gpu", "weights per GPU", "GiB", 0.01, True),
    Panel("activation_peak_bytes", "activation peak", "GiB", 0.15, False),
    Panel("available_kv_bytes", "available KV cache", "GiB", 0.25, False),
    Panel("kv_tokens", "KV cache tokens", "tokens", 0.02, True),
)


@frozen
class ComparePoint:
    record_id: str  # the boot
    plan_id: str
    quantity: str
    predicted: float  # in the panel's unit
    measured: float
    gpu_class: str
    model: str

    @property
    def is_within(self) -> bool:
        panel = next(p for p in PANELS if p.quantity == self.quantity)
        bound = panel.tolerance * abs(self.measured) if panel.is_relative else panel.tolerance
        return abs(self.predicted - self.measured) <= bound


@frozen
class LeftOut:
    record_id: str
    reason: str


def compare_points(selection: Selection) -> tuple[list[ComparePoint], list[LeftOut]]:
    """Chart 1: each boot against the plan it linked to, where the two describe the same hardware."""
    points, left_out = [], []
    for boot in selection.boots:
        if boot.not_comparable or boot.plan is None:
            left_out.append(LeftOut(boot.record_id, boot.not_comparable or "no linked plan"))
            continue
        found = False
        for panel in PANELS:
            predicted, measured = boot.plan.value(panel.quantity), boot.measured.get(panel.quantity)
            if predicted is None or measured is None:
                continue
            scale = GIB if panel.unit == "GiB" else 1
            points.append(
                ComparePoint(
                    boot.record_id,
                    boot.plan.record_id or "",
                    panel.quantity,
                    predicted / scale,
                    measured / scale,
                    boot.gpu_class,
                    boot.model,
                )
            )
            found = True
        if not found:
            left_out.append(LeftOut(boot.record_id, "no quantity both predicted and measured"))
    return points, left_out


# ---- chart 2: where the GPU memory goes ----------------------------------------------------------

SEGMENTS = (  # (name, title)
    ("weights", "weights"),
    ("activation", "activation peak"),
    ("cudagraph", "CUDA graphs"),
    ("non_torch", "non-torch"),
    ("kv", "KV cache"),
    ("reserve", "left by the utilization"),
)
_PLAN_NAMES = {
    "weights": "weights_bytes_per_gpu",
    "activation": "activation_peak_bytes",
    "cudagraph": "cudagraph_bytes",
    "non_torch": "non_torch_bytes",
    "kv": "available_kv_bytes",
}


@frozen
class MemoryBar:
    record_id: str
    label: str  # the bar's tick label
    side: str  # predicted | measured
    gib: dict[str, float]  # segment name -> GiB, only the segments known
    missing: tuple[str, ...]  # segment titles not known (not logged, or unknown to the planner)
    total_gib: float | None
    labels: dict[str, str]  # segment name -> how it is known (derived, predicted, measured ...)


def plan_bar(plan: PlanRow, label: str) -> MemoryBar:
    gib, labels, missing = {}, {}, []
    for name, title in SEGMENTS:
        if name == "reserve":
            requested = plan.value("requested_bytes")
            if requested is not None and plan.total_bytes_per_gpu:
                gib[name], labels[name] = (plan.total_bytes_per_gpu - requested) / GIB, "derived"
            continue
        q = plan.quantities.get(_PLAN_NAMES[name])
        if q is None or q.value is None:
            missing.append(title)
            continue
        gib[name], labels[name] = q.value / GIB, q.label
    total = plan.total_bytes_per_gpu / GIB if plan.total_bytes_per_gpu else None
    return MemoryBar(plan.record_id or "", label, "predicted", gib, tuple(missing), total, labels)


def boot_bar(boot: BootRow, label: str) -> MemoryBar:
    m = boot.measured
    # The graph term vLLM takes from the KV budget is its estimate, when it logs one (0.33.0); the
    # memory the capture took is logged apart (cudagraph_actual_bytes).
    values = {
        "weights": m.get("weights_bytes_per_gpu"),
        "activation": m.get("activation_peak_bytes"),
        "cudagraph": m.get("cudagraph_bytes", m.get("cudagraph_actual_bytes")),
        "non_torch": m.get("non_torch_bytes"),
        "kv": m.get("available_kv_bytes"),
    }
    if m.get("total_memory_bytes") is not None and m.get("requested_bytes") is not None:
        values["reserve"] = m["total_memory_bytes"] - m["requested_bytes"]
    gib = {name: v / GIB for name, v in values.items() if v is not None}
    missing = tuple(title for name, title in SEGMENTS if name not in gib and name != "reserve")
    total = boot.total_bytes / GIB if boot.total_bytes else None
    return MemoryBar(boot.record_id, label, "measured", gib, missing, total, {n: "measured" for n in gib})


def memory_bars(selection: Selection) -> list[MemoryBar]:
    """Chart 2: per boot its plan's bar and its own, side by side; then the plans booted by none."""
    bars = []
    for boot in selection.boots:
        name = f"{short_model(boot.model)} · {boot.record_id[:8]}"
        if boot.plan is not None:
            bars.append(plan_bar(boot.plan, f"{name} planned ({short_gpu(boot.plan.gpu_name)})"))
        bars.append(boot_bar(boot, f"{name} measured ({boot.gpu_class})"))
    for plan in selection.plans:
        bars.append(
            plan_bar(plan, f"{short_model(plan.model)} · {(plan.record_id or '')[:8]} ({short_gpu(plan.gpu_name)})")
        )
    return bars


# ---- chart 3: tokens per GiB of KV by attention layout --------------------------------------------


@frozen
class KvPoint:
    record_id: str
    layout: str
    side: str  # predicted | measured
    tokens_per_gib: float
    model: str

    @property
    def holds_state(self) -> bool:
        """The pool also holds a fixed state per request (Mamba and its kin)."""
        return "mamba" in self.layout


def kv_points(selection: Selection) -> list[KvPoint]:
    """Chart 3: KV tokens over available KV GiB, from each plan and each boot that logged both."""
    points, plans = [], {p.record_id: p for p in selection.plans}
    for boot in selection.boots:
        if boot.plan is not None:
            plans.setdefault(boot.plan.record_id, boot.plan)
        tokens, kv_bytes = boot.measured.get("kv_tokens"), boot.measured.get("available_kv_bytes")
        if tokens and kv_bytes and boot.plan is not None:
            points.append(KvPoint(boot.record_id, boot.plan.layout, "measured", tokens / (kv_bytes / GIB), boot.model))
    for plan in plans.values():
        tokens, kv_bytes = plan.value("kv_tokens"), plan.value("available_kv_bytes")
        if tokens and kv_bytes and kv_bytes > 0:
            points.append(
                KvPoint(plan.record_id or "", plan.layout, "predicted", tokens / (kv_bytes / GIB), plan.model)
            )
    return points


# ---- chart 4: time to first token ----------------------------------------------------------------


@frozen
class LatencyRow:
    record_id: str
    label: str
    p50_seconds: float
    p99_seconds: float
    tokens_per_second_per_user: float | None
    num_requests: int


def latency_rows(selection: Selection) -> list[LatencyRow]:
    rows = []
    for boot in selection.boots:
        s = boot.serving
        if s is None:
            continue
        label = f"{short_model(boot.model)} · {boot.record_id[:8]} ({boot.gpu_class})"
        rows.append(
            LatencyRow(
                boot.record_id,
                label,
                s.ttft_p50_seconds,
                s.ttft_p99_seconds,
                s.output_tokens_per_second_per_user,
                s.num_requests,
            )
        )
    return rows


def p99_sentence(rows: list[LatencyRow]) -> str:
    """What a p99 over so few requests is (vllm bench serve interpolates between the slowest two)."""
    counts = sorted({r.num_requests for r in rows})
    ran = ", ".join(str(c) for c in counts) if counts else "no"
    return (
        "With 50 requests, p99 is the slowest one or two of them, not a tail: read it beside p50. "
        f"These boots ran {ran} requests each"
        + (" (under 100: the same holds)." if counts and counts[-1] < 100 else ".")
    )


def short_model(model: str) -> str:
    return model.rstrip("/").split("/")[-1]


def short_gpu(name: str) -> str:
    return name.replace("NVIDIA ", "").replace("GeForce ", "")
