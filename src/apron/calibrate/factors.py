"""`apron calibrate`: fit the planner's observed terms to the user's own boots, honestly.

Only the components a plan labels observed are fitted (plan/calibration.py is_observed): per quantity
(non-torch, CUDA graphs) one factor on the sum of its observed components, least squares over the boots
of one release on one GPU class: measured ~ derived part + factor x observed part. Each boot's
prediction is the plan record it links to (made before the boot, or for an imported boot when it was
imported). The report is the leave-one-out error of every quantity the factors move (non-torch, graphs,
and the KV budget they are subtracted from), before and after: each boot predicted by factors fitted on
the other boots only. A factor is kept only where it lowers the leave-one-out error of its own quantity;
one that would raise it is reported and dropped. A group of fewer than MIN_BOOTS boots is reported and
fits nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from apron.errors import Failed
from apron.frozen import field, frozen
from apron.plan.calibration import TERMS, Calibration, GroupCalibration, LooError, is_observed
from apron.plan.result import Plan
from apron.records.documents import BootRecord, PlanRecord
from apron.records.store import RecordStore

MIN_BOOTS = 3
# A plan whose weights miss the boot's by more than this does not describe that boot (another dtype or
# quantization than the published flags say): its residuals are not the observed terms' to absorb. The
# planner's known weight misses are under 4% (docs/memory.md section 5); a dtype mix-up is 50-100%.
MAX_WEIGHTS_MISS = 0.10
QUANTITIES = ("non_torch_bytes", "cudagraph_bytes", "available_kv_bytes")


@frozen
class Sample:
    """One boot beside its plan: the plan's value and observed part of each term, and what was measured."""

    boot_id: str
    model: str
    engine: str
    gpu: str
    predicted: dict[str, float]
    observed: dict[str, float]  # term -> the plan's observed components, summed
    components: dict[str, tuple[str, ...]]  # term -> their names
    measured: dict[str, float]


@frozen
class GroupReport:
    engine: str
    gpu: str
    samples: tuple[Sample, ...]
    calibration: GroupCalibration | None
    reason: str = ""  # why nothing was fitted
    dropped: tuple[str, ...] = ()  # factors fitted but not kept, and why

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"engine": self.engine, "gpu": self.gpu, "num_boots": len(self.samples)}
        out["dropped"] = list(self.dropped)
        if self.calibration is None:
            return out | {"fitted": False, "reason": self.reason}
        return out | {"fitted": True, **self.calibration.to_json()}


@frozen
class CalibrationRun:
    groups: tuple[GroupReport, ...]
    skipped_boots: tuple[tuple[str, str], ...] = field(default=())  # (boot id, why it is not a sample)

    @property
    def calibration(self) -> Calibration:
        fitted = tuple(g.calibration for g in self.groups if g.calibration is not None)
        skipped = tuple(
            {"engine": g.engine, "gpu": g.gpu, "num_boots": len(g.samples), "reason": g.reason}
            for g in self.groups
            if g.calibration is None
        )
        return Calibration(fitted, skipped)

    def to_json(self) -> dict[str, Any]:
        return {
            "groups": [g.to_json() for g in self.groups],
            "skipped_boots": [{"id": rid, "reason": why} for rid, why in self.skipped_boots],
        }


def calibrate(store: RecordStore, engine: str | None = None, gpu: str | None = None) -> CalibrationRun:
    boots = store.find(BootRecord)
    if not boots:
        raise Failed(
            f"no boot records in {store.root}: import published boots with `apron records import FILE`, "
            "or boot a plan with `apron boot`"
        )
    samples, skipped = [], []
    for stored in boots:
        sample, why = _sample(store, stored.id, stored.document)
        if sample is None:
            skipped.append((stored.id, why))
        elif (engine is None or sample.engine == engine) and (gpu is None or sample.gpu == gpu):
            samples.append(sample)
    groups: dict[tuple[str, str], list[Sample]] = {}
    for sample in samples:
        groups.setdefault((sample.engine, sample.gpu), []).append(sample)
    reports = tuple(_group(key, tuple(members)) for key, members in sorted(groups.items()))
    return CalibrationRun(reports, tuple(skipped))


