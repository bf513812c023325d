"""A calibration (`apron calibrate`, `apron plan --calibration FILE`): factors on the planner's observed terms.

Some terms of the KV budget rest on an observation rather than on the engine's source; their components
say "observed" in their basis (plan/overheads.py: the non-torch base, the CUDA-graph slope). A
calibration, fitted by calibrate/factors.py from the user's own boots of one release on one GPU class,
scales exactly those components by one factor per quantity. It is never applied by default; a plan made
with one keeps the label "predicted" and says in the component's basis how many boots it rests on and its
leave-one-out error. A calibration for another release or GPU class is refused, never stretched.

File format `apron.calibration/1`:
    {"schema": "apron.calibration/1",
     "groups": [{"engine": "0.29.0", "gpu": "NVIDIA GeForce RTX 4090", "num_boots": 14,
                 "factors": {"non_torch_bytes": 1.2, "cudagraph_bytes": 0.97},
                 "components": {"non_torch_bytes": ["kernels, handles, small buffers"], ...},
                 "loo_error_bytes": {"non_torch_bytes": {"before": 31e6, "after": 12e6, "num_boots": 14}, ...}}],
     "skipped": [{"engine": ..., "gpu": ..., "num_boots": 2, "reason": ...}]}
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from apron.errors import BadInput
from apron.frozen import field, frozen, replace

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

SCHEMA = "apron.calibration/1"
GIB = 2**30
# The planner's terms whose observed components a calibration may scale, and where their components live
# in a plan's details.
TERMS = {"non_torch_bytes": "non_torch", "cudagraph_bytes": "cudagraphs"}
# Components whose basis says observed but that are not a number to scale: the retained segments are a
# replay whose observed input is which cached block a workspace lands in (plan/retained.py lands_in_copy).
NOT_SCALED = {
    "retained allocator segments": "its observed input is a choice between two replays (where a workspace "
    "lands), not a number; the allocator probe settles it"
}


def is_observed(component: dict[str, Any]) -> bool:
    """A component the planner labels observed, and that a factor can scale."""
    return "observed" in str(component.get("basis", "")) and component.get("name") not in NOT_SCALED


@frozen
class LooError:
    before: float  # mean |predicted - measured| over the group's boots, each predicted without calibration
    after: float  # the same, each predicted with a factor fitted on the other boots only
    num_boots: int
    max_before: float = 0.0
    max_after: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "before": round(self.before),
            "after": round(self.after),
            "num_boots": self.num_boots,
            "max_before": round(self.max_before),
            "max_after": round(self.max_after),
        }


@frozen
class GroupCalibration:
    engine: str
    gpu: str
    num_boots: int
    factors: dict[str, float]  # quantity -> factor on its observed components
    components: dict[str, tuple[str, ...]]  # quantity -> the component names the factor scales
    loo_error_bytes: dict[str, LooError] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "gpu": self.gpu,
            "num_boots": self.num_boots,
            "factors": {q: round(f, 6) for q, f in self.factors.items()},
            "components": {q: list(names) for q, names in self.components.items()},
            "loo_error_bytes": {q: e.to_json() for q, e in self.loo_error_bytes.items()},
        }

    def basis(self, quantity: str) -> str:
        error = self.loo_error_bytes.get(quantity)
        text = f"leave-one-out error {error.after / GIB:.3f} GiB" if error else "no leave-one-out error"
        return f"calibrated on {self.num_boots} boots ({text}; factor {self.factors[quantity]:.3f})"


@frozen
class Calibration:
    groups: tuple[GroupCalibration, ...]
    skipped: tuple[dict[str, Any], ...] = ()
    source: str = ""  # the file it was read from

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "groups": [g.to_json() for g in self.groups], "skipped": list(self.skipped)}

    def for_plan(self, engine: str, gpu: str) -> GroupCalibration:
        """The group made for this release and GPU class; BadInput naming what the file holds otherwise."""
        for group in self.groups:
            if group.engine == engine and group.gpu == gpu:
                return group
        held = "; ".join(f"vllm {g.engine} on {g.gpu}" for g in self.groups) or "no fitted group"
        raise BadInput(
            f"--calibration {self.source}: made for {held}, not for vllm {engine} on {gpu}; "
            f"run `apron calibrate --engine vllm=={engine} --gpu '{gpu}'` on boots of this release and GPU"
        )


def scale_components(components: tuple[Any, ...], quantity: str, group: GroupCalibration) -> tuple[Any, ...]:
    """The term's components with the observed ones scaled by the group's factor (label unchanged)."""
    factor = group.factors.get(quantity)
    if factor is None:
        return components
    names = set(group.components.get(quantity, ()))
    out = []
    for c in components:
        if c.name in names and is_observed({"name": c.name, "basis": c.basis}):
            c = replace(
                c,
                num_bytes=int(round(c.num_bytes * factor)),
                low_bytes=int(round(c.low * factor)),
                high_bytes=int(round(c.high * factor)),
                basis=f"{c.basis}; {group.basis(quantity)}",
            )
        out.append(c)
    return tuple(out)


def read_calibration(path: str | Path) -> Calibration:
    """A calibration file, checked: BadInput (exit 2) naming the file and what is wrong."""
    name = str(path)
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"--calibration {name}: not a readable JSON file ({exc})") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        schema = document.get("schema") if isinstance(document, dict) else type(document).__name__
        raise BadInput(f"--calibration {name}: schema {schema!r}, not {SCHEMA}; make one with `apron calibrate --out`")
    try:
        groups = tuple(_group(g, name) for g in document.get("groups") or ())
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"--calibration {name}: a damaged group ({exc}); make it again with `apron calibrate`") from None
    return Calibration(groups, tuple(document.get("skipped") or ()), name)


def _group(raw: dict[str, Any], name: str) -> GroupCalibration:
    factors = {str(q): float(f) for q, f in dict(raw["factors"]).items()}
    for quantity, factor in factors.items():
        if quantity not in TERMS:
            raise BadInput(
                f"--calibration {name}: {quantity!r} is not a term a calibration scales ({', '.join(TERMS)})"
            )
        if not math.isfinite(factor) or factor <= 0:
            raise BadInput(f"--calibration {name}: factor {factor!r} for {quantity} is not a positive finite number")
    errors = {
        str(q): LooError(
            float(e["before"]),
            float(e["after"]),
            int(e["num_boots"]),
            float(e.get("max_before", 0)),
            float(e.get("max_after", 0)),
        )
        for q, e in dict(raw.get("loo_error_bytes") or {}).items()
    }
    if any(not (math.isfinite(e.before) and math.isfinite(e.after)) for e in errors.values()):
        raise BadInput(f"--calibration {name}: a leave-one-out error is not a finite number")
    return GroupCalibration(
        engine=str(raw["engine"]),
        gpu=str(raw["gpu"]),
        num_boots=int(raw["num_boots"]),
        factors=factors,
        components={str(q): tuple(str(n) for n in names) for q, names in dict(raw["components"]).items()},
        loo_error_bytes=errors,
    )
