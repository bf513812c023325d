"""Weight memory per GPU: the checkpoint's headers, then what vLLM does with them.

vLLM (model_executor/...) skips tensors it never loads, pads the vocabulary and splits it across
tensor-parallel ranks, stores tied embeddings once, shards or replicates each layer, casts floating
weights to the runtime dtype and re-lays quantized weights. Each step below names the vLLM code it
follows. Tensors whose tensor-parallel layout is not recognised are counted whole on every GPU (an
upper bound) and listed, so a TP>1 plan says where it is unsure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from apron.checkpoint import Checkpoint
from apron.checkpoint.safetensors import TensorInfo
from apron.frozen import frozen, replace
from apron.plan import weights_glm5next, weights_observed
from apron.plan.allocator import Event, load_block_bytes
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Problem
from apron.plan.towers import rotary_cache_shape
from apron.plan.weights_dsv4 import humming_stacked_bytes, is_dsv4, keeps_fp32, unread_note
from apron.plan.weights_dsv4 import rotary_cache_bytes as dsv4_rotary_cache_bytes
from apron.plan.weights_repack import (
    MacheteAwqLinear,
    MarlinFp8Linear,
    machete_awq_events,
    marlin_fp8_events,
    repack_block_bytes,
)

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
_FLOAT_DTYPES = {"F32", "F16", "BF16", "F64"}

# Tensors vLLM's AutoWeightsLoader drops (REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER).
_ROTARY_CACHES = ("rotary_emb.inv_freq", "rotary_pos_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached")
# Module names of vision/audio towers that `--language-model-only` leaves unbuilt
# (interfaces.py _mark_tower_model marks these submodules).
_TOWER_PARTS = (
    "vision_tower",
    "vision_model",
    "visual.",
    "multi_modal_projector",
    "mm_projector",
    "audio_tower",
    "audio_model",
    "embed_vision",
    "embed_audio",
    "vision_embed",
    "image_newline",
    "patch_embed",
    "vision_encoder",
    "audio_encoder",
    "patch_merge_mlp",  # MiniMax-M3
    "aligner.",  # DeepSeek-V4.1
    "image_start",
    "image_end",
)
# Checkpoint prefixes of towers that sit at the top level (DeepSeek-V4.1's `vision.` blocks).
_TOWER_PREFIXES = ("vision.",)
# Tensors vLLM keeps in pinned host memory by default (EngramConfig.cpu_offload, the default):
# DeepSeek-V4.1's Engram tables (models/deepseek_v41/common/engram.py ParallelEngramEmbedding) and
# Qwen3.8-Flash-Next's PLE n-gram embedding (models/qwen4_exp/nvidia/ngram_embedding.py).
_HOST_TABLES = r"\.engram\.embed\.(weight|scale)$|\.ple_embedding\.ngram_embedding\."  # compiled on first use
# Layers the newest models keep whole on every rank or split, by name (their model files):
# DeepSeek-V4/V4.1 (attention.py fused_wqa_wkv / compressor / indexer disable_tp, ReplicatedLinear
# hc_* mixers and routers), GLM-5.x DSA indexers (deepseek_v32/attention.py), Qwen3.8-Flash-Next
# hyper-connections and PLE projections (nvidia/hyperconnection.py, ple_layer.py), MiniMax-M3's
# one-head index key projection (nvidia/model.py).
# (needles, pattern, role): a pattern is tried, and compiled on its first use (re's cache), only for a
# name holding one of its needles, so a plan of a model none of them names compiles none of them
# (tests/test_weights_roles.py holds every match in the fixtures to a needle).
_NAMED_ROLES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    ((".attn.wq_a.", ".attn.wkv."), r"\.attn\.(wq_a|wkv)\.(weight|scale)$", "replicated"),
    ((".attn.wq_b.", ".attn.wo_a.", ".attn.wo_b."), r"\.attn\.(wq_b|wo_a|wo_b)\.(weight|scale)$", "sharded"),
    (
        (".attn.compressor.", ".attn.indexer."),
        r"\.attn\.(indexer\.)?compressor\.|\.attn\.indexer\.(wq_b|weights_proj)\.",
        "replicated",
    ),
    (
        ("hc_attn_", "hc_ffn_", "hc_head_", ".attn.attn_sink", ".ffn.gate."),
        r"(^|\.)hc_(attn|ffn|head)_|\.attn\.attn_sink$|\.ffn\.gate\.(weight|bias|tid2eid)$",
        "replicated",
    ),
    ((".engram.",), r"\.engram\.(wkv|k_weight|q_weight|norm)", "replicated"),
    ((".self_attn.indexer.",), r"\.self_attn\.indexer\.(wq_b|wk|weights_proj|k_norm)\.", "replicated"),
    ((".indexer.",), r"\.indexer\.(index_kpool_compress_\w+|k_norm)", "replicated"),
    (
        ("hyper_connection", ".ple."),
        r"hyper_connection\.|hyper_connection_mixer\.|\.ple\.(key_proj|value_proj|conv1d|norm_\w+)\.",
        "replicated",
    ),
    (
        (".ple.ple_embedding.layer_multipliers", ".index_qk_proj."),
        r"\.ple\.ple_embedding\.layer_multipliers$|\.index_qk_proj\.",
        "replicated",
    ),
    ((".self_attn.index_k_proj.",), r"\.self_attn\.index_k_proj\.", "replicated"),
    # DeepSeek-V4.1's image span embeddings are plain parameters of the wrapper and its patch embedding
    # a ReplicatedLinear (deepseek_v41/nvidia/vl_model.py 0.33.0:159-167, deepseek_v4/common/vision.py
    # 0.33.0:81-95); MiniMax-M3's Conv3d patch embedding has no TP class (minimax_m3/common/
    # vision_tower.py 0.33.0:56-62) and its projector and patch merger are column (linear_1) then row
    # (linear_2) parallel (vision_tower.py 0.33.0:543-558, 584-599).
    (
        ("image_", "vision.patch_embed.proj.", ".vision_model.embeddings.patch_embedding.weight"),
        r"^image_(start|end|newline)$|^vision\.patch_embed\.proj\.|\.vision_model\.embeddings\.patch_embedding\.weight$",
        "replicated",
    ),
    (
        ("multi_modal_projector.", "patch_merge_mlp."),
        r"^(multi_modal_projector|patch_merge_mlp)\.linear_1\.|^(multi_modal_projector|patch_merge_mlp)\.linear_2\.weight$",
        "sharded",
    ),
    (
        ("multi_modal_projector.", "patch_merge_mlp."),
        r"^(multi_modal_projector|patch_merge_mlp)\.linear_2\.bias$",
        "replicated",
    ),
    # MiniMax-M3's tower attention: a QKVParallelLinear with as many KV heads as heads (vision_tower.py
    # 0.33.0:101-109), so k and v split like q, not by the language model's KV heads.
    (
        ("vision_tower.vision_model.encoder.layers.",),
        r"^vision_tower\.vision_model\.encoder\.layers\.\d+\.self_attn\.[kv]_proj\.",
        "sharded",
    ),
    # Qwen-VL-style towers (Qwen3-VL family, GLM-5.3-Flash): the attention's qkv is a QKVParallelLinear
    # with as many KV heads as heads and its out projection a RowParallelLinear (model_executor/models/
    # qwen2_5_vl.py 0.33.0:374-395; models/glm5next/common/multimodal.py 0.33.0:150-166); GLM's merger
    # proj a ColumnParallelLinear with gather_output (multimodal.py 0.33.0:302-310): all keep 1 / tp.
    (
        ("visual.blocks.", "visual.merger.proj.weight"),
        r"visual\.blocks\.\d+\.attn\.(qkv\.(weight|bias)|proj\.weight)$|visual\.merger\.proj\.weight$",
        "sharded",
    ),
    # Their patch embeddings (Conv3dLayer: qwen3_vl.py 0.33.0:392, glm5next/common/multimodal.py 0.33.0:67),
    # learned position table (nn.Embedding: qwen3_vl.py 0.33.0:617) and GLM's downsample (Conv2dLayer:
    # multimodal.py 0.33.0:427) have no TP class: whole on every rank.
    (("visual.",), r"visual\.(patch_embed\.proj|pos_embed|downsample)\.weight$", "replicated"),
    ((".self_attn.index_q_proj.",), r"\.self_attn\.index_q_proj\.", "kv"),
    # GLM-5.3-Flash KDA (glm5next/common/kda.py): f_a / g_a are the replicated shards of the fused
    # input projection; b, f_b, g_b and the short convolutions split by head.
    ((".self_attn.f_a_proj.", ".self_attn.g_a_proj."), r"\.self_attn\.(f_a_proj|g_a_proj)\.", "replicated"),
    (
        (".self_attn.b_proj.", ".self_attn.f_b_proj.", ".self_attn.g_b_proj.", "_conv1d."),
        r"\.self_attn\.(b_proj|f_b_proj|g_b_proj|[qkv]_conv1d)\.",
        "sharded",
    ),
    ((".ple_embedding.ngram_heads_",), r"\.ple_embedding\.ngram_heads_(offsets|vocab_sizes)$", "replicated"),
)

# Layer names by tensor-parallel behaviour (model_executor/layers/linear.py classes they map to).
_COLUMN = {
    "q_proj",
    "gate_proj",
    "up_proj",
    "gate_up_proj",
    "w1",
    "w3",
    "fc1",
    "c_fc",
    "kv_b_proj",
    "q_b_proj",
    "in_proj",
    "dt_proj",
    "conv1d",
    "wq",
    "dense_h_to_4h",
    "linear_fc1",
    "in_proj_qkvz",
    "in_proj_ba",
    "in_proj_qkv",
    "in_proj_z",
    "in_proj_b",
    "in_proj_a",
    "shared_expert.gate_proj",
    "query",
    "key_value",
}
_ROW = {
    "o_proj",
    "down_proj",
    "out_proj",
    "dense",
    "c_proj",
    "w2",
    "fc2",
    "wo",
    "dense_4h_to_h",
    "x_proj",
    "linear_fc2",
}
_KV = {"k_proj", "v_proj", "wk", "wv"}
_FUSED_QKV = {"qkv_proj", "query_key_value", "c_attn", "wqkv", "Wqkv"}
# ReplicatedLinear / plain parameters on every rank: MLA's down-projections, routers, norms.
_REPLICATED = {
    "kv_a_proj_with_mqa",
    "q_a_proj",
    "kv_a_layernorm",
    "q_a_layernorm",
    "router",
    "e_score_correction_bias",
    "shared_expert_gate",
    "gate_weight",
    "q_norm",
    "k_norm",
}
# Per-head or per-channel parameters split like the heads/channels they belong to.
_SPLIT_PARAMS = {"sinks", "A_log", "A", "D", "dt_bias", "conv1d"}


@frozen
class WeightLine:
    group: str
    checkpoint_bytes: int
    bytes_per_gpu: int


@frozen
class WeightsEstimate:
    bytes_per_gpu: int
    checkpoint_bytes: int
    runtime_dtype: str
    lines: tuple[WeightLine, ...]
    skipped: tuple[tuple[str, int], ...]
    notes: tuple[str, ...]
    unknown_layout_tensors: tuple[str, ...]
    problems: tuple[Problem, ...] = ()
    param_bytes: tuple[int, ...] = ()  # each parameter from the checkpoint, in construction order

    def with_buffers(self, buffers: tuple[tuple[str, int, int], ...]) -> WeightsEstimate:
        """The estimate with the buffers the model's layers allocate at construction (the KV
        family's persistent buffers: top-k index buffers and the like). They are made inside
        load_model, so vLLM's "Model loading took" counts them (DeviceMemoryProfiler's
        memory_allocated growth, gpu/model_runner.py 0.29.0:379-410), each in its own 2 MiB-rounded
        block where it is 20 MiB or more (allocator.load_block_bytes). BUFFERS: (name, bytes of one,
        how many)."""
        if not buffers:
            return self
        total = sum(load_block_bytes(n) * count for _, n, count in buffers)
        line = WeightLine("buffers made at construction", 0, total)
        note = "plus buffers the layers make at construction: " + ", ".join(
            f"{name} {n * count / 2**20:.1f} MiB" for name, n, count in buffers
        )
        return replace(
            self, bytes_per_gpu=self.bytes_per_gpu + total, lines=self.lines + (line,), notes=self.notes + (note,)
        )

    @property
    def observed_bytes(self) -> int:
        """The part that is observed, not derived (plan/weights_observed.py): its range lets it be absent."""
        return sum(line.bytes_per_gpu for line in self.lines if line.group == weights_observed.LINE)

    @property
    def host_table_bytes(self) -> int:
        """Checkpoint tables vLLM keeps in pinned host memory instead of on the GPU (all ranks)."""
        return sum(n for reason, n in self.skipped if reason == _SKIP_REASONS["host"])

    @property
    def basis(self) -> str:
        parts = [f"safetensors headers ({self.checkpoint_bytes / 2**30:.2f} GiB in the checkpoint)"]
        parts += [f"minus {reason} ({n / 2**30:.2f} GiB)" for reason, n in self.skipped if n]
        parts += list(self.notes)
        return "; ".join(parts)


@frozen
class WeightSettings:
    tensor_parallel_size: int
    runtime_dtype: str  # "bfloat16" | "float16" | "float32"
    capability: tuple[int, int]
    language_model_only: bool = False
    is_tower_whole: bool = False  # --mm-encoder-tp-mode data: the tower is replicated, not sharded
    vocab_padding_size: int = 64  # DEFAULT_VOCAB_PADDING_SIZE (vocab_parallel_embedding.py)
    # The CUDA caching allocator's segment rounding (plan/allocator.py); the CPU platform has none.
    has_caching_allocator: bool = True
    release: str = "0.33.0"  # the vLLM release (the MoE backend a layout is re-laid for depends on it)
    tower_family: str | None = None  # plan/towers.py: the tower's family (its rotary cache)


class _Tally:
    """The running sums of one pass over the tensors."""

    __slots__ = ("by_group", "skipped", "unknown")

    def __init__(self) -> None:
        self.by_group: dict[str, list[int]] = {}
        self.skipped: dict[str, int] = {}
        self.unknown: list[str] = []

    def add(self, group: str, checkpoint_bytes: int, gpu_bytes: int) -> None:
        entry = self.by_group.setdefault(group, [0, 0])
        entry[0] += checkpoint_bytes
        entry[1] += gpu_bytes

    def skip(self, reason: str, num_bytes: int) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + num_bytes


def estimate_weights(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> WeightsEstimate:
    """The weights term, kept per checkpoint for the same config and settings (a frozen value): fit
    plans one model on many GPUs and settings, and those of one capability, release and TP share it.
    The config object is kept beside it, so a different one never takes another's entry."""
    cache: dict[tuple[int, WeightSettings], tuple[ModelConfig, WeightsEstimate]]
    cache = checkpoint.extra.setdefault("_weights_estimates", {})
    hit = cache.get((id(config), settings))
    if hit is not None and hit[0] is config:
        return hit[1]
    estimate = _estimate_weights(checkpoint, config, settings)
    cache[(id(config), settings)] = (config, estimate)
    return estimate