def _sample(store: RecordStore, boot_id: str, boot: BootRecord) -> tuple[Sample | None, str]:
    if boot.outcome != "healthy":
        return None, f"a boot that is {boot.outcome}"
    if not boot.hardware.gpu_name:
        return None, "not a GPU boot"
    try:
        plan = store.get_as(boot.plan_id, PlanRecord).document.plan
    except Exception as exc:  # noqa: BLE001 - a missing or unread plan leaves this boot out, said why
        return None, f"its plan {boot.plan_id[:12]} cannot be read ({exc})"
    gpu = gpu_class(boot.hardware.gpu_name)
    if plan.gpu_name != gpu or plan.engine_version != boot.engine.version:
        return None, f"planned for vllm {plan.engine_version} on {plan.gpu_name}, booted on {boot.engine.version} {gpu}"
    measured = {q: float(boot.measured[q].value) for q in QUANTITIES if q in boot.measured}
    if not measured:
        return None, "no measured non-torch, graph or KV figure"
    miss = _weights_miss(plan, boot)
    if miss is not None and abs(miss) > MAX_WEIGHTS_MISS:
        return None, f"its plan's weights miss the measured ones by {miss:+.0%}: the plan does not describe this boot"
    observed, names = _observed(plan)
    values = {q: plan.quantities[q].value for q in QUANTITIES}
    predicted = {q: float(v) for q, v in values.items() if v is not None}
    model = plan.model.repo_id or plan.model.source
    return Sample(boot_id, model, boot.engine.version or "?", gpu, predicted, observed, names, measured), ""


def _weights_miss(plan: Plan, boot: BootRecord) -> float | None:
    predicted, measured = plan.quantities["weights_bytes_per_gpu"].value, boot.measured.get("weights_bytes_per_gpu")
    if predicted is None or measured is None or not measured.value:
        return None
    return float(predicted) / float(measured.value) - 1


def gpu_class(name: str) -> str:
    """The catalog's name for a GPU (aliases and spellings folded), else the name as given."""
    from apron.errors import BadInput
    from apron.hardware import resolve_gpu

    try:
        return resolve_gpu(name).name
    except BadInput:
        return name


def _observed(plan: Plan) -> tuple[dict[str, float], dict[str, tuple[str, ...]]]:
    sums, names = {}, {}
    for quantity, term in TERMS.items():
        parts = [c for c in plan.details.get(term) or () if is_observed(c)]
        sums[quantity] = float(sum(c["num_bytes"] for c in parts))
        names[quantity] = tuple(c["name"] for c in parts)
    return sums, names


# -- fitting ---------------------------------------------------------------------------------------------------


def fit_factor(samples: Sequence[Sample], quantity: str) -> float | None:
    """Least squares of measured - derived = factor x observed; None when it cannot be fitted or is not a
    positive number (the residual then is not the observed term's to absorb)."""
    pairs = [
        (s.observed[quantity], s.measured[quantity] - (s.predicted[quantity] - s.observed[quantity]))
        for s in samples
        if quantity in s.measured and quantity in s.predicted and s.observed.get(quantity)
    ]
    denominator = sum(o * o for o, _ in pairs)
    if not pairs or denominator == 0:
        return None
    factor = sum(o * r for o, r in pairs) / denominator
    return factor if math.isfinite(factor) and factor > 0 else None


def fit_factors(samples: Sequence[Sample], terms: Sequence[str] = tuple(TERMS)) -> dict[str, float]:
    factors = {q: fit_factor(samples, q) for q in terms}
    return {q: f for q, f in factors.items() if f is not None}


