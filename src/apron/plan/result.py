"""The plan value and its `apron.plan/1` JSON form (README, "What a plan says").

Every stage after the planner (boot, records, rules, reports) takes a `Plan`, never the dict: a saved
plan is read back with `Plan.from_json`, and `to_json` writes the document `apron plan --json` prints.
The contract changes only by adding fields; a document saved before a field existed reads with the
field's default.
"""

from __future__ import annotations

from apron.checkpoint.model import SOURCE_KINDS, SourceKind
from apron.errors import BadInput
from apron.frozen import field, frozen
from apron.plan.quantity import Problem, Quantity, one_of

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Any, Literal, get_args
else:
    from apron.lite_typing import Literal, get_args

SCHEMA = "apron.plan/1"
# unsupported: the release does not register the architecture (or refuses its quantization on this GPU)
Verdict = Literal["fits", "tight", "does_not_fit", "unsupported", "unknown"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
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


@frozen
class ModelIdentity:
    source: str
    repo_id: str | None
    revision: str | None
    architecture: str
    model_type: str
    source_kind: SourceKind = "local"
    # The release registers the architecture as multimodal (or, where its registry cannot say, the
    # config carries a vision or audio tower): the checks send it an image.
    is_multimodal: bool = False
    # The checkpoint's weights are random (`apron example tiny`): it boots and serves, but its answers
    # mean nothing, so the boot does not check them. In the document only when true.
    has_random_weights: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {
            "source": self.source,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "architecture": self.architecture,
            "model_type": self.model_type,
            "source_kind": self.source_kind,
            "is_multimodal": self.is_multimodal,
        }
        return {**out, "has_random_weights": True} if self.has_random_weights else out

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> ModelIdentity:
        return cls(
            document["source"],
            document.get("repo_id"),
            document.get("revision"),
            document["architecture"],
            document["model_type"],
            one_of(document.get("source_kind", "local"), SOURCE_KINDS, "source_kind"),
            bool(document.get("is_multimodal", False)),
            bool(document.get("has_random_weights", False)),
        )


@frozen
class FixedCommand:
    """The command with a fix applied: `flags` are the settings the fix line names."""

    flags: tuple[str, ...]
    command: str

    def to_json(self) -> dict[str, Any]:
        return {"flags": list(self.flags), "command": self.command}

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> FixedCommand:
        return cls(tuple(str(f) for f in document["flags"]), str(document["command"]))


@frozen
class PlanSettings:
    """The engine settings the plan was made for, as the engine will run them (defaults resolved)."""

    tensor_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    dtype: str
    enforce_eager: bool
    language_model_only: bool = False
    # --limit-mm-per-prompt as (modality, count) pairs; unlisted modalities keep vLLM's default
    limit_mm_per_prompt: tuple[tuple[str, int], ...] = ()
    mm_encoder_tp_mode: str = "weights"
    cudagraph_capture_sizes: tuple[int, ...] = ()
    extra_flags: tuple[str, ...] = ()  # `vllm serve` arguments with no field of their own
    env: tuple[tuple[str, str], ...] = ()  # the engine's environment, in the document's order
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory-bytes, when the plan sets the KV size

    def to_json(self) -> dict[str, Any]:
        return {
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "kv_cache_dtype": self.kv_cache_dtype,
            "dtype": self.dtype,
            "enforce_eager": self.enforce_eager,
            "language_model_only": self.language_model_only,
            "limit_mm_per_prompt": dict(self.limit_mm_per_prompt),
            "mm_encoder_tp_mode": self.mm_encoder_tp_mode,
            "cudagraph_capture_sizes": list(self.cudagraph_capture_sizes),
            "extra_flags": list(self.extra_flags),
            "env": dict(self.env),
            "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> PlanSettings:
        unknown = set(document) - set(cls.__dataclass_fields__)
        if unknown:  # a setting the document has and the type lacks would be lost on the way back
            raise ValueError(f"settings {sorted(unknown)} are not fields of PlanSettings (apron.plan.result)")
        return cls(
            tensor_parallel_size=int(document["tensor_parallel_size"]),
            max_model_len=document["max_model_len"],
            gpu_memory_utilization=document["gpu_memory_utilization"],
            max_num_seqs=document["max_num_seqs"],
            max_num_batched_tokens=document["max_num_batched_tokens"],
            kv_cache_dtype=document["kv_cache_dtype"],
            dtype=document["dtype"],
            enforce_eager=bool(document["enforce_eager"]),
            language_model_only=bool(document.get("language_model_only", False)),
            limit_mm_per_prompt=tuple((str(k), int(v)) for k, v in (document.get("limit_mm_per_prompt") or {}).items()),
            mm_encoder_tp_mode=str(document.get("mm_encoder_tp_mode") or "weights"),
            cudagraph_capture_sizes=tuple(document.get("cudagraph_capture_sizes") or ()),
            extra_flags=tuple(document.get("extra_flags") or ()),
            env=tuple((str(k), str(v)) for k, v in (document.get("env") or {}).items()),
            kv_cache_memory_bytes=document.get("kv_cache_memory_bytes"),
        )


@frozen
class Plan:
    model: ModelIdentity
    engine_version: str
    gpu_name: str
    gpu_count: int
    total_bytes_per_gpu: int
    settings: PlanSettings
    verdict: Verdict
    quantities: dict[str, Quantity]
    flags: tuple[str, ...]
    command: str
    problems: tuple[Problem, ...]
    unknowns: tuple[str, ...]
    notes: tuple[str, ...] = ()
    # --explain material and the shapes rules read (free-form: it grows with the calculator)
    details: dict[str, Any] = field(default_factory=dict, compare=False)
    compute_capability: str | None = None
    # A plan that does not fit, with the first fix of its problems that does: the flags the fix sets
    # and the whole command with them (`command` stays the command as given).
    fixed: FixedCommand | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r}")
        missing = [n for n in REQUIRED_QUANTITIES if n not in self.quantities]
        if missing:
            raise ValueError(f"plan lacks quantities {missing}")

    # -- what later stages ask of a plan ---------------------------------------------------------
    @property
    def sends_images(self) -> bool:
        """The served model takes images (a multimodal model not cut to its language model)."""
        limits = dict(self.settings.limit_mm_per_prompt)
        return self.model.is_multimodal and not self.settings.language_model_only and limits.get("image") != 0

    @property
    def served_model_name(self) -> str:
        """The name `vllm serve` gives the model by default: the repo id, else the folder name."""
        if self.model.repo_id:
            return self.model.repo_id
        from pathlib import PurePath  # a folder's plan only: pathlib's import is ~5 ms of a plan's start

        return PurePath(self.model.source).name

    def flag_value(self, option: str) -> str | None:
        """`--reasoning-parser qwen3` among the flags -> "qwen3" (None when the option is absent)."""
        for flag in self.flags:
            words = flag.split()
            if option in words and words.index(option) + 1 < len(words):
                return words[words.index(option) + 1]
        return None

    def has_problem(self, *kinds: str) -> bool:
        return any(p.kind in kinds for p in self.problems)

    def quantity_value(self, name: str) -> int | float | None:
        quantity = self.quantities.get(name)
        return quantity.value if quantity is not None else None

    @property
    def model_shape(self) -> dict[str, Any]:
        """Heads and vocabulary, for rules that pick a tensor-parallel size the engine accepts."""
        shape = self.details.get("model_shape")
        return shape if isinstance(shape, dict) else {}

    @property
    def checkpoint_bytes(self) -> int | None:
        weights = self.details.get("weights")
        value = weights.get("checkpoint_bytes") if isinstance(weights, dict) else None
        return value if isinstance(value, int) else None

    # -- the document ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "model": self.model.to_json(),
            "engine": {"name": "vllm", "version": self.engine_version},
            "hardware": {
                "gpu": self.gpu_name,
                "count": self.gpu_count,
                "total_bytes_per_gpu": self.total_bytes_per_gpu,
                "compute_capability": self.compute_capability,
            },
            "settings": self.settings.to_json(),
            "verdict": self.verdict,
            "quantities": {name: q.to_json() for name, q in self.quantities.items()},
            "flags": list(self.flags),
            "command": self.command,
            "problems": [p.to_json() for p in self.problems],
            "unknowns": list(self.unknowns),
            "notes": list(self.notes),
            "fixed_command": self.fixed.to_json() if self.fixed else None,
            "details": self.details,
        }

    @classmethod
    def from_json(cls, document: object, where: str = "the plan") -> Plan:
        """The plan of an `apron.plan/1` document; BadInput naming WHERE when it is not one."""
        if not isinstance(document, dict) or document.get("schema") != SCHEMA:
            raise BadInput(f"{where} is not an {SCHEMA} document; write one with `apron plan ... --json > plan.json`")
        try:
            return cls._from_document(document)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BadInput(f"{where}: a damaged {SCHEMA} document ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _from_document(cls, document: dict[str, Any]) -> Plan:
        hardware = document["hardware"]
        return cls(
            model=ModelIdentity.from_json(document["model"]),
            engine_version=str(document["engine"]["version"]),
            gpu_name=hardware["gpu"],
            gpu_count=int(hardware["count"]),
            total_bytes_per_gpu=int(hardware["total_bytes_per_gpu"]),
            settings=PlanSettings.from_json(document["settings"]),
            verdict=one_of(document["verdict"], VERDICTS, "verdict"),
            quantities={name: Quantity.from_json(q) for name, q in document["quantities"].items()},
            flags=tuple(document["flags"]),
            command=document["command"],
            problems=tuple(Problem.from_json(p) for p in document["problems"]),
            unknowns=tuple(document["unknowns"]),
            notes=tuple(document.get("notes") or ()),
            details=dict(document.get("details") or {}),
            compute_capability=hardware.get("compute_capability"),
            fixed=FixedCommand.from_json(document["fixed_command"]) if document.get("fixed_command") else None,
        )
