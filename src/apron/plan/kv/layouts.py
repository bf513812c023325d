"""From config.json to the KV spec of every layer, per model family, as vLLM's model code builds them.

vLLM reads the transformers config object, not the raw JSON, so the HF normalisation that decides
which layers slide (qwen2/3's use_sliding_window, gemma's alternation, ...) is mirrored here too.
Config fields that describe a cache layout no family here reads make the KV side unknown (see
`unread_layout_fields`): Apron never borrows a number from another layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from apron.engine.facts import EngineFacts
from apron.plan.kv.backends import BackendChoice, choose_backend
from apron.plan.kv.specs import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    cdiv,
)
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings

KV_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
MLA_MODEL_TYPES = {
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "glm4_moe_lite",
    "kimi_k2",
    "glm_moe_dsa",
    "longcat_flash",
    "pangu_ultra_moe",
    "deepseek_vl_v2",
    "kimi_vl",
}
MAMBA1_ARCHS = {"MambaForCausalLM", "FalconMambaForCausalLM"}
NEMOTRON_H_ARCHS = {"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"}
GDN_ARCHS = {
    "Qwen3NextForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
}
_QWEN_WINDOW_TYPES = ("qwen2", "qwen3", "qwen3_moe", "qwen2_moe")


@dataclass(frozen=True)
class _Layer:
    kind: str  # full | sliding | chunked | mla | mamba
    num_kv_heads: int = 0
    head_size: int = 0
    window: int | None = None
    state: tuple | None = None  # (shapes, dtype_bytes, state_kind) for mamba layers


@dataclass(frozen=True)
class KVLayout:
    specs: tuple[tuple[str, KVSpec], ...]
    block_size: int
    backend: BackendChoice
    mamba_cache_mode: str
    is_hybrid: bool
    is_attention_free: bool
    logs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    unknowns: tuple[str, ...] = ()

    @property
    def has_state(self) -> bool:
        return any(spec.kind == "mamba" for _, spec in self.specs)


class _Family:
    """Layers of one model: what the family's vLLM model code hands to Attention / MambaBase."""

    def __init__(self, config: ModelConfig, settings: EngineSettings, facts: EngineFacts):
        self.config, self.t, self.settings, self.facts = config, config.text, settings, facts
        self.tp = settings.tensor_parallel_size
        self.model_bytes = KV_DTYPE_BYTES[settings.dtype]
        kv_dtype = settings.dtype if settings.kv_cache_dtype == "auto" else settings.kv_cache_dtype
        self.kv_bytes = KV_DTYPE_BYTES[kv_dtype]  # fp8 variants are stored as uint8 (1 byte)
        self.notes: list[str] = []
        self.unknowns: list[str] = []

    def kv_heads(self, total: int | None = None) -> int:
        return max(1, (total if total is not None else self.config.num_kv_heads) // self.tp)

    def head_dim(self) -> int:
        return self.config.head_dim

    def state_dtypes(self, ssm_dtype: str = "auto") -> tuple[int, int]:
        """MambaStateDtypeCalculator: conv state in the model dtype (mamba_cache_dtype auto), ssm
        state in mamba_ssm_cache_dtype (auto = the conv dtype)."""
        conv = self.model_bytes
        return conv, conv if ssm_dtype in ("auto", None) else KV_DTYPE_BYTES[_dtype_name(ssm_dtype)]


def _dtype_name(text: str) -> str:
    text = str(text).removeprefix("torch.")
    return {"float": "float32", "half": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(text, text)


def _divide(a: int, b: int, what: str) -> int:
    if a % b:
        raise _Refusal(f"{a} is not divisible by {b}", what)
    return a // b


class _Refusal(Exception):
    """A shape the engine's divide() refuses: a proven constraint, raised at model construction."""

    def __init__(self, message: str, what: str):
        super().__init__(message)
        self.what = what


def mamba1_layer(f: _Family, inner: int, state: int, kernel: int) -> _Layer:
    shapes = (
        (kernel - 1, _divide(inner, f.tp, "intermediate_size")),
        (_divide(inner, f.tp, "intermediate_size"), state),
    )
    return _Layer("mamba", state=(shapes, f.state_dtypes(), "mamba1"))


def mamba2_layer(
    f: _Family, inner: int, groups: int, heads: int, head_dim: int, state: int, kernel: int, ssm_dtype: str = "auto"
) -> _Layer:
    groups = groups + (0 if groups % f.tp == 0 else f.tp - groups)
    conv_dim = inner + 2 * groups * state
    shapes = (
        (kernel - 1, _divide(conv_dim, f.tp, "mamba conv dim")),
        (_divide(heads, f.tp, "mamba heads"), head_dim, state),
    )
    return _Layer("mamba", state=(shapes, f.state_dtypes(ssm_dtype), "mamba2"))


def gdn_layer(f: _Family, ssm_dtype: str) -> _Layer:
    t = f.t
    hk, hv = int(t["linear_num_key_heads"]), int(t["linear_num_value_heads"])
    dk, dv = int(t["linear_key_head_dim"]), int(t["linear_value_head_dim"])
    conv_dim = dk * hk * 2 + dv * hv
    shapes = (
        (int(t["linear_conv_kernel_dim"]) - 1, _divide(conv_dim, f.tp, "linear attention conv dim")),
        (_divide(hv, f.tp, "linear_num_value_heads"), dv, dk),
    )
    return _Layer("mamba", state=(shapes, f.state_dtypes(ssm_dtype), "gdn"))


def family_layers(arch: str, f: _Family) -> tuple[list[_Layer], str]:
    """(layers in model order, family name)."""
    t, config = f.t, f.config
    n = config.num_layers
    if arch in MAMBA1_ARCHS:
        layer = mamba1_layer(f, int(t["intermediate_size"]), int(t["state_size"]), int(t["conv_kernel"]))
        return [layer] * n, "mamba1"
    if arch == "Mamba2ForCausalLM":
        layer = mamba2_layer(
            f,
            int(t["expand"]) * config.hidden_size,
            int(t["n_groups"]),
            int(t["num_heads"]),
            int(t["head_dim"]),
            int(t["state_size"]),
            int(t["conv_kernel"]),
        )
        return [layer] * n, "mamba2"
    if arch in NEMOTRON_H_ARCHS:
        return _nemotron_h(f), "nemotron_h"
    if arch in GDN_ARCHS:
        return _gated_delta_net(f, arch), "gated_delta_net"
    if arch == "JambaForCausalLM":
        return _jamba(f), "jamba"
    if arch == "Lfm2ForCausalLM":
        return _lfm2(f), "short_conv"
    if config.is_mla and config.text_model_type in MLA_MODEL_TYPES:
        size = int(config.kv_lora_rank) + config.qk_rope_head_dim
        f.notes.append(f"MLA: one {size}-wide latent record per token, the same on every TP rank")
        return [_Layer("mla", 1, size)] * n, "mla"
    if arch in ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"):
        return _gemma4(f), "gemma4"
    if arch == "GptOssForCausalLM":
        # gpt_oss.py: sliding iff layer_idx % 2 == 0; layer_types is not read.
        window = int(t["sliding_window"])
        return [
            _Layer("sliding", f.kv_heads(), f.head_dim(), window)
            if i % 2 == 0
            else _Layer("full", f.kv_heads(), f.head_dim())
            for i in range(n)
        ], "gpt_oss"
    return _decoder(f), "decoder"


def _nemotron_h(f: _Family) -> list[_Layer]:
    t = f.t
    ssm_dtype = t.get("mamba_ssm_cache_dtype") or "float32"  # models/config.py NemotronHForCausalLMConfig
    mamba = mamba2_layer(
        f,
        int(t["mamba_num_heads"]) * int(t["mamba_head_dim"]),
        int(t["n_groups"]),
        int(t["mamba_num_heads"]),
        int(t["mamba_head_dim"]),
        int(t["ssm_state_size"]),
        int(t["conv_kernel"]),
        ssm_dtype,
    )
    window = t.get("sliding_window")
    attention = _Layer("sliding" if window else "full", f.kv_heads(), f.head_dim(), window)
    kinds = t.get("layers_block_type") or _pattern_types(t.get("hybrid_override_pattern", ""))
    return [mamba if k == "mamba" else attention for k in kinds if k in ("mamba", "attention")]


def _pattern_types(pattern: str) -> list[str]:
    return [{"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}.get(c, "other") for c in pattern]


def _gated_delta_net(f: _Family, arch: str) -> list[_Layer]:
    t = f.t
    # Qwen3_5...Config reads mamba_ssm_dtype; Qwen3-Next has no hook (ssm state in the conv dtype).
    ssm_dtype = (t.get("mamba_ssm_dtype") or "auto") if arch.startswith("Qwen3_5") else "auto"
    linear = gdn_layer(f, ssm_dtype)
    attention = _Layer("full", f.kv_heads(), f.head_dim())
    interval = int(t.get("full_attention_interval") or 4)
    types = t.get("layer_types") or [
        "linear_attention" if (i + 1) % interval else "full_attention" for i in range(f.config.num_layers)
    ]
    return [linear if kind == "linear_attention" else attention for kind in types]


def _jamba(f: _Family) -> list[_Layer]:
    t = f.t
    period, offset = int(t.get("attn_layer_period", 8)), int(t.get("attn_layer_offset", 4))
    mamba = mamba1_layer(
        f, int(t["mamba_expand"]) * f.config.hidden_size, int(t["mamba_d_state"]), int(t["mamba_d_conv"])
    )
    attention = _Layer("full", f.kv_heads(), f.head_dim())
    return [attention if i % period == offset else mamba for i in range(f.config.num_layers)]


def _lfm2(f: _Family) -> list[_Layer]:
    t = f.t
    shapes = ((int(t["conv_L_cache"]) - 1, _divide(int(t["conv_dim"]), f.tp, "conv_dim")),)
    conv = _Layer("mamba", state=(shapes, (f.model_bytes,), "short_conv"))
    attention = _Layer("full", f.kv_heads(), f.head_dim())
    return [attention if kind == "full_attention" else conv for kind in t["layer_types"]]


def _gemma4(f: _Family) -> list[_Layer]:
    t = f.t
    types = hf_layer_types(t, f.config.num_layers)
    window = hf_sliding_window(t)
    shared_from = f.config.num_layers - int(t.get("num_kv_shared_layers") or 0)
    global_kv = t.get("num_global_key_value_heads") if t.get("attention_k_eq_v", True) else None
    full = _Layer("full", f.kv_heads(int(global_kv or f.config.num_kv_heads)), int(t.get("global_head_dim") or 512))
    sliding = _Layer("sliding", f.kv_heads(), f.head_dim(), window)
    # Layers sharing an earlier layer's KV (kv_sharing_target_layer_name) hold no cache of their own.
    return [full if kind == "full_attention" else sliding for i, kind in enumerate(types) if i < shared_from]


def _decoder(f: _Family) -> list[_Layer]:
    """Llama-style decoders (Llama, Mistral, Qwen2/3, Gemma2/3, Phi3, ...): a layer slides when the
    model passes a per-layer window (layer_types), else it takes cache_config.sliding_window, which
    EngineArgs sets from the HF config only when layer_types is absent or all sliding."""
    t, n = f.t, f.config.num_layers
    types = hf_layer_types(t, n)
    window = hf_sliding_window(t)
    engine_window = window if (types is None or all(x == "sliding_attention" for x in types)) else None
    model_type = f.config.text_model_type
    reads_types = model_type not in (*_QWEN_WINDOW_TYPES, "phi3")
    if model_type in _QWEN_WINDOW_TYPES and types and len(set(types)) > 1:
        f.unknowns.append(
            "qwen2/3 with mixed sliding and full layers: vLLM asserts max_window_layers == "
            "num_hidden_layers at start-up"
        )
    chunk = t.get("attention_chunk_size")
    layers = []
    for i in range(n):
        layer_window = window if reads_types and types and types[i] == "sliding_attention" else None
        layer_window = layer_window or engine_window
        if chunk and model_type in ("llama4", "llama4_text"):
            # llama4.py: RoPE layers use chunked local attention; the hybrid KV manager is off by
            # default for such models (config/vllm.py), so they are allocated as full attention.
            f.notes.append(
                "chunked local attention allocated as full attention (hybrid KV manager "
                "disabled by default for attention_chunk_size models)"
            )
        kind = "sliding" if layer_window else "full"
        layers.append(_Layer(kind, f.kv_heads(), f.head_dim(), layer_window))
    if engine_window and types is None:
        f.notes.append(
            f"every layer slides (window {engine_window}): vLLM applies the config's sliding_window "
            "to all layers when layer_types is absent"
        )
    return layers


def hf_layer_types(t: dict, n: int) -> list[str] | None:
    """transformers 5 configuration_*.py normalisation of layer_types (vLLM sees the object)."""
    model_type = t.get("model_type", "")
    types = t.get("layer_types")
    if model_type in _QWEN_WINDOW_TYPES:
        window = t.get("sliding_window") if t.get("use_sliding_window") else None
        if types is None:
            first = int(t.get("max_window_layers", 28))
            types = ["sliding_attention" if window is not None and i >= first else "full_attention" for i in range(n)]
        return types
    if types is not None:
        return types
    if model_type in ("gemma2", "gpt_oss"):
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if model_type in ("gemma3", "gemma3_text"):
        pattern = int(t.get("sliding_window_pattern", 6))
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if model_type in ("gemma4", "gemma4_text"):
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
        types[-1] = "full_attention"
        return types
    return None


def hf_sliding_window(t: dict) -> int | None:
    model_type = t.get("model_type", "")
    window = t.get("sliding_window")
    if model_type in _QWEN_WINDOW_TYPES and not t.get("use_sliding_window"):
        return None
    if window and model_type in ("gemma3", "gemma3_text") and t.get("use_bidirectional_attention"):
        window = window // 2 + 1
    if window and model_type in ("gemma4", "gemma4_text") and t.get("use_bidirectional_attention") == "all":
        window = window // 2 + 1
    return int(window) if window else None  # config/model.py: a window of 0 disables sliding


# --- fields that describe a layout ------------------------------------------------------------

# Config keys that look like cache/attention/state layout descriptions: any underscore-separated word
# of the key in _LAYOUT_WORDS, or one of _LAYOUT_PARTS anywhere in it.
_LAYOUT_WORDS = {
    "window",
    "chunk",
    "sink",
    "sinks",
    "index",
    "indexer",
    "sparse",
    "compress",
    "compressed",
    "ring",
    "hyper",
    "ngram",
    "engram",
    "mamba",
    "ssm",
    "conv",
    "lightning",
    "retention",
    "kv",
    "cache",
    "latent",
    "lora",
    "replay",
    "replayssm",
    "hisparse",
    "kpool",
    "mtp",
    "nextn",
    "dsa",
    "nope",
    "swa",
    "recurrent",
    "gdn",
    "delta",
    "rwkv",
    "xlstm",
}
_LAYOUT_PARTS = (
    "layer_types",
    "block_type",
    "attention_type",
    "attn_type",
    "pattern",
    "global_head",
    "linear_attn",
    "linear_num",
    "linear_key",
    "linear_value",
    "linear_conv",
    "head_dim",
    "state_size",
    "kv_shared",
    "shared_layers",
)


def _describes_layout(key: str) -> bool:
    return bool(set(key.lower().split("_")) & _LAYOUT_WORDS) or any(p in key for p in _LAYOUT_PARTS)


# Keys the layouts above read, or that are known not to change the KV cache.
_READ_OR_IRRELEVANT = {
    "sliding_window",
    "use_sliding_window",
    "max_window_layers",
    "sliding_window_pattern",
    "layer_types",
    "attention_chunk_size",
    "no_rope_layers",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "q_lora_rank",
    "head_dim",
    "num_key_value_heads",
    "global_head_dim",
    "num_global_key_value_heads",
    "attention_k_eq_v",
    "num_kv_shared_layers",
    "use_bidirectional_attention",
    "layers_block_type",
    "hybrid_override_pattern",
    "mamba_num_heads",
    "mamba_head_dim",
    "ssm_state_size",
    "mamba_ssm_cache_dtype",
    "conv_kernel",
    "state_size",
    "mamba_ssm_dtype",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "full_attention_interval",
    "attn_layer_period",
    "attn_layer_offset",
    "mamba_expand",
    "mamba_d_state",
    "mamba_d_conv",
    "conv_dim",
    "conv_L_cache",
    "conv_bias",
    "use_conv_bias",
    # weights, kernels or generation only
    "use_cache",
    "cache_implementation",
    "mamba_hidden_act",
    "mamba_proj_bias",
    "use_mamba_kernels",
    "mamba_dt_rank",
    "mamba_conv_bias",
    "mamba_chunk_size",
    "chunk_size",
    "mamba_n_groups",
    "mamba_n_heads",
    "mamba_d_head",
    "mamba_dt_min",
    "mamba_dt_max",
    "mamba_dt_init_floor",
    "mamba_dt_limit",
    "num_nextn_predict_layers",
    "mtp_num_hidden_layers",
    "mtp_use_dedicated_embeddings",
    "mtp_layers_block_type",
    "rope_head_dim",
    "partial_rotary_factor",
    "attention_bias",
    "attention_dropout",
    "attn_logit_softcapping",
    "attn_output_gate",
    "output_gate_type",
    "router_aux_loss_coef",
    "time_step_rank",
    "rescale_prenorm_residual",
    "residual_in_fp32",
    "layer_rope_theta",
    "state_dim",
    "kv_channels",
    "max_position_embeddings",
    "original_max_position_embeddings",
    "head_dim_original",
    "use_qk_norm",
    "qk_layernorm",
    "ssm_cfg",
    "layer_norm_epsilon",
}


def unread_layout_fields(config: ModelConfig) -> list[str]:
    """Layout-describing keys that no modelled family reads (null or false values describe nothing)."""
    out = []
    for key, value in config.text.items():
        if value in (None, False, 0, [], {}) or key in _READ_OR_IRRELEVANT:
            continue
        if _describes_layout(key):
            out.append(key)
    return sorted(out)


# --- putting the specs together -------------------------------------------------------------


def build_layout(
    arch: str,
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    *,
    capability: tuple[int, int],
    is_attention_free: bool,
) -> KVLayout:
    f = _Family(config, settings, facts)
    entry = facts.architecture(arch) or {}
    for key in unread_layout_fields(config):
        f.unknowns.append(f"config field '{key}' describes a cache or attention layout Apron does not model")
    try:
        layers, family = family_layers(arch, f)
    except KeyError as exc:
        f.unknowns.append(f"config lacks {exc} needed for this model family's cache layout")
        layers, family = [], "unknown"
    except _Refusal as exc:
        f.unknowns.append(f"tensor parallel size does not divide the {exc.what} ({exc}); vLLM refuses at start-up")
        layers, family = [], "unknown"
    if family == "decoder" and (
        entry.get("is_hybrid") or entry.get("is_attention_free") or entry.get("has_inner_state")
    ):
        f.unknowns.append(
            f"vLLM {facts.version} registers {arch} as a model with recurrent state, whose "
            "state layout Apron does not model"
        )
    if config.is_mla and family not in ("mla", "unknown"):
        f.unknowns.append(
            f"kv_lora_rank on a {config.text_model_type!r} model: vLLM's MLA path is keyed by "
            "model type, and Apron does not know which cache this model builds"
        )
    attention = [x for x in layers if x.kind != "mamba"]
    states = [x for x in layers if x.kind == "mamba"]
    is_hybrid = bool(attention) and bool(states)
    choice = choose_backend(
        capability,
        is_mla=any(x.kind == "mla" for x in attention),
        has_sinks=family == "gpt_oss",
        mixed_head_sizes=len({x.head_size for x in attention}) > 1,
        kv_cache_dtype=settings.kv_cache_dtype,
    )
    block = choice.backend.preferred_block_size(16)
    mode = "none" if (not attention or is_attention_free) else ("align" if states else "none")
    logs: list[str] = []
    if block != 16:
        logs.append(f"Setting kv cache block size to {block} for {choice.backend.name} backend.")
    checkpoint_blocks = _checkpoint_blocks(states, mode, facts, capability, config)
    mamba_padded, mamba_block = None, (settings.max_model_len if mode == "none" else block)
    if is_hybrid:
        block, mamba_padded, logs2 = align_hybrid_block(
            f, attention, states, block, choice, mode, checkpoint_blocks, capability
        )
        logs += logs2
        mamba_block = block
    specs = _specs(layers, f, block, choice, facts, mamba_padded, mamba_block, checkpoint_blocks)
    return KVLayout(
        specs=tuple(specs),
        block_size=block,
        backend=choice,
        mamba_cache_mode=mode,
        is_hybrid=is_hybrid,
        is_attention_free=not attention and bool(states),
        logs=tuple(logs),
        notes=tuple(dict.fromkeys(f.notes)),
        unknowns=tuple(f.unknowns),
    )


def _checkpoint_blocks(
    states: list[_Layer], mode: str, facts: EngineFacts, capability: tuple[int, int], config: ModelConfig
) -> int:
    """A third state page per request in align mode: MambaMixer2 from 0.32; Qwen's gated delta-net in
    0.33 when its prefill runs on FlashInfer (Hopper; Blackwell with key head dim 128)."""
    if mode != "align" or not states:
        return 0
    kinds = {x.state[2] for x in states}
    if "mamba2" in kinds and facts.at_least("0.32.0"):
        return 1
    if "gdn" in kinds and facts.at_least("0.33.0") and _gdn_flashinfer(capability, config):
        return 1
    return 0


def _gdn_flashinfer(capability: tuple[int, int], config: ModelConfig) -> bool:
    if capability[0] == 9:
        return True
    return capability[0] in (10, 12) and int(config.text.get("linear_key_head_dim") or 0) == 128


def align_hybrid_block(
    f: _Family,
    attention: list[_Layer],
    states: list[_Layer],
    block: int,
    choice: BackendChoice,
    mode: str,
    checkpoint_blocks: int,
    capability: tuple[int, int],
) -> tuple[int, int | None, list[str]]:
    """platforms/interface.py _align_hybrid_block_size: the attention block grows until one
    attention page holds a whole state page; the state page is then padded to match."""
    first = attention[0]
    if first.kind == "mla":
        attn_1tok = first.head_size * f.kv_bytes
    else:
        attn_1tok = 2 * f.kv_heads() * f.head_dim() * f.kv_bytes
    shapes, sizes, kind = states[0].state
    mamba_page = sum(math.prod(s) * d for s, d in zip(shapes, sizes))
    align = max(choice.backend.min_kernel_block(), block)
    if first.kind == "mla":
        align = max(align, 128)
    if f.facts.at_least("0.33.0") and mode == "align" and kind == "gdn" and checkpoint_blocks:
        align = math.lcm(align, 64)  # FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    attn_block = align * cdiv(mamba_page, align * attn_1tok)
    if f.facts.at_least("0.32.0"):
        base = choice.backend.min_kernel_block()
        attn_block = base * cdiv(attn_block, base)
    logs = []
    if block < attn_block:
        block = attn_block
        logs.append(
            f"Setting attention block size to {block} tokens to ensure that attention page size is >= mamba page size."
        )
    attn_page = block * attn_1tok
    padded = None
    if attn_page != mamba_page:
        padded = attn_page
        logs.append(
            f"Padding mamba page size by {100 * (attn_page - mamba_page) / mamba_page:.2f}% to "
            "ensure that mamba page size and attention page size are exactly equal."
        )
    return block, padded, logs


def _specs(
    layers: list[_Layer],
    f: _Family,
    block: int,
    choice: BackendChoice,
    facts: EngineFacts,
    mamba_padded: int | None,
    mamba_block: int,
    checkpoint_blocks: int,
) -> list[tuple[str, KVSpec]]:
    dsz = f.kv_bytes
    record = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(f.settings.kv_cache_dtype)
    out: list[tuple[str, KVSpec]] = []
    for i, layer in enumerate(layers):
        name = f"layers.{i}"
        if layer.kind == "mamba":
            shapes, sizes, kind = layer.state
            spec = MambaSpec(shapes, sizes, mamba_block, kind, mamba_padded, checkpoint_blocks)
        elif layer.kind == "mla":
            spec = MLAAttentionSpec(block, 1, layer.head_size, dsz, head_size_v=0, record_bytes=record)
        elif layer.kind == "sliding":
            sliding_block = choice.backend.sliding_block_size(block, is_v029=not facts.at_least("0.30.0"))
            spec = SlidingWindowSpec(
                sliding_block, layer.num_kv_heads, layer.head_size, dsz, sliding_window=int(layer.window)
            )
        elif layer.kind == "chunked":
            spec = ChunkedLocalAttentionSpec(
                block, layer.num_kv_heads, layer.head_size, dsz, attention_chunk_size=int(layer.window)
            )
        else:
            spec = FullAttentionSpec(block, layer.num_kv_heads, layer.head_size, dsz)
        out.append((name, spec))
    return out