def predicted_with(sample: Sample, quantity: str, factors: dict[str, float]) -> float:
    """The sample's prediction of QUANTITY with the observed parts scaled by FACTORS."""
    delta = {q: (factors.get(q, 1.0) - 1.0) * sample.observed.get(q, 0.0) for q in TERMS}
    if quantity == "available_kv_bytes":
        return sample.predicted[quantity] - sum(delta.values())
    return sample.predicted[quantity] + delta.get(quantity, 0.0)


def leave_one_out(samples: Sequence[Sample], quantity: str, terms: Sequence[str] = tuple(TERMS)) -> LooError | None:
    """Each boot predicted with factors (on TERMS) fitted on the other boots only, against its measurement."""
    usable = [s for s in samples if quantity in s.measured and quantity in s.predicted]
    if len(usable) < MIN_BOOTS:
        return None
    before, after = [], []
    for i, sample in enumerate(samples):
        if sample not in usable:
            continue
        others = [s for j, s in enumerate(samples) if j != i]
        measured = sample.measured[quantity]
        before.append(abs(sample.predicted[quantity] - measured))
        after.append(abs(predicted_with(sample, quantity, fit_factors(others, terms)) - measured))
    return LooError(sum(before) / len(before), sum(after) / len(after), len(before), max(before), max(after))


def _group(key: tuple[str, str], samples: tuple[Sample, ...]) -> GroupReport:
    engine, gpu = key
    if len(samples) < MIN_BOOTS:
        reason = f"{len(samples)} boot{'s' if len(samples) != 1 else ''}: fewer than {MIN_BOOTS}, nothing fitted"
        return GroupReport(engine, gpu, samples, None, reason)
    fitted = fit_factors(samples)
    dropped = []
    for quantity in list(fitted):
        error = leave_one_out(samples, quantity, (quantity,))
        if error is None or error.after >= error.before:
            dropped.append((quantity, fitted.pop(quantity), error))
    notes = tuple(_dropped_note(q, f, e) for q, f, e in dropped)
    if not fitted:
        why = "; ".join(notes) or "no observed term could be fitted (no positive factor)"
        return GroupReport(engine, gpu, samples, None, why, notes)
    errors = {q: e for q in QUANTITIES if (e := leave_one_out(samples, q, tuple(fitted))) is not None}
    names = {q: samples[0].components[q] for q in fitted}
    group = GroupCalibration(engine, gpu, len(samples), fitted, names, errors)
    return GroupReport(engine, gpu, samples, group, "", notes)


def _dropped_note(quantity: str, factor: float, error: LooError | None) -> str:
    if error is None:
        return f"factor {factor:.3f} on {quantity} not kept: too few boots measure it"
    return (
        f"factor {factor:.3f} on {quantity} not kept: its leave-one-out error would go from "
        f"{error.before / 2**30:.3f} to {error.after / 2**30:.3f} GiB"
    )


# -- the table --------------------------------------------------------------------------------------------------


def render(run: CalibrationRun) -> str:
    lines = []
    for group in run.groups:
        lines.append(f"vllm {group.engine} on {group.gpu}: {len(group.samples)} boots")
        if group.calibration is None:
            lines.append(f"  {group.reason}")
            continue
        cal = group.calibration
        for quantity, factor in cal.factors.items():
            lines.append(f"  factor {factor:.3f} on {quantity} ({', '.join(cal.components[quantity])})")
        lines += [f"  {note}" for note in group.dropped]
        lines.append(
            f"  {'leave-one-out |error|, GiB':<28} {'boots':>5} {'mean before':>12} {'mean after':>11} "
            f"{'max before':>11} {'max after':>10}"
        )
        for quantity, e in cal.loo_error_bytes.items():
            lines.append(
                f"  {quantity:<28} {e.num_boots:>5} {e.before / 2**30:>12.3f} {e.after / 2**30:>11.3f} "
                f"{e.max_before / 2**30:>11.3f} {e.max_after / 2**30:>10.3f}"
            )
    for boot_id, why in run.skipped_boots:
        lines.append(f"left out {boot_id[:12]}: {why}")
    return "\n".join(lines)
