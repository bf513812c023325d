"""Every number in a plan carries how it is known.

derived           computed from the inputs (headers, config, settings) by arithmetic alone
proven_constraint the pinned engine's source enforces it (a refusal, a limit)
predicted         Apron's model of something the engine measures at start-up
measured          an exact execution observed it (boot records only)
unknown           the layout or term is not modelled; the value is null
"""

from __future__ import annotations

from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Any, Literal, TypeVar, get_args

    T = TypeVar("T", bound=str)
else:
    from apron.lite_typing import Literal, get_args


Label = Literal["derived", "proven_constraint", "predicted", "measured", "unknown"]
Unit = Literal["bytes", "tokens", "sequences", "blocks"]
# Every kind of problem a plan can carry; a new kind is added here first.
ProblemKind = Literal[
    "architecture_not_supported",
    "quantization_capability",
    "engine_changed",
    "dtype",
    "max_model_len",
    "scheduler",
    "tensor_parallel_heads",
    "tensor_parallel_vocab",
    "tensor_parallel_intermediate",
    # plan/parallel.py: the other checks a parallel layout must pass
    "tensor_parallel_kv_heads",
    "tensor_parallel_linear_attention",
    "tensor_parallel_quant_block",
    "tensor_parallel_vision",
    "pipeline_parallel",
    "expert_parallel",
    "weights_exceed_request",
    "no_kv_memory",
    "kv_cache_too_small",
    "fix",
    "tight",
    "max_num_seqs_exceeds_state_blocks",
    "reasoning_parser_missing",
    "tool_parser_missing",
    # the KV layout's kernels refuse the configuration (plan/kv/families: Refusal kinds)
    "block_size",
    "compute_capability",
    "kv_cache_dtype",
    "host_ram_exceeded",
    "unrecognized_argument",
]
LABELS: tuple[Label, ...] = get_args(Label)
UNITS: tuple[Unit, ...] = get_args(Unit)
PROBLEM_KINDS: tuple[ProblemKind, ...] = get_args(ProblemKind)


def one_of(value: object, allowed: tuple[T, ...], what: str) -> T:
    """VALUE as one of the Literal's values (ValueError naming WHAT otherwise)."""
    for option in allowed:
        if value == option:
            return option
    raise ValueError(f"{what} {value!r} is not one of {allowed}")


@frozen
class Quantity:
    """A plan's number. `low` and `high` are the stated range (docs/memory.md section 7): equal to
    `value` where the number is exact (derived from the inputs, or a constraint), wider where a
    component rests on an observation; None with the value."""

    value: int | float | None
    unit: Unit
    label: Label
    basis: str
    low: int | float | None = None
    high: int | float | None = None

    def __post_init__(self) -> None:
        one_of(self.label, LABELS, "label")
        one_of(self.unit, UNITS, "unit")
        if self.label == "unknown" and self.value is not None:
            raise ValueError("an unknown quantity has no value")
        if self.value is None:
            if self.low is not None or self.high is not None:
                raise ValueError("a quantity without a value has no range")
            return
        if self.low is None:
            object.__setattr__(self, "low", self.value)
        if self.high is None:
            object.__setattr__(self, "high", self.value)
        if not self.low <= self.value <= self.high:  # type: ignore[operator]
            raise ValueError(f"range {self.low}-{self.high} does not hold the value {self.value}")

    @classmethod
    def unknown(cls, unit: Unit, basis: str) -> Quantity:
        return cls(None, unit, "unknown", basis)

    @property
    def has_range(self) -> bool:
        return self.value is not None and (self.low != self.value or self.high != self.value)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "unit": self.unit,
            "label": self.label,
            "basis": self.basis,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Quantity:
        """Documents written before the range existed have no `low`/`high`: the value stands for both."""
        unit, label = one_of(document["unit"], UNITS, "unit"), one_of(document["label"], LABELS, "label")
        return cls(document["value"], unit, label, str(document["basis"]), document.get("low"), document.get("high"))


@frozen
class Problem:
    kind: ProblemKind
    message: str
    label: Label

    def __post_init__(self) -> None:
        one_of(self.kind, PROBLEM_KINDS, "problem kind (add a new one to ProblemKind in apron.plan.quantity)")
        one_of(self.label, LABELS, "label")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "label": self.label}

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Problem:
        kind = one_of(document["kind"], PROBLEM_KINDS, "problem kind")
        return cls(kind, str(document["message"]), one_of(document["label"], LABELS, "label"))
