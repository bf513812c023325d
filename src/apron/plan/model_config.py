"""A normalized view of an HF config: the numbers the planner reads, under one set of names.

HF families spell the same thing many ways (n_layer / num_hidden_layers, num_local_experts /
n_routed_experts, ...). Multimodal configs keep the language model under `text_config`. Every field
the planner reads goes through here, so the set of config keys Apron understands is visible in one
place; what each key must be is declared in apron.plan.config_schema and checked as the config is read.
"""

from __future__ import annotations

from apron.frozen import cached_property, frozen
from apron.plan.config_schema import check_config, check_nulls

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# Aliases vLLM / transformers accept for the same quantity, in the order they are tried.
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HIDDEN = ("hidden_size", "d_model", "n_embd", "dim")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
_INTERMEDIATE = ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim")
_EXPERTS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts", "n_experts")
_MOE_INTERMEDIATE = ("moe_intermediate_size", "expert_intermediate_size")
_TOPK = ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token")


def _given(table: dict[str, Any]) -> dict[str, Any]:
    """The config without its nulls, at every depth: every reader here takes a key set to null as a
    key not given, so a null never reaches int() or arithmetic. (This is Apron's reading, not the
    file: transformers keeps a null where a class default would fill an absent key.)"""
    return {k: _given(v) if isinstance(v, dict) else v for k, v in table.items() if v is not None}


def _first(config: dict[str, Any], keys: tuple[str, ...], default: Any = None) -> Any:
    for key in keys:
        value = config.get(key)
        if value is not None:
            return value
    return default


@frozen
class ModelConfig:
    raw: dict[str, Any]  # the whole config.json, keys set to null left out (_given)
    text: dict[str, Any]  # the language-model part (text_config for multimodal models)
    # Values the planner reads but does not understand (apron.plan.config_schema): the KV side is unknown.
    unknowns: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: dict[str, Any], file: str = "config.json") -> ModelConfig:
        """The config, every key the planner reads checked once (BadInput naming `file` and the key)."""
        check_nulls(config, file)
        config = _given(config)
        text = config.get("text_config") or config.get("llm_config") or config.get("language_config")
        text = text if isinstance(text, dict) else config
        return cls(raw=config, text=text, unknowns=check_config(config, text, file))

    def get(self, key: str, default: Any = None) -> Any:
        value = self.text.get(key)
        return self.raw.get(key, default) if value is None else value

    @cached_property
    def is_multimodal_config(self) -> bool:
        return self.text is not self.raw or any(
            k in self.raw for k in ("vision_config", "audio_config", "vision_tower")
        )

    @cached_property
    def vision(self) -> dict[str, Any]:
        """The vision tower's config ({} when there is none, or it is not a table); nulls are already out."""
        table = self.raw.get("vision_config")
        return table if isinstance(table, dict) else {}

    @cached_property
    def model_type(self) -> str:
        return str(self.raw.get("model_type") or "")

    @cached_property
    def text_model_type(self) -> str:
        return str(self.text.get("model_type") or self.model_type)

    @cached_property
    def num_layers(self) -> int:
        return int(_first(self.text, _LAYERS, 0))

    @cached_property
    def hidden_size(self) -> int:
        return int(_first(self.text, _HIDDEN, 0))

    @cached_property
    def num_heads(self) -> int:
        return int(_first(self.text, _HEADS, 0))

    @cached_property
    def num_kv_heads(self) -> int:
        value = _first(self.text, _KV_HEADS)
        return int(value) if value is not None else self.num_heads

    @cached_property
    def head_dim(self) -> int:
        value = self.text.get("head_dim")
        if value:
            return int(value)
        return self.hidden_size // self.num_heads if self.num_heads else 0

    @cached_property
    def vocab_size(self) -> int:
        return int(self.get("vocab_size") or 0)

    @cached_property
    def intermediate_size(self) -> int:
        return int(_first(self.text, _INTERMEDIATE, 0))

    @cached_property
    def num_experts(self) -> int:
        return int(_first(self.text, _EXPERTS, 0) or 0)

    @cached_property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @cached_property
    def moe_intermediate_size(self) -> int:
        return int(_first(self.text, _MOE_INTERMEDIATE, 0) or self.intermediate_size)

    @cached_property
    def num_experts_per_tok(self) -> int:
        return int(_first(self.text, _TOPK, 0) or 0)

    @cached_property
    def kv_lora_rank(self) -> int | None:
        value = self.text.get("kv_lora_rank")
        return int(value) if value else None

    @cached_property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @cached_property
    def qk_rope_head_dim(self) -> int:
        return int(self.text.get("qk_rope_head_dim") or 0)

    @cached_property
    def num_nextn_predict_layers(self) -> int:
        return int(self.text.get("num_nextn_predict_layers") or self.text.get("mtp_num_hidden_layers") or 0)

    @cached_property
    def quantization_config(self) -> dict[str, Any] | None:
        q = self.raw.get("quantization_config") or self.raw.get("compression_config")
        return q if isinstance(q, dict) else None

    @cached_property
    def quant_method(self) -> str | None:
        q = self.quantization_config
        return str(q.get("quant_method")).lower() if q and q.get("quant_method") else None

    @cached_property
    def config_dtype(self) -> str | None:
        """The dtype the config declares (`dtype` in transformers 5, `torch_dtype` before)."""
        for source in (self.raw, self.text, self.raw.get("vision_config") or {}):
            value = source.get("dtype") or source.get("torch_dtype")
            if isinstance(value, str):
                return value.removeprefix("torch.")
        return None

    @cached_property
    def tie_word_embeddings(self) -> bool | None:
        value = self.raw.get("tie_word_embeddings", self.text.get("tie_word_embeddings"))
        return None if value is None else bool(value)

    @cached_property
    def rope_parameters(self) -> dict[str, Any]:
        """rope_scaling / rope_parameters merged, as vLLM's get_rope reads them."""
        params = dict(self.text.get("rope_parameters") or {})
        scaling = self.text.get("rope_scaling") or {}
        if isinstance(scaling, dict):
            params.update(scaling)
        if "rope_type" not in params and "type" in params:
            params["rope_type"] = params["type"]
        return params

    @cached_property
    def rope_theta(self) -> float | None:
        value = self.text.get("rope_theta") or self.rope_parameters.get("rope_theta")
        return float(value) if value is not None else None

    @cached_property
    def partial_rotary_factor(self) -> float:
        value = self.text.get("partial_rotary_factor") or self.rope_parameters.get("partial_rotary_factor")
        return float(value) if value else 1.0

    @cached_property
    def max_position_embeddings(self) -> int | None:
        value = _first(self.text, ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"))
        return int(value) if value else None

    @cached_property
    def layer_types(self) -> list[str] | None:
        value = self.text.get("layer_types")
        return list(value) if isinstance(value, list) else None

    @cached_property
    def sliding_window(self) -> int | None:
        value = self.text.get("sliding_window")
        return int(value) if value else None
