"""Every number in a plan carries how it is known.

derived           computed from the inputs (headers, config, settings) by arithmetic alone
proven_constraint the pinned engine's source enforces it (a refusal, a limit)
predicted         Apron's model of something the engine measures at start-up
measured          an exact execution observed it (boot records only)
unknown           the layout or term is not modelled; the value is null
"""

from __future__ import annotations

from dataclasses import dataclass

LABELS = ("derived", "proven_constraint", "predicted", "measured", "unknown")
UNITS = ("bytes", "tokens", "sequences", "blocks")


@dataclass(frozen=True)
class Quantity:
    value: int | float | None
    unit: str
    label: str
    basis: str

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"label {self.label!r} is not one of {LABELS}")
        if self.unit not in UNITS:
            raise ValueError(f"unit {self.unit!r} is not one of {UNITS}")
        if self.label == "unknown" and self.value is not None:
            raise ValueError("an unknown quantity has no value")

    @classmethod
    def unknown(cls, unit: str, basis: str) -> Quantity:
        return cls(None, unit, "unknown", basis)

    @property
    def is_known(self) -> bool:
        return self.value is not None

    def to_json(self) -> dict:
        return {"value": self.value, "unit": self.unit, "label": self.label, "basis": self.basis}


def weakest(*labels: str) -> str:
    """The label of a number computed from others: as weak as its weakest input."""
    order = {"measured": 0, "derived": 1, "proven_constraint": 1, "predicted": 2, "unknown": 3}
    return max(labels, key=lambda label: order[label])


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str
    label: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "message": self.message, "label": self.label}
