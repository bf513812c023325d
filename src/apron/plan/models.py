"""`apron models`: the bundled catalog, one row a model - what a plan of it reads without the Hub."""

from __future__ import annotations

from apron.checkpoint.catalog import catalog_index, load_from_catalog
from apron.frozen import frozen
from apron.plan.kv.families import family_for
from apron.plan.model_config import ModelConfig

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any


@frozen
class CatalogModel:
    repo_id: str
    revision: str | None
    architecture: str
    layout_family: str  # the KV layout family the planner counts it with (docs/kv-layouts.md)
    checkpoint_bytes: int  # the safetensors data vLLM reads
    num_shards: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.repo_id,
            "revision": self.revision,
            "architecture": self.architecture,
            "layout_family": self.layout_family,
            "checkpoint_bytes": self.checkpoint_bytes,
            "num_shards": self.num_shards,
        }


def catalog_models() -> list[CatalogModel]:
    rows = []
    for repo_id, entry in sorted(catalog_index().items(), key=lambda item: item[0].lower()):
        checkpoint = load_from_catalog(repo_id)
        family = family_for(checkpoint.architecture, ModelConfig.from_config(checkpoint.config))
        rows.append(
            CatalogModel(
                repo_id,
                entry.get("revision"),
                checkpoint.architecture,
                family.NAME,
                checkpoint.total_tensor_bytes,
                len(checkpoint.shard_bytes),
            )
        )
    return rows
