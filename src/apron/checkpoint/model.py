"""The one `Checkpoint` value every source (folder, Hub, snapshot, bundled catalog) produces."""

from __future__ import annotations

from apron.checkpoint.safetensors import TensorInfo
from apron.errors import BadInput
from apron.frozen import cached_property, field, frozen

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Any, Literal, get_args
else:
    from apron.lite_typing import Literal, get_args

SourceKind = Literal["local", "hub", "snapshot", "catalog"]
# safetensors __metadata__ key: "true" in a checkpoint whose weights are random (`apron example tiny`)
RANDOM_WEIGHTS_KEY = "apron.random_weights"
SOURCE_KINDS: tuple[SourceKind, ...] = get_args(SourceKind)


@frozen
class Checkpoint:
    source: str  # what the user gave: a path, a repo id, a snapshot file
    source_kind: SourceKind
    repo_id: str | None
    revision: str | None  # a commit sha where known
    config: dict[str, Any]
    tensors: tuple[TensorInfo, ...]  # the tensors vLLM would read (indexed files only)
    files: tuple[str, ...]  # the safetensors files read
    generation_config: dict[str, Any] | None = None
    tokenizer_config: dict[str, Any] | None = None
    chat_template: str | None = None
    header_bytes_read: int = 0  # bytes of headers and config files read, for the byte budget
    notes: tuple[str, ...] = ()  # facts about the source worth showing (e.g. "from the catalog")
    # preprocessor_config.json / processor_config.json / video_preprocessor_config.json, by file name
    processor_configs: dict[str, Any] = field(default_factory=dict, compare=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @cached_property
    def tensors_by_name(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}

    @property
    def architectures(self) -> list[str]:
        archs = self.config.get("architectures") or []
        return [a for a in archs if isinstance(a, str)]

    @property
    def architecture(self) -> str:
        archs = self.architectures
        if not archs:
            raise BadInput(
                f"{self.source}: config.json field 'architectures' is missing or empty; "
                "vLLM needs it to pick the model class"
            )
        return archs[0]

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type") or "")

    @cached_property
    def total_tensor_bytes(self) -> int:
        return sum(self.shard_bytes.values())

    @cached_property
    def shard_bytes(self) -> dict[str, int]:
        """Data bytes per safetensors file (what vLLM reads from each shard)."""
        sizes: dict[str, int] = {}
        for tensor in self.tensors:
            sizes[tensor.file] = sizes.get(tensor.file, 0) + tensor.num_bytes
        return sizes

    @property
    def has_random_weights(self) -> bool:
        """The weights mean nothing (their safetensors metadata says so): answers are not checked."""
        return bool(self.extra.get("random_weights"))

    @property
    def label(self) -> str:
        return self.repo_id or self.source
