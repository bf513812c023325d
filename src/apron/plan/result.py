"""The plan value and its `apron.plan/1` JSON form (brief: "The apron plan --json contract")."""

from __future__ import annotations

from dataclasses import dataclass, field

from apron.plan.quantity import Problem, Quantity

SCHEMA = "apron.plan/1"
VERDICTS = ("fits", "does_not_fit", "unknown")
# The quantities every plan carries, in display order.
REQUIRED_QUANTITIES = (
    "weights_bytes_per_gpu",
    "activation_peak_bytes",
    "cudagraph_bytes",
    "non_torch_bytes",
    "requested_bytes",
    "available_kv_bytes",
    "kv_bytes_per_token",
    "kv_block_bytes",
    "num_kv_blocks",
    "kv_tokens",
    "max_concurrency",
    "host_ram_bytes",
)


@dataclass(frozen=True)
class ModelIdentity:
    source: str
    repo_id: str | None
    revision: str | None
    architecture: str
    model_type: str
    source_kind: str = "local"


@dataclass(frozen=True)
class Plan:
    model: ModelIdentity
    engine_version: str
    gpu_name: str
    gpu_count: int
    total_bytes_per_gpu: int
    settings: dict
    verdict: str
    quantities: dict[str, Quantity]
    flags: tuple[str, ...]
    command: str
    problems: tuple[Problem, ...]
    unknowns: tuple[str, ...]
    notes: tuple[str, ...] = ()
    details: dict = field(default_factory=dict, compare=False)  # --explain material, extra JSON fields
    compute_capability: str | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r}")
        missing = [n for n in REQUIRED_QUANTITIES if n not in self.quantities]
        if missing:
            raise ValueError(f"plan lacks quantities {missing}")

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "model": {
                "source": self.model.source,
                "repo_id": self.model.repo_id,
                "revision": self.model.revision,
                "architecture": self.model.architecture,
                "model_type": self.model.model_type,
                "source_kind": self.model.source_kind,
            },
            "engine": {"name": "vllm", "version": self.engine_version},
            "hardware": {
                "gpu": self.gpu_name,
                "count": self.gpu_count,
                "total_bytes_per_gpu": self.total_bytes_per_gpu,
                "compute_capability": self.compute_capability,
            },
            "settings": self.settings,
            "verdict": self.verdict,
            "quantities": {name: q.to_json() for name, q in self.quantities.items()},
            "flags": list(self.flags),
            "command": self.command,
            "problems": [p.to_json() for p in self.problems],
            "unknowns": list(self.unknowns),
            "notes": list(self.notes),
            "details": self.details,
        }