def _estimate_weights(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> WeightsEstimate:
    tally = _Tally()
    quant = _Quant.from_config(config, settings)
    for entry in classified(checkpoint, config):
        reason = _SKIP_REASONS.get(entry.skip) if entry.skip else None
        if entry.skip == "tower" and not settings.language_model_only:
            reason = None
        if reason:
            tally.skip(reason, entry.checkpoint_bytes)
        elif entry.is_relayout or (entry.is_int4_part and quant.uses_marlin) or quant.relays(entry):
            continue  # counted below from the engine's own layout
        else:
            tally.add(entry.group, entry.checkpoint_bytes, _entry_bytes(entry, config, settings, tally))
    notes = list(quant.add_relayout(checkpoint, config, settings, tally))
    if weights_glm5next.is_glm5_next(config):
        notes.append(weights_glm5next.note(_glm5_next_added_bytes(checkpoint, config, settings)))
    rounding = _allocator_rounding(checkpoint, config, settings) if settings.has_caching_allocator else 0
    if rounding:
        tally.add("allocator rounding", 0, rounding)
        notes.append(
            f"allocator blocks: {rounding / 2**20:.1f} MiB of 2 MiB segment rounding on parameters of 20 MiB "
            "or more, which load under max_split_size_mb:20 and are never split (plan/allocator.py)"
        )
    residual = weights_observed.hopper_block_fp8_residual(quant.method, quant.block_n, settings.capability)
    if residual and settings.has_caching_allocator:
        tally.add(weights_observed.LINE, 0, residual)
        notes.append(weights_observed.note(residual))
    rope_bytes, rope_note = (
        dsv4_rotary_cache_bytes(config, settings.release, DTYPE_BYTES[settings.runtime_dtype])
        if is_dsv4(config)
        else rotary_cache_bytes(config, settings.runtime_dtype)
    )
    if rope_bytes:
        tally.add("rotary cos/sin cache", 0, rope_bytes)
        notes.append(rope_note)
    if not settings.language_model_only and (
        tower_rope := rotary_cache_shape(settings.tower_family, config, settings.release)
    ):
        tally.add("vision/audio tower", 0, math.prod(tower_rope) * DTYPE_BYTES[settings.runtime_dtype])
        notes.append(f"plus the vision tower's rotary cos/sin cache {list(tower_rope)}, whole on every GPU")
    if is_tied(checkpoint, config):
        notes.append("tied embeddings stored once")
    if unread := unread_note(config):
        notes.append(unread)
    lines = tuple(WeightLine(g, c, b) for g, (c, b) in sorted(tally.by_group.items()))
    return WeightsEstimate(
        bytes_per_gpu=sum(line.bytes_per_gpu for line in lines),
        checkpoint_bytes=checkpoint.total_tensor_bytes,
        runtime_dtype=settings.runtime_dtype,
        lines=lines,
        skipped=tuple(sorted(tally.skipped.items())),
        notes=tuple(notes),
        unknown_layout_tensors=tuple(tally.unknown),
        param_bytes=load_order_param_bytes(checkpoint, config, settings),
    )


# What the generic rule would have made of the tensors GLM-5.3-Flash's model stores otherwise.
_GENERIC_CLASS = {"dequantized": "keep", "dropped_scale": "fp8_block_scale", "fp32_param": "float"}


def _glm5_next_added_bytes(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> dict[str, int]:
    """Bytes per GPU the model's own dtypes add over the generic rule, by weights_glm5next class
    (a dropped scale counts against the weight it belonged to)."""
    added: dict[str, int] = {}
    scratch = _Tally()
    for entry in classified(checkpoint, config):
        generic = _GENERIC_CLASS.get(entry.dtype_class)
        if generic is None or _is_skipped(entry, settings):
            continue
        delta = _entry_bytes(entry, config, settings, scratch)
        delta -= _entry_bytes(replace(entry, dtype_class=generic), config, settings, scratch)
        kind = "dequantized" if entry.dtype_class == "dropped_scale" else entry.dtype_class
        added[kind] = added.get(kind, 0) + delta
    return added


_SKIP_REASONS = {
    "host": "n-gram tables vLLM keeps in pinned host memory (counted in host RAM)",
    "rotary": "rotary caches vLLM recomputes",
    "lm_head": "lm_head (tied to the embedding)",
    "mtp": "MTP/next-token layers vLLM loads only for speculative decoding",
    "tower": "vision/audio tower (--language-model-only)",
}


@frozen
class _Entry:
    """Tensors that vLLM treats alike, summed: the per-plan work is a loop over a few dozen of these
    instead of every tensor (a checkpoint can hold 60,000)."""

    group: str
    skip: str | None
    role: str  # vocab | kv | fused_qkv | row | column | replicated | expert | unknown
    dtype_class: str  # float (takes the runtime dtype) | fp32 (fp8 scales, SSM A) | keep
    vocab_rows: int
    is_relayout: bool  # rebuilt from the config (MXFP4 experts)
    is_int4_part: bool  # GPTQ/AWQ tensors, rebuilt when Marlin repacks them
    elements: int
    checkpoint_bytes: int
    example: str


def classified(checkpoint: Checkpoint, config: ModelConfig) -> list[_Entry]:
    cached = checkpoint.extra.get("_weight_entries")
    if cached is None:
        cached = checkpoint.extra["_weight_entries"] = _classify(checkpoint, config)
    return cached


def _classify(checkpoint: Checkpoint, config: ModelConfig) -> list[_Entry]:
    """One pass over the tensors: the entries summed by kind, and (cached for _params) the same sums
    per parameter vLLM allocates."""
    tied = is_tied(checkpoint, config)
    method = config.quant_method
    sums: dict[_Key, list[int]] = {}
    names: dict[_Key, str] = {}
    params: dict[str, dict[_Key, list[int]]] = {}
    seen: dict[tuple[str, str, tuple[int, ...], bool], _Key] = {}
    for tensor in checkpoint.tensors:
        # Layers repeat: a tensor whose name differs from one already classified only in its indices
        # (every pattern matches any digits) and whose shape, dtype and MTP-ness are the same gets the
        # same key; the classification's ~20 patterns then run once per layer kind, not per tensor.
        like = (_INDICES.sub("#", tensor.name), tensor.dtype, tensor.shape, _is_mtp(tensor.name, config))
        key = seen.get(like)
        if key is None:
            key = seen[like] = _key(tensor, config, tied, method)
        names.setdefault(key, tensor.name)
        elements, num_bytes = tensor.num_elements, tensor.num_bytes
        bucket = sums.setdefault(key, [0, 0])
        bucket[0] += elements
        bucket[1] += num_bytes
        part = params.setdefault(_param_name(tensor.name), {}).setdefault(key, [0, 0])
        part[0] += elements
        part[1] += num_bytes
    checkpoint.extra["_weight_params"] = [
        [_Entry(*key, elements=e, checkpoint_bytes=b, example=name) for key, (e, b) in parts.items()]
        for name, parts in params.items()
    ]
    return [_Entry(*key, elements=e, checkpoint_bytes=b, example=names[key]) for key, (e, b) in sums.items()]


_Key = tuple[str, str | None, str, str, int, bool, bool]  # the _Entry fields before the sums
_INDICES = re.compile(r"(?<=\.)\d+(?=\.)")  # a layer's or an expert's index in a tensor's name


def _key(tensor: TensorInfo, config: ModelConfig, tied: bool, method: str | None) -> _Key:
    name = tensor.name
    module, leaf = _parts(name)
    skip = _skip_kind(name, config, tied)
    vocab = _is_vocab(tensor, module, config)
    role = "vocab" if vocab else _role(tensor, module, leaf, config)
    is_head = "lm_head" in name or name in ("output.weight", "head.weight")
    group = ("lm_head" if is_head else "embedding") if vocab else _group(name)
    glm5_next_class = weights_glm5next.dtype_class(name, tensor.dtype, config)
    if glm5_next_class:
        dtype_class = glm5_next_class  # the model's own dtypes (plan/weights_glm5next.py)
    elif method == "fp8" and name.endswith(".weight_scale_inv") and ".experts." not in name:
        dtype_class = "fp8_block_scale"  # float32 (create_fp8_scale_parameter); Marlin re-lays it
    elif method == "fp8" and name.endswith(("weight_scale_inv", "weight_scale", "input_scale")):
        dtype_class = "fp32"
    elif method in _AWQ_METHODS and leaf == "qzeros":
        dtype_class = "awq_zeros"  # int32, 8 zero points each; Machete re-lays them (machete_awq_zero_bytes)
    elif leaf == "A_log" and tensor.dtype in _FLOAT_DTYPES:
        dtype_class = "fp32"  # mamba_mixer*.py and the GDN layers create A / A_log in float32
    elif tensor.dtype == "F32" and keeps_fp32(name, config):
        dtype_class = "fp32"  # weights_dsv4: created in float32 (hyper-connections, sinks, ape, router bias)
    elif leaf == "tid2eid" and tensor.dtype == "I64":
        dtype_class = "int32"  # deepseek_v4 nvidia/model.py: the hash-MoE table is int32 in vLLM
    else:
        dtype_class = "float" if tensor.dtype in _FLOAT_DTYPES else "keep"
    relayout = method in ("mxfp4", "gpt_oss_mxfp4") and ".experts." in name and leaf in _MXFP4_LEAVES
    relayout = relayout or (is_dsv4_fp4(config) and bool(re.search(_DSV4_EXPERT, name)))
    int4 = method in _INT4_METHODS and name.endswith(_INT4_LEAVES)
    return (group, skip, role, dtype_class, tensor.shape[0] if vocab else 0, relayout, int4)


def is_host_table(name: str) -> bool:
    return (".engram.embed." in name or ".ple_embedding.ngram_embedding." in name) and bool(
        re.search(_HOST_TABLES, name)
    )


def _skip_kind(name: str, config: ModelConfig, tied: bool) -> str | None:
    if name.endswith(_ROTARY_CACHES):
        return "rotary"
    if is_host_table(name):
        return "host"
    if tied and (name.endswith("lm_head.weight") or name == "output.weight"):
        return "lm_head"
    if _is_mtp(name, config):
        return "mtp"
    if any(part in name for part in _TOWER_PARTS) or name.startswith(_TOWER_PREFIXES):
        return "tower"
    return None


def _entry_bytes(entry: _Entry, config: ModelConfig, settings: WeightSettings, tally: _Tally) -> int:
    if entry.dtype_class == "dropped_scale":
        return 0  # the scale of a weight dequantized at load: no parameter holds it
    if entry.dtype_class in ("fp32", "int32", "fp8_block_scale", "fp32_param"):
        num_bytes = entry.elements * 4  # fp8_utils.create_fp8_scale_parameter defaults to float32
    elif entry.dtype_class == "awq_zeros" and uses_machete(settings):
        num_bytes = entry.elements * 8 * DTYPE_BYTES[settings.runtime_dtype]
    elif entry.dtype_class in ("float", "dequantized"):
        num_bytes = entry.elements * DTYPE_BYTES[settings.runtime_dtype]
    else:
        num_bytes = entry.checkpoint_bytes
    tp = settings.tensor_parallel_size
    if entry.skip == "tower" and settings.is_tower_whole:
        return num_bytes
    if entry.role == "vocab":
        rows_per_rank = pad_to(entry.vocab_rows, settings.vocab_padding_size) // tp
        return num_bytes // entry.vocab_rows * rows_per_rank
    if tp == 1:
        return num_bytes
    fraction = _ROLE_FRACTIONS[entry.role](config, tp)
    if fraction is None:
        tally.unknown.append(entry.example)
        return num_bytes
    numerator, denominator = fraction
    return math.ceil(num_bytes * numerator / denominator)


# vLLM builds one parameter from several checkpoint tensors (linear.py QKVParallelLinear,
# MergedColumnParallelLinear; FusedMoE stacks every expert's gate/up and down).
_FUSED_INTO = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj"}
_FUSED_INTO |= {"gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "w1": "w13", "w3": "w13"}
_EXPERT_INDEX = re.compile(r"\.experts\.\d+\.")


def _param_name(name: str) -> str:
    name = _EXPERT_INDEX.sub(".experts.", name)
    pieces = name.split(".")
    if len(pieces) >= 2 and pieces[-2] in _FUSED_INTO:
        pieces[-2] = _FUSED_INTO[pieces[-2]]
    return ".".join(pieces)


def _params(checkpoint: Checkpoint, config: ModelConfig) -> list[list[_Entry]]:
    """The checkpoint's tensors grouped into the parameters vLLM allocates (built by _classify)."""
    if "_weight_params" not in checkpoint.extra:
        checkpoint.extra.pop("_weight_entries", None)
        classified(checkpoint, config)
    params: list[list[_Entry]] = checkpoint.extra["_weight_params"]
    return params


# Module construction order inside a decoder layer (the attention or mixer block, then the MLP, then
# the layer's norms: Qwen3DecoderLayer, LlamaDecoderLayer, MambaDecoderLayer __init__), which is the
# order vLLM allocates parameters in: initialize_model builds every module on the GPU before loading.
_BUILD_RANK = (("embed", 0), ("self_attn", 1), ("attn", 1), ("mixer", 1), ("mlp", 2), ("experts", 2), ("norm", 3))


def _build_order(name: str) -> tuple[int, int, str]:
    match = _LAYER_INDEX.search(name)
    layer = int(match.group(1)) if match else (-1 if "embed" in name else 1 << 30)
    return layer, next((rank for key, rank in _BUILD_RANK if key in name), 2), name


def load_order_param_bytes(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> tuple[int, ...]:
    """Bytes per GPU of each parameter vLLM allocates from the checkpoint, in construction order
    (layers by index, attention before MLP before norms). Layouts rebuilt after loading (MXFP4
    experts, Marlin int4) are left out: they are counted where they are built."""
    return _load_order(checkpoint, config, settings)[0]


def _load_order(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> tuple[tuple[int, ...], int]:
    """The parameters' bytes in construction order and what the caching allocator adds to them; cached
    per checkpoint and weight settings, so plans that vary only the serving settings (fit's sweep)
    reuse both."""
    quant = _Quant.from_config(config, settings)
    key = _load_order_key(settings, quant)
    cache: dict[tuple[object, ...], tuple[tuple[int, ...], int]]
    cache = checkpoint.extra.setdefault("_load_order_param_bytes", {})
    if key not in cache:
        scratch = _Tally()
        sizes = tuple(
            sum(_entry_bytes(e, config, settings, scratch) for e in parts)
            for parts in _params_in_build_order(checkpoint, config)
            if not any(_is_skipped(e, settings) for e in parts)
            and not any(e.is_relayout or (e.is_int4_part and quant.uses_marlin) or quant.relays(e) for e in parts)
        )
        cache[key] = (sizes, sum(load_block_bytes(size) - size for size in sizes))
    return cache[key]


def _load_order_key(settings: WeightSettings, quant: _Quant) -> tuple[object, ...]:
    """What _load_order's sizes depend on: the settings but the GPU's capability and the release, and
    of those only what _entry_bytes and the re-layout checks read (Machete's zero points, Marlin's
    int4 and FP8 layouts), so fit's GPUs of several capabilities share one entry. A new per-capability
    layout in _entry_bytes must add its own flag here. Machete's zero points (awq_zeros) and Marlin's
    int4 parts exist only under the int4 methods, so other checkpoints share one entry across them."""
    plain = replace(settings, capability=(0, 0), release="")
    return plain, quant.is_int4 and uses_machete(settings), quant.is_int4 and quant.uses_marlin, quant.uses_marlin_fp8


def _params_in_build_order(checkpoint: Checkpoint, config: ModelConfig) -> list[list[_Entry]]:
    """_params sorted by _build_order of each parameter's first tensor (tensor names are unique, so
    the order is total); sorted once per checkpoint."""
    ordered: list[list[_Entry]] | None = checkpoint.extra.get("_weight_params_in_build_order")
    if ordered is None:
        ordered = sorted(_params(checkpoint, config), key=lambda parts: _build_order(parts[0].example))
        checkpoint.extra["_weight_params_in_build_order"] = ordered
    return ordered


def _is_skipped(entry: _Entry, settings: WeightSettings) -> bool:
    if entry.skip is None or (entry.skip == "tower" and not settings.language_model_only):
        return False
    return entry.skip in _SKIP_REASONS


def _allocator_rounding(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> int:
    """What the caching allocator adds to each parameter's bytes (allocator.load_block_bytes); the
    layouts rebuilt from the config (MXFP4 experts) add theirs where they are built."""
    return _load_order(checkpoint, config, settings)[1]


def is_tied(checkpoint: Checkpoint, config: ModelConfig) -> bool:
    """vLLM ties when the config says so; a config silent on it falls back to the HF default (True)
    only when the checkpoint ships no separate lm_head, which is what loading would then need."""
    declared = config.tie_word_embeddings
    if declared is not None:
        return declared
    return not any(t.name.endswith("lm_head.weight") for t in checkpoint.tensors)


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")


def _is_mtp(name: str, config: ModelConfig) -> bool:
    """models/utils.py get_spec_layer_idx_from_weight_name: layers past num_hidden_layers are MTP;
    Qwen3-Next/3.5 and Nemotron-H keep them under an `mtp.` prefix."""
    if name.startswith(("mtp.", "model.mtp.")) or ".mtp." in name:
        return True
    match = _LAYER_INDEX.search(name)
    return bool(
        match
        and config.num_layers
        and int(match.group(1)) >= config.num_layers
        and "vision" not in name
        and "visual" not in name
        and "audio" not in name
    )


def _parts(name: str) -> tuple[str, str]:
    """(module, leaf): 'model.layers.0.self_attn.q_proj.weight' -> ('q_proj', 'weight')."""
    pieces = name.split(".")
    if len(pieces) == 1:
        return "", pieces[0]
    return pieces[-2], pieces[-1]


def _is_vocab(tensor: TensorInfo, module: str, config: ModelConfig) -> bool:
    if tensor.name.endswith("lm_head.weight") or tensor.name in ("output.weight", "head.weight"):
        return True
    vocab = config.vocab_size
    return (
        module in ("embed_tokens", "embeddings", "wte", "word_embeddings", "tok_embeddings", "embed")
        and len(tensor.shape) == 2
        and vocab > 0
        and tensor.shape[0] in (vocab, pad_to(vocab, 64))
    )


def pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _group(name: str) -> str:
    if ".experts." in name or name.endswith((".experts.gate_up_proj", ".experts.down_proj")):
        return "experts"
    if "norm" in name:
        return "norms"
    if any(part in name for part in _TOWER_PARTS):
        return "vision/audio tower"
    if any(k in name for k in ("attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj", "qkv")):
        return "attention"
    if any(k in name for k in ("mixer", "ssm", "conv1d", "A_log", "linear_attn")):
        return "state-space / linear attention"
    if any(k in name for k in ("mlp", "feed_forward", "ffn", "fc1", "fc2")):
        return "mlp"
    return "other"


def _role(tensor: TensorInfo, module: str, leaf: str, config: ModelConfig) -> str:
    """How tensor parallelism splits this tensor (model_executor/layers/linear.py classes)."""
    name = tensor.name
    for needles, pattern, role in _NAMED_ROLES:
        if any(needle in name for needle in needles) and re.search(pattern, name):
            return role
    if "norm" in module or "norm" in leaf or module in _REPLICATED or leaf in _REPLICATED:
        return "replicated"
    if _is_router(tensor.name, module, config):
        return "replicated"
    if ".experts." in tensor.name or "experts" in module:
        # FusedMoE shards the intermediate dim; w2's bias is [E, hidden] and stays whole.
        return "replicated" if leaf in ("down_proj_bias", "w2_bias") else "sharded"
    if module in _KV:
        return "kv"
    if module in _FUSED_QKV:
        return "fused_qkv"
    if module in _ROW:
        return "replicated" if leaf == "bias" else "sharded"
    if module in _COLUMN or leaf in _SPLIT_PARAMS or module in _SPLIT_PARAMS:
        return "sharded"
    if len(tensor.shape) <= 1 and leaf in ("bias", "weight", "scale"):
        return "replicated"  # stray vectors (biases of replicated layers, scalars) stay whole
    return "unknown"


_ROLE_FRACTIONS: dict[str, Callable[[ModelConfig, int], tuple[int, int] | None]] = {
    "replicated": lambda config, tp: (1, 1),
    "sharded": lambda config, tp: (1, tp),
    "kv": lambda config, tp: (1, min(tp, max(config.num_kv_heads, 1))),
    "fused_qkv": lambda config, tp: _fused_qkv_fraction(config, tp),
    "unknown": lambda config, tp: None,
}


def _is_router(name: str, module: str, config: ModelConfig) -> bool:
    return config.is_moe and module in ("gate", "router") and not name.endswith("gate_proj.weight")


def _fused_qkv_fraction(config: ModelConfig, tp: int) -> tuple[int, int]:
    heads, kv = config.num_heads, max(config.num_kv_heads, 1)
    per_rank = heads // tp + 2 * max(kv // tp, 1)
    return per_rank, heads + 2 * kv


def rotary_cache_bytes(config: ModelConfig, runtime_dtype: str) -> tuple[int, str]:
    """rotary_embedding/base.py registers cos_sin_cache [positions, rotary_dim] in the model dtype,
    shared between layers with equal settings (_ROPE_DICT). YaRN caches max_position x factor rows."""
    if config.is_mla or config.qk_rope_head_dim:
        rotary_dim = config.qk_rope_head_dim  # MLA and DeepSeek-V4: RoPE on the rope slice only
    else:
        rotary_dim = int(config.head_dim * config.partial_rotary_factor)
    positions = rope_cache_positions(config)
    if not rotary_dim or not positions or config.rope_theta is None and not config.rope_parameters:
        return 0, ""
    num_caches = 2 if config.get("rope_local_base_freq") or config.rope_parameters.get("sliding_attention") else 1
    size = num_caches * positions * rotary_dim * DTYPE_BYTES[runtime_dtype]
    return size, f"plus {num_caches} rotary cos/sin cache{'s' if num_caches > 1 else ''} [{positions}, {rotary_dim}]"


def rope_cache_positions(config: ModelConfig) -> int:
    params = config.rope_parameters
    rope_type = params.get("rope_type", "default")
    if rope_type in ("yarn", "deepseek_yarn"):
        original = params.get("original_max_position_embeddings") or config.max_position_embeddings or 0
        return int(original * float(params.get("factor", 1)))
    return config.max_position_embeddings or 0


# --- quantized layouts -----------------------------------------------------------------------


@frozen
class _Quant:
    method: str | None
    group_size: int
    capability: tuple[int, int]
    block_n: int = 0  # fp8 weight_block_size[0], 0 without block quantization

    @classmethod
    def from_config(cls, config: ModelConfig, settings: WeightSettings) -> _Quant:
        q = config.quantization_config or {}
        group = q.get("group_size") or q.get("q_group_size") or -1
        block = q.get("weight_block_size") or [0]
        return cls(config.quant_method, int(group), settings.capability, int(block[0]))

    @property
    def is_int4(self) -> bool:
        return self.method in _INT4_METHODS

    @property
    def is_mxfp4(self) -> bool:
        return self.method in ("mxfp4", "gpt_oss_mxfp4")

    @property
    def uses_marlin_fp8(self) -> bool:
        """kernels/linear/__init__.py 0.29.0:435-447 _POSSIBLE_FP8_BLOCK_KERNELS: DeepGEMM, CUTLASS
        block FP8 and B12x need sm90+ / sm120; on 7.5 <= cc < 9.0 block FP8 linears take
        MarlinFP8ScaledMMLinearKernel (scaled_mm/marlin.py 0.29.0:36-46)."""
        return self.method == "fp8" and self.block_n > 0 and (7, 5) <= self.capability < (9, 0)

    def relays(self, entry: _Entry) -> bool:
        return entry.dtype_class == "fp8_block_scale" and self.uses_marlin_fp8

    @property
    def uses_marlin(self) -> bool:
        # kernels/linear/__init__.py tries CutlassW4A8, Machete (Hopper only), then Marlin: below
        # cc 9.0 GPTQ/AWQ land on Marlin, which pads odd shapes (marlin_padded_nk).
        return self.capability < (9, 0)

    def add_relayout(
        self, checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings, tally: _Tally
    ) -> list[str]:
        if is_dsv4_fp4(config):
            return _dsv4_fp4_experts(checkpoint, config, settings, tally)
        if self.is_mxfp4:
            return _mxfp4_experts(checkpoint, config, settings, tally)
        if self.is_int4 and self.uses_marlin:
            return _marlin_int4(checkpoint, config, settings, tally, self)
        if self.uses_marlin_fp8:
            return _marlin_fp8_scales(checkpoint, config, settings, tally, self)
        if (
            self.method in _AWQ_METHODS
            and uses_machete(settings)
            and settings.has_caching_allocator
            and not config.is_moe
        ):
            return _machete_awq_blocks(checkpoint, config, settings, tally, self)
        return []


_MXFP4_LEAVES = (
    "gate_up_proj_blocks",
    "gate_up_proj_scales",
    "gate_up_proj_bias",
    "down_proj_blocks",
    "down_proj_scales",
    "down_proj_bias",
)
_INT4_LEAVES = (".qweight", ".qzeros", ".scales", ".g_idx")
_INT4_METHODS = ("gptq", "awq", "gptq_marlin", "awq_marlin", "auto_gptq", "auto_awq")
_AWQ_METHODS = ("awq", "awq_marlin", "auto_awq")


def uses_machete(settings: WeightSettings) -> bool:
    """kernels/linear/__init__.py 0.29.0:479-489 _POSSIBLE_KERNELS: on compute capability 9.0 the
    int4 linears take MacheteLinearKernel (CutlassW4A8 needs fp8 activations; Machete takes uint4
    with zero points and uint4b8 without: machete_utils.py 0.29.0:12-16). Its
    process_weights_after_loading (mixed_precision/machete.py 0.29.0:70-124) keeps the packed weight
    and the scales, and turns AWQ's int32-packed zero points into -scale x zero in the activation
    dtype: [K/g, N] x 2 B instead of [K/g, N/8] x 4 B."""
    return settings.capability == (9, 0)


def mxfp4_backend(capability: tuple[int, int]) -> tuple[str, int, int]:
    """(backend, intermediate alignment, hidden alignment) as fused_moe/oracle/mxfp4.py picks them for
    gpt-oss on CUDA: TRTLLM on SM100, Triton (needs triton_kernels) on 9.0 <= cc < 13, else Marlin
    (cc >= 7.5). Alignments from mxfp4_round_up_hidden_size_and_intermediate_size."""
    if capability[0] == 10:
        return "FLASHINFER_TRTLLM_MXFP4_BF16", 128, 256
    if (9, 0) <= capability < (13, 0):
        return "TRITON", 64, 1
    return "MARLIN", 128, 256


def _mxfp4_experts(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings, tally: _Tally) -> list[str]:
    layers = {
        int(m.group(1)) for t in checkpoint.tensors if ".experts." in t.name for m in [_LAYER_INDEX.search(t.name)] if m
    }
    experts, hidden = config.num_experts, config.hidden_size
    backend, align_i, align_h = mxfp4_backend(settings.capability)
    per_rank = config.moe_intermediate_size // settings.tensor_parallel_size
    inter, hid = pad_to(per_rank, align_i), pad_to(hidden, align_h)
    if backend == "TRITON":
        per_expert = _hopper_triton_expert_bytes(inter, hid)
    else:
        # mxfp4.py create_weights: uint8 blocks (2 values a byte), uint8 scales (one per 32), bf16 biases.
        per_expert = 2 * inter * hid // 2 + 2 * inter * hid // 32 + hid * inter // 2 + hid * inter // 32
        per_expert += 2 * 2 * inter + 2 * hid
    per_layer = experts * per_expert
    if backend == "TRITON":
        per_layer += _hopper_triton_rounding(experts, inter, hid)
    checkpoint_bytes = sum(
        t.num_bytes for t in checkpoint.tensors if ".experts." in t.name and t.name.rsplit(".", 1)[-1] in _MXFP4_LEAVES
    )
    tally.add("experts", checkpoint_bytes, per_layer * len(layers))
    return [
        f"MXFP4 experts re-laid for the {backend} MoE backend: intermediate {per_rank} -> {inter}, "
        f"hidden {hidden} -> {hid} per rank"
    ]


# DeepSeek-V4 / V4.1 routed experts: layers.N.ffn.experts.E.w{1,2,3}.{weight,scale} (MTP layers are mtp.N).
_DSV4_EXPERT = r"^(model\.)?layers\.\d+\.ffn\.experts\.\d+\.w[123]\.(weight|scale)$"  # compiled on first use
_DSV4_MODEL_TYPES = ("deepseek_v4", "deepseek_v41", "deepseek_v41_text")


def is_dsv4_fp4(config: ModelConfig) -> bool:
    """models/deepseek_v4/quant_config.py DeepseekV4FP8Config (0.29-0.33): an fp8 checkpoint of a
    DeepSeek-V4 model whose expert_dtype is fp4 (the default) sends its routed experts to
    Mxfp4MoEMethod."""
    q = config.quantization_config or {}
    return (
        config.text_model_type in _DSV4_MODEL_TYPES
        and config.quant_method == "fp8"
        and q.get("expert_dtype", "fp4") == "fp4"
    )


def dsv4_mxfp4_backend(capability: tuple[int, int], release: str) -> tuple[str, int, int]:
    """(backend, intermediate alignment, hidden alignment) of fused_moe/oracle/mxfp4.py
    select_deepseek_v4_mxfp4_moe_backend on CUDA: FLASHINFER_TRTLLM_MXFP4_MXFP8 on SM100
    (trtllm_mxfp4_moe.py 0.30.0:125), DEEPGEMM_MXFP4, then MARLIN (_get_priority_backends 0.29.0:344-357,
    0.30.0:357-373, the same in 0.31); from 0.32 HUMMING is moved ahead of Marlin on SM90
    (quantization/utils/humming/priority.py 0.32.0:11-48). Alignments from
    mxfp4_round_up_hidden_size_and_intermediate_size (0.30.0:723-778): TRTLLM and Marlin round the
    per-rank intermediate to 128 and the hidden size to 256; Humming falls to the last branch (the
    intermediate to 64)."""
    from apron.engine.facts import version_key

    if capability[0] == 10:
        return "FLASHINFER_TRTLLM_MXFP4_MXFP8", 128, 256
    if capability == (9, 0) and version_key(release) >= version_key("0.32.0"):
        return "HUMMING", 64, 1
    return "MARLIN", 128, 256


def _dsv4_fp4_experts(
    checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings, tally: _Tally
) -> list[str]:
    """quantization/mxfp4.py Mxfp4MoEMethod.create_weights after maybe_roundup_sizes: per expert
    w13 [2 I, H/2] and w2 [H, I/2] uint8 (two fp4 values a byte) with one e8m0 scale per 32 values,
    at the backend's padded per-rank I and H. Marlin's repack and TRTLLM's shuffle keep those byte
    counts (prepare_moe_mxfp4_layer_for_marlin keeps e8m0 scales: marlin_utils_fp4.py 0.30.0:578-675)."""
    names = [t for t in checkpoint.tensors if re.search(_DSV4_EXPERT, t.name)]
    layers = {int(m.group(1)) for t in names for m in [_LAYER_INDEX.search(t.name)] if m}
    experts, hidden = config.num_experts, config.hidden_size
    backend, align_i, align_h = dsv4_mxfp4_backend(settings.capability, settings.release)
    per_rank = config.moe_intermediate_size // settings.tensor_parallel_size
    inter, hid = pad_to(per_rank, align_i), pad_to(hidden, align_h)
    stacked: tuple[int, ...] = (
        experts * 2 * inter * hid // 2,  # w13
        experts * 2 * inter * hid // 32,  # its scales
        experts * hid * inter // 2,  # w2
        experts * hid * inter // 32,
    )
    if backend == "HUMMING":
        stacked = humming_stacked_bytes(experts, inter, hid, settings.release)
    tally.add("experts", sum(t.num_bytes for t in names), sum(stacked) * len(layers))
    if settings.has_caching_allocator:  # each stacked parameter keeps its 2 MiB-rounded segment
        tally.add("allocator rounding", 0, sum(load_block_bytes(n) - n for n in stacked) * len(layers))
    note = f"MXFP4 experts laid out for the {backend} MoE backend: intermediate {per_rank} -> {inter}, hidden {hidden} -> {hid} per rank"
    if backend == "HUMMING":
        note += (
            f"; Humming pads each sublayer to N % 256, K % 128 (w13 {2 * inter} -> {pad_to(2 * inter, 256)}, "
            f"w2 K {inter} -> {pad_to(inter, 128)}; humming/moe.py 0.32.0:411-412)"
        )
    return [note]


def _hopper_triton_expert_bytes(inter: int, hidden: int) -> int:
    """One expert after the OAI Triton kernels' re-layout on Hopper (fused_moe/oracle/mxfp4.py
    convert_gpt_oss_weight_to_mxfp4_moe_kernel_format, 0.29.0:1233-1262, the same through 0.33):
    - biases become float32 (0.29.0:1236-1239);
    - scales: quantization/utils/mxfp4_utils.py _swizzle_mxfp4 pads the scale groups K to 0 mod 4 on
      cc 9.0 (0.29.0:84-89), then triton_kernels' HopperMXScaleLayout (num_warps 8) pads the rows to
      SWIZZLE_ALIGN_M = 2 * 8 * 2 * 8 = 256 and K to even (third_party/triton_kernels/tensor_details/
      layout_details/hopper_scale.py:25-29);
    - values: HopperMXValueLayout (mma_version 3) pads rows to 16 and the packed K/2 to 32
      (hopper_value.py:120-148); _pack_bits keeps the byte count. The old parameters are deleted."""
    w13_rows, w2_rows = 2 * inter, hidden
    values = pad_to(w13_rows, 16) * pad_to(hidden // 2, 32) + pad_to(w2_rows, 16) * pad_to(inter // 2, 32)
    scales = pad_to(w13_rows, 256) * pad_to(pad_to(hidden // 32, 4), 2)
    scales += pad_to(w2_rows, 256) * pad_to(pad_to(inter // 32, 4), 2)
    return values + scales + 4 * (w13_rows + w2_rows)


def _hopper_triton_rounding(experts: int, inter: int, hidden: int) -> int:
    """The re-laid tensors are new allocations under the load's split limit: each keeps its whole
    2 MiB-rounded segment (allocator.load_block_bytes). Four stacked tensors a layer plus fp32 biases."""
    values_13 = experts * pad_to(2 * inter, 16) * pad_to(hidden // 2, 32)
    values_2 = experts * pad_to(hidden, 16) * pad_to(inter // 2, 32)
    scales_13 = experts * pad_to(2 * inter, 256) * pad_to(pad_to(hidden // 32, 4), 2)
    scales_2 = experts * pad_to(hidden, 256) * pad_to(pad_to(inter // 32, 4), 2)
    sizes = (values_13, values_2, scales_13, scales_2, experts * 4 * 2 * inter, experts * 4 * hidden)
    return sum(load_block_bytes(n) - n for n in sizes)


def _marlin_int4(
    checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings, tally: _Tally, quant: _Quant
) -> list[str]:
    """GPTQ/AWQ on Marlin: qweight, scales (and AWQ's zero points) per rank, padded by marlin_padded_nk.
    Repacking keeps the byte count of the padded shape; GPTQ g_idx without act-order is dropped."""
    prefixes = sorted({t.name.rsplit(".", 1)[0] for t in checkpoint.tensors if t.name.endswith(".qweight")})
    padded_layers = 0
    for prefix in prefixes:
        parts = {
            leaf: checkpoint.tensors_by_name.get(f"{prefix}.{leaf}")
            for leaf in ("qweight", "qzeros", "scales", "g_idx")
        }
        ckpt_bytes = sum(t.num_bytes for t in parts.values() if t is not None)
        gpu_bytes, padded = _marlin_layer_bytes(prefix, parts, config, settings, quant)
        padded_layers += padded
        tally.add(_group(prefix + ".weight"), ckpt_bytes, gpu_bytes)
    note = "GPTQ/AWQ weights re-packed for Marlin"
    return [note + (f" ({padded_layers} layers padded by marlin_padded_nk)" if padded_layers else "")]


def _marlin_layer_bytes(
    prefix: str, parts: dict[str, Any], config: ModelConfig, settings: WeightSettings, quant: _Quant
) -> tuple[int, int]:
    scales, qweight = parts["scales"], parts["qweight"]
    # Logical (K, N): GPTQ qweight is [K/8, N], AWQ qweight is [K, N/8]; scales are [K/g, N] in both.
    n = scales.shape[1]
    k = qweight.shape[0] * 8 if qweight.shape[1] == n else qweight.shape[0]
    module, tp = prefix.rsplit(".", 1)[-1], settings.tensor_parallel_size
    if module in _ROW:
        k //= tp
    elif module in _KV:
        n //= min(tp, max(config.num_kv_heads, 1))
    else:
        n //= tp
    pn, pk = marlin_padded_nk(n, k, quant.group_size)
    groups = pk // quant.group_size if quant.group_size > 0 else 1
    total = pk * pn // 2 + groups * pn * DTYPE_BYTES[settings.runtime_dtype]
    if quant.method in ("awq", "awq_marlin", "auto_awq"):
        total += groups * pn // 8 * 4  # awq_marlin keeps int32 zero points [groups, N/8]
    return total, int((pn, pk) != (n, k))


def _marlin_fp8_scales(
    checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings, tally: _Tally, quant: _Quant
) -> list[str]:
    """quantization/utils/marlin_utils_fp8.py prepare_fp8_layer_for_marlin (0.29.0:107-221): the
    128x128 block scales become per-group scales in the model dtype, [K/128, N] per rank (each
    block's scale repeated over its 128 output columns), padded like the weight by marlin_padded_nk;
    the repacked fp8 weight keeps its bytes where no padding applies."""
    scales = [
        t
        for t in checkpoint.tensors
        if t.name.endswith(".weight_scale_inv")
        and ".experts." not in t.name
        and not weights_glm5next.is_dropped_scale(t.name, config)
    ]
    tp, dtype_bytes = settings.tensor_parallel_size, DTYPE_BYTES[settings.runtime_dtype]
    for scale in scales:
        weight = checkpoint.tensors_by_name.get(scale.name.removesuffix("_scale_inv"))
        if weight is None or len(weight.shape) != 2:
            continue
        n, k = weight.shape
        module = scale.name.rsplit(".", 2)[-2]
        if module in _ROW:
            k //= tp
        elif module in _KV:
            n //= min(tp, max(config.num_kv_heads, 1))
        elif module not in _REPLICATED and tp > 1:
            n //= tp
        pn, pk = marlin_padded_nk(n, k, quant.block_n)
        tally.add(_group(scale.name), scale.num_bytes, pk // quant.block_n * pn * dtype_bytes)
    notes = [f"block FP8 on Marlin: weight scales expanded to per-group {settings.runtime_dtype} [K/128, N]"]
    if config.is_moe:  # the experts' own Marlin re-layout runs in the same pass and is not replayed
        notes.append("the allocator blocks of Marlin's repack are not replayed for a MoE model")
    elif settings.has_caching_allocator:
        blocks = marlin_fp8_repack_blocks(checkpoint, config, settings)
        tally.add("allocator rounding", 0, blocks)
        if blocks:
            notes.append(
                f"allocator blocks of Marlin's repack: {blocks / 2**20:.1f} MiB of 20 MiB-segment remainders of "
                "1 MiB or less that the re-laid weights keep (replayed in module order, plan/weights_repack.py)"
            )
    return notes


# Where a parameter sits in its block's __init__ (Qwen3Attention, LlamaAttention: qkv_proj, o_proj, the
# rotary embedding, then the rest; Qwen3MLP, LlamaMLP: gate_up_proj, down_proj): the order vLLM
# allocates them in and the order process_weights_after_loading visits them (model.named_modules()).
# Other projections keep their name order, which only approximates their __init__ order.
_IN_BLOCK_RANK = {"qkv_proj": 0, "o_proj": 1, "rotary_emb": 2, "gate_up_proj": 0, "down_proj": 1}


def _construction(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> list[tuple[str, int]]:
    """(parameter name, bytes per GPU as built) in the order initialize_model allocates them, the
    rotary cos/sin cache (get_rope in the first layer's attention) included. AWQ's zero points are
    built int32 [K/g, N/8] (auto_awq.py 0.30.0:464-475) whatever the kernel makes of them later."""

    def order(item: tuple[str, int]) -> tuple[int, int, int, str]:
        layer, rank, name = _build_order(item[0])
        return layer, rank, _IN_BLOCK_RANK.get(item[0].rsplit(".", 2)[-2], 3), name

    scratch = _Tally()
    built = []
    for parts in _params(checkpoint, config):
        if any(_is_skipped(e, settings) for e in parts):
            continue
        parts = [replace(e, dtype_class="keep") if e.dtype_class == "awq_zeros" else e for e in parts]
        built.append((_param_name(parts[0].example), sum(_entry_bytes(e, config, settings, scratch) for e in parts)))
    rope_bytes, _ = rotary_cache_bytes(config, settings.runtime_dtype)
    first = min((_build_order(name)[0] for name, _ in built if _LAYER_INDEX.search(name)), default=0)
    if rope_bytes:
        built.append((f"model.layers.{first}.self_attn.rotary_emb.cos_sin_cache", rope_bytes))
    return sorted(built, key=order)


def marlin_fp8_repack_blocks(checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings) -> int:
    """The whole-block remainders Marlin's FP8 repack leaves with the re-laid weights
    (weights_repack.marlin_fp8_events), replayed over the model's own parameters; cached per weight
    settings."""
    cache: dict[WeightSettings, int] = checkpoint.extra.setdefault("_marlin_fp8_repack_blocks", {})
    if settings not in cache:
        construction = _construction(checkpoint, config, settings)
        sizes = dict(construction)
        block = (config.quantization_config or {}).get("weight_block_size") or [128, 128]
        process: list[Event] = []
        for name, num_bytes in construction:
            scale = name.removesuffix(".weight") + ".weight_scale_inv"
            if not name.endswith(".weight") or scale not in sizes or ".experts." in name:
                continue
            k = _per_rank_k(checkpoint, name, settings.tensor_parallel_size)
            if not k:
                continue
            n = num_bytes // k
            pn, pk = marlin_padded_nk(n, k, int(block[1]))
            linear = MarlinFp8Linear(name, scale, n, k, pn, pk, int(block[1]), DTYPE_BYTES[settings.runtime_dtype])
            process += marlin_fp8_events(linear, len(process))  # the index only keeps the tags unique
        cache[settings] = repack_block_bytes(construction, process)
    return cache[settings]


def _machete_awq_blocks(
    checkpoint: Checkpoint, config: ModelConfig, settings: WeightSettings, tally: _Tally, quant: _Quant
) -> list[str]:
    """AWQ on Machete (cc 9.0): the conversion to the standard layout and Machete's prepack, replayed
    over the model's parameters (weights_repack.machete_awq_events); cached per weight settings."""
    cache: dict[WeightSettings, int] = checkpoint.extra.setdefault("_machete_awq_blocks", {})
    if settings not in cache:
        construction = _construction(checkpoint, config, settings)
        sizes = dict(construction)
        process: list[Event] = []
        for name, num_bytes in construction:
            zeros = name.removesuffix(".qweight") + ".qzeros"
            if not name.endswith(".qweight") or zeros not in sizes or ".experts." in name:
                continue
            k = _per_rank_k(checkpoint, name, settings.tensor_parallel_size, dim=0)
            if not k:
                continue
            linear = MacheteAwqLinear(
                name, zeros, k, 2 * num_bytes // k, quant.group_size, DTYPE_BYTES[settings.runtime_dtype]
            )
            process += machete_awq_events(linear, len(process))  # the index only keeps the tags unique
        cache[settings] = repack_block_bytes(construction, process)
    blocks = cache[settings]
    if not blocks:
        return []
    tally.add("allocator rounding", 0, blocks)
    return [
        f"allocator blocks of the AWQ conversion and Machete's prepack: {blocks / 2**20:.1f} MiB the kept tensors "
        "hold beyond their own segments (whole 20 MiB-segment remainders, cached transient blocks under "
        "request + 20 MiB), replayed in module order (plan/weights_repack.py)"
    ]


def _per_rank_k(checkpoint: Checkpoint, param: str, tp: int, dim: int = 1) -> int | None:
    """The input size per rank of a linear's weight (dimension DIM of its checkpoint tensor: 1 for
    [N, K] weights, 0 for AWQ's [K, N/8] qweight): a row-parallel layer splits it."""
    module = param.rsplit(".", 2)[-2]
    first = {"qkv_proj": "q_proj", "gate_up_proj": "gate_proj"}.get(module, module)
    by_name = checkpoint.tensors_by_name
    tensor = by_name.get(param.replace(f".{module}.", f".{first}.")) or by_name.get(param)
    if tensor is None or len(tensor.shape) != 2:
        return None  # a fusion this does not know: the linear is left out of the replay
    k = tensor.shape[dim]
    return k // tp if module in _ROW else k


def marlin_padded_nk(size_n: int, size_k: int, group_size: int = -1) -> tuple[int, int]:
    """quantization/utils/marlin_utils.py marlin_padded_nk: Marlin needs (n%64, k%128) or
    (n%128, k%64); other shapes are zero-padded to the cheaper family, K kept a multiple of the group."""
    group = group_size if group_size > 0 else 1
    candidates = (
        (pad_to(size_n, 64), pad_to(size_k, math.lcm(128, group))),
        (pad_to(size_n, 128), pad_to(size_k, math.lcm(64, group))),
    )
    return min(candidates, key=lambda nk: (nk[0] * nk[1], nk[0] + nk[1]))
