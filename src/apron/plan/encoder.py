"""Moment (d): a multimodal model's vision encoder on vLLM's dummy profiling batch.

Before the language-model forward, the V2 runner's profile_run encodes a dummy batch of the
modality with the most tokens per item (v1/worker/gpu/mm/encoder_runner.py profile_encoder_cache,
the same in 0.29-0.33) and keeps the outputs in the encoder cache until profile_run ends, so they sit
under the forward pass and the sampler too. The batch is sized by multimodal/encoder_budget.py
(0.33.0 MultiModalBudget; 0.29.0 the same algorithm):

    budget = max(max_num_batched_tokens, largest tokens per item)    # compute_mm_encoder_budget
    items  = max(1, min(budget // tokens, max_num_seqs * max(1, min(limit, max_model_len // tokens))))

Tokens per item and patches per item come from each family's processing info and the checkpoint's
preprocessor_config.json / processor_config.json. The encoders run eagerly (compile_mm_encoder and
cudagraph_mm_encoder default to False), so the live set is the op outputs of one block plus what the
tower keeps across blocks. Vision attention uses variable-length FlashAttention on CUDA: no
patches-squared term.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from apron.engine.facts import EngineFacts
from apron.errors import BadInput
from apron.frozen import field, frozen
from apron.plan.activation import Buffer, Moment
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings
from apron.plan.towers import TOWERS
from apron.plan.weights import DTYPE_BYTES

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# config/multimodal.py get_limit_per_prompt: an unspecified modality is allowed 999 items.
DEFAULT_LIMIT = 999


@frozen
class Tower:
    """The vision transformer that encodes one modality's patches (shapes per rank)."""

    hidden: int
    intermediate: int
    heads: int
    patch_input: int  # values per patch fed to the patch embedding (channels x temporal x patch^2)
    merge: int = 1  # spatial merge: merge^2 patches -> one token
    is_gated: bool = False  # SwiGLU-style MLP (gate and up outputs live together)
    is_rotary_fp32: bool = False  # the tower computes its rotary tables in float32
    rotary_width: int = 0  # values per patch in each of the cos and sin tables (0: the head size)
    projector: tuple[int, int] | None = None  # (mid, out) of a column/row-parallel MLP run on every patch


@frozen
class ModalityCost:
    modality: str
    tokens_per_item: int
    patches_per_item: int
    basis: str
    rows_per_item: int = 1  # encoder batch rows an item becomes (Gemma 4: one per video frame)

    @property
    def patches_per_row(self) -> int:
        return self.patches_per_item // self.rows_per_item


@frozen
class EncoderProfile:
    """What the encoder adds to the plan: its own moment, the outputs the later moments carry, and
    the persistent buffers a multimodal runner allocates."""

    family: str
    moment: Moment | None  # None: no encoder runs (text-only) or it is not modelled
    kept: tuple[Buffer, ...] = ()  # encoder outputs held through the forward pass and the sampler
    persistent: tuple[Buffer, ...] = ()  # runner buffers only a multimodal runner has
    skipped: str | None = None  # why no encoder moment happens
    unknown: str | None = None  # why the encoder moment is not modelled
    batch: dict[str, Any] = field(default_factory=dict)  # the dummy batch, for --explain and tests


def parse_limit_mm_per_prompt(text: str) -> tuple[tuple[str, int], ...]:
    """`--limit-mm-per-prompt` as vLLM's CLI takes it: a JSON object of modality -> count (or an object
    with a "count"), e.g. '{"image": 2, "video": 0}'."""
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f'--limit-mm-per-prompt {text!r} is not JSON; write it like \'{{"image": 1, "video": 0}}\''
        ) from exc
    if not isinstance(data, dict) or not data:
        raise BadInput(f'--limit-mm-per-prompt {text!r} must be a JSON object like \'{{"image": 1, "video": 0}}\'')
    limits = []
    for modality, value in data.items():
        count = value.get("count") if isinstance(value, dict) else value
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise BadInput(f"--limit-mm-per-prompt: the count for {modality!r} must be a whole number >= 0")
        limits.append((str(modality), count))
    return tuple(sorted(limits))


def estimate_encoder(
    architecture: str,
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    processor: dict[str, Any],
    *,
    gpu_total_bytes: int,
) -> EncoderProfile:
    family = FAMILIES.get(architecture)
    name = family[0] if family else "unknown"
    if settings.language_model_only:
        return EncoderProfile(name, None, skipped="--language-model-only: no tower is built and nothing is encoded")
    if family is None:
        return EncoderProfile(
            name,
            None,
            unknown=f"encoder peak not modelled: {architecture}'s vision tower and dummy batch are not read yet",
        )
    try:
        return _estimate(name, family, config, settings, facts, processor, gpu_total_bytes)
    except _NotModelled as exc:
        return EncoderProfile(name, None, unknown=f"encoder peak not modelled: {exc}")
    except KeyError as exc:  # a key the tower's shape needs (vision_config, patch_size, ...) is not given
        return EncoderProfile(name, None, unknown=f"encoder peak not modelled: the config lacks {exc}")


def _estimate(
    name: str,
    family: tuple[str, CostsFn, TowerFn, bool],
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    processor: dict[str, Any],
    gpu_total_bytes: int,
) -> EncoderProfile:
    _, costs_fn, tower_fn, supports_data_mode = family
    limits = dict(settings.user.limit_mm_per_prompt)
    costs = costs_fn(config, settings, processor, facts)
    active = [c for c in costs if limits.get(c.modality, DEFAULT_LIMIT) > 0]
    persistent = runner_buffers(config, settings, name)
    if not active:
        # multimodal/registry.py supports_multimodal_inputs: every limit 0 makes the runner text-only.
        return EncoderProfile(name, None, skipped="--limit-mm-per-prompt sets every modality to 0: text-only runner")
    profiled = max(active, key=lambda c: (c.tokens_per_item, c.modality))
    items = dummy_items(profiled, active, settings, limits.get(profiled.modality, DEFAULT_LIMIT))
    tower = tower_fn(config, profiled.modality)
    if tower is None:
        return EncoderProfile(
            name,
            None,
            persistent=persistent,
            unknown=f"encoder peak not modelled: {name}'s {profiled.modality} tower is not read yet",
        )
    data_mode = settings.user.mm_encoder_tp_mode == "data" and supports_data_mode
    profiled = ModalityCost(
        profiled.modality,
        profiled.tokens_per_item,
        profiled.patches_per_item,
        f"{profiled.basis}; {FAMILY_SOURCES[name]}",
        profiled.rows_per_item,
    )
    shape = _Shape(name, tower, profiled, items, data_mode, gpu_total_bytes)
    moment, kept = tower_moment(shape, config, settings, facts)
    batch = {
        "modality": profiled.modality,
        "tokens_per_item": profiled.tokens_per_item,
        "items": items,
        "patches": items * profiled.patches_per_item,
        "encoder_tp_mode": "data" if data_mode else "weights",
        "basis": profiled.basis,
    }
    return EncoderProfile(name, moment, kept, persistent, batch=batch)


def dummy_items(profiled: ModalityCost, active: list[ModalityCost], settings: EngineSettings, limit: int) -> int:
    """multimodal/encoder_budget.py _get_max_items with chunked prefill on (the default for generative
    models): the encoder budget in items, capped by what max_num_seqs prompts could hold."""
    tokens = profiled.tokens_per_item
    budget = max(settings.max_num_batched_tokens, max(c.tokens_per_item for c in active))
    per_prompt = max(1, min(limit, settings.max_model_len // tokens))
    return max(1, min(budget // tokens, settings.max_num_seqs * per_prompt))


# Where each persistent multimodal runner buffer comes from (the basis of its non-torch component).
RUNNER_BUFFER_SOURCES = {
    "multimodal inputs_embeds buffer": "v1/worker/gpu/mm/encoder_runner.py:58 (0.29.0-0.33.0): zeros "
    "[max_num_batched_tokens, inputs_embeds_size] in the model dtype",
    "M-RoPE positions": "v1/worker/gpu/mm/rope.py (0.29.0:49-57, 0.33.0:46-54): int64 [3, max_num_batched_tokens + 1]",
    "deepstack input buffers": "models/qwen3_vl.py (0.33.0:2031-2037): deepstack levels x [max_num_batched_tokens, "
    "hidden], counted by vLLM in 'Model loading'",
}


def runner_buffers(config: ModelConfig, settings: EngineSettings, family: str) -> tuple[Buffer, ...]:
    """Persistent buffers of a multimodal V2 runner (after the start-up snapshot, so in consumed memory).
    v1/worker/gpu/mm/encoder_runner.py: inputs_embeds [max_num_batched_tokens, inputs_embeds_size];
    v1/worker/gpu/mm/rope.py (Qwen-VL M-RoPE): positions [3, max_num_batched_tokens + 1] int64."""
    dsz = DTYPE_BYTES[settings.dtype]
    tokens = settings.max_num_batched_tokens
    size = int(config.get("projection_dim") or 0) if family == "idefics3" else 0
    buffers = [Buffer("multimodal inputs_embeds buffer", (tokens, size or config.hidden_size), dsz)]
    if family == "qwen3_vl":
        buffers.append(Buffer("M-RoPE positions", (3, tokens + 1), 8))
        levels = len(config.vision.get("deepstack_visual_indexes") or [])
        if levels:
            # models/qwen3_vl.py __init__ (0.33.0:2031): deepstack input buffers, counted by vLLM in
            # "Model loading", which the checkpoint-based weights figure does not hold.
            buffers.append(Buffer("deepstack input buffers", (levels, tokens, config.hidden_size), dsz))
    return tuple(buffers)


@frozen
class _Shape:
    family: str
    tower: Tower
    cost: ModalityCost
    items: int
    is_data_mode: bool
    gpu_total_bytes: int


def tower_moment(
    shape: _Shape, config: ModelConfig, settings: EngineSettings, facts: EngineFacts
) -> tuple[Moment, tuple[Buffer, ...]]:
    dsz = DTYPE_BYTES[settings.dtype]
    tower, cost = shape.tower, shape.cost
    tp = 1 if shape.is_data_mode else settings.tensor_parallel_size
    # In data mode run_dp_sharded_mrope_vision_model (models/vision.py) hands whole items to ranks,
    # balanced by patch count: the busiest rank encodes ceil(items / tp) of them with the full tower.
    items = math.ceil(shape.items / settings.tensor_parallel_size) if shape.is_data_mode else shape.items
    rows = items * cost.rows_per_item
    chunk = _chunk_rows(shape, config, rows)
    patches = chunk * cost.patches_per_row
    # models/qwen3_vl.py forward: from 0.32.0 raw uint8 pixels travel to the device and input_norm casts
    # them (mm_device_do_normalize); before, and in the other towers, the processor's float32 values.
    pixel_bytes = 1 if shape.family == "qwen3_vl" and facts.at_least("0.32.0") else 4
    if shape.family == "deepseek_v41":
        # mm_preprocess.py load_image makes bf16 patches; vl_model.py's .to(the aligner's dtype) keeps them.
        buffers = [Buffer("pixel values on the device", (rows * cost.patches_per_row, tower.patch_input), dsz)]
    else:
        buffers = [
            Buffer("pixel values on the device", (rows * cost.patches_per_row, tower.patch_input), pixel_bytes),
            Buffer("pixel values in the model dtype", (patches, tower.patch_input), dsz),
        ]
    rotary = Buffer(
        "rotary cos and sin",
        (2, patches, tower.rotary_width or tower.hidden // tower.heads),
        4 if tower.is_rotary_fp32 else dsz,
    )
    blocks = [Buffer("residual stream (patch + position embeddings)", (patches, tower.hidden), dsz), rotary]
    if chunk < rows and shape.family == "deepseek_v41":
        # vl_model.py _process_image_input keeps each encoded image's aligner output in a list.
        merged = (rows - chunk, cost.patches_per_row // tower.merge**2, config.hidden_size)
        blocks.append(Buffer("embeddings of the images already encoded", merged, dsz))
    elif chunk < rows:
        # models/gemma4_mm.py _process_video_input keeps every chunk's last hidden state until pooling.
        blocks.append(
            Buffer("last hidden states of the other chunks", (rows - chunk, cost.patches_per_row, tower.hidden), dsz)
        )
    blocks += _block_peak(tower, patches, tp, dsz)
    # The blocks' live set or, after them, the projector's (the blocks' tables freed by then).
    projector = _projector_peak(tower, patches, tp, dsz)
    is_projector_peak = sum(b.num_bytes for b in projector) > sum(b.num_bytes for b in blocks)
    buffers += projector if is_projector_peak else blocks
    kept = (
        Buffer(
            "encoder outputs held in the encoder cache",
            (shape.items * cost.tokens_per_item, _output_width(shape.family, config)),
            dsz,
        ),
    )
    basis = (
        f"{shape.items} dummy {cost.modality} item(s) x {cost.tokens_per_item} tokens ({cost.basis})"
        + (f"; encoded {chunk} of {rows} rows at a time" if chunk < rows else "")
        + ("; --mm-encoder-tp-mode data: whole items per rank, full tower" if shape.is_data_mode else "")
        + (
            "; the projector's live tensors on every patch, after the blocks (eager: freed at last use)"
            if is_projector_peak
            else "; the largest block's live tensors (eager: freed at last use)"
        )
    )
    return Moment("vision encoder", tuple(buffers) + kept, basis), kept


def _block_peak(tower: Tower, patches: int, tp: int, dsz: int) -> list[Buffer]:
    """One transformer block: the larger of the attention and the MLP live sets, besides the residual."""
    d, inter = tower.hidden, tower.intermediate // tp
    attention = [
        Buffer("attention norm output", (patches, d), dsz),
        Buffer("qkv projection", (patches, 3 * d // tp), dsz),
        Buffer("rotated q and k", (patches, 2 * d // tp), dsz),
        Buffer("attention output", (patches, d // tp), dsz),
    ]
    mlp = [Buffer("MLP norm output", (patches, d), dsz), Buffer("MLP fc1 output", (patches, inter), dsz)]
    if tower.is_gated:
        mlp.append(Buffer("MLP up output", (patches, inter), dsz))
    mlp.append(Buffer("MLP activation output", (patches, inter), dsz))
    return max(attention, mlp, key=lambda bs: sum(b.num_bytes for b in bs))


def _projector_peak(tower: Tower, patches: int, tp: int, dsz: int) -> list[Buffer]:
    """A projector run on every patch before the merge (MiniMax-M3: vision_tower.py 0.31.0-0.33.0
    MiniMaxVLVisionModel.forward -> multi_modal_projector), after the blocks' tables are freed: its input,
    then the larger of fc1 + activation and activation + fc2. fc2 is row-parallel: under tensor
    parallelism its partial sum and the all-reduce's result live together, since every all-reduce path
    returns a new tensor (distributed/device_communicators/cuda_communicator.py 0.33.0:362-440,
    pynccl.py 0.33.0:290-291: out_tensor = torch.empty_like(in_tensor))."""
    if tower.projector is None:
        return []
    mid, out = tower.projector[0] // tp, tower.projector[1]
    head = [Buffer("tower output (projector input)", (patches, tower.hidden), dsz)]
    fc1 = [
        Buffer("projector fc1 output", (patches, mid), dsz),
        Buffer("projector activation output", (patches, mid), dsz),
    ]
    fc2 = [
        Buffer("projector activation output", (patches, mid), dsz),
        Buffer("projector fc2 output", (patches, out), dsz),
    ]
    if tp > 1:
        fc2.append(Buffer("projector all-reduce output", (patches, out), dsz))
    return head + max(fc1, fc2, key=lambda bs: sum(b.num_bytes for b in bs))


def _output_width(family: str, config: ModelConfig) -> int:
    if family == "qwen3_vl":
        vision = config.vision
        levels = len(vision.get("deepstack_visual_indexes") or [])
        return int(vision.get("out_hidden_size") or config.hidden_size) * (1 + levels)
    return config.hidden_size


def _chunk_rows(shape: _Shape, config: ModelConfig, rows: int) -> int:
    """Gemma 4 encodes at most `_encoder_chunk` rows at once (models/gemma4_mm.py 0.33.0:1272-1300, the
    same in 0.29.0-0.32.0): min(free / 2, total / 10) // (patches x 4 x position_embedding_size x 8).
    Free memory at that moment is not known before the boot; the total / 10 cap is taken, which is
    the one that binds whenever more than a fifth of the GPU is free after the weights."""
    if shape.family == "deepseek_v41":
        # deepseek_v41/nvidia/vl_model.py _process_image_input (0.30.0-0.33.0): one image per ViT forward
        # in both modes (deepseek_v4/common/vision.py run_dp_sharded_vision_tower loops per image too).
        return 1
    if shape.family != "gemma4":
        return rows
    table = int(config.vision.get("position_embedding_size") or 0)
    cost = shape.cost.patches_per_row * 4 * table * 8
    return max(1, min(rows, (shape.gpu_total_bytes // 10) // cost)) if cost else rows


class _NotModelled(Exception):
    pass


# --- Qwen3-VL's tower: Qwen3-VL, Qwen3.5 / 3.6 / 3.8, Qwen4-Exp ------------------------------------------


def qwen3_vl_costs(
    config: ModelConfig, settings: EngineSettings, processor: dict[str, Any], facts: EngineFacts
) -> list[ModalityCost]:
    """models/qwen2_vl.py get_image_size_with_most_features / get_max_image_tokens and qwen3_vl.py
    get_max_video_tokens (0.33.0:1079-1139, 1038-1070; same in 0.29.0): the image budget is
    size.longest_edge pixels over (patch x merge)^2, factorised with an aspect ratio <= 200; the
    video budget is the video processor's longest_edge / temporal_patch_size for 2 frames (grid_t 1)."""
    vision = config.vision
    unit = int(vision["patch_size"]) * int(vision["spatial_merge_size"])
    merge2 = int(vision["spatial_merge_size"]) ** 2
    image = (processor.get("preprocessor_config.json") or {}).get("size") or {}
    video_cfg = processor.get("video_preprocessor_config.json") or {}
    if "longest_edge" not in image:
        raise _NotModelled("preprocessor_config.json has no size.longest_edge (max pixels)")
    image_tokens = _factorised(int(image["longest_edge"]) // (unit * unit))
    costs = [ModalityCost("image", image_tokens, image_tokens * merge2, f"{image['longest_edge']} max pixels")]
    video_size = video_cfg.get("size") or {}
    if "longest_edge" in video_size:
        temporal = int(video_cfg.get("temporal_patch_size") or vision.get("temporal_patch_size") or 2)
        video_tokens = _factorised(int(video_size["longest_edge"]) // temporal // (unit * unit))
        costs.append(ModalityCost("video", video_tokens, video_tokens * merge2, "2 frames, one temporal patch"))
    return costs


def _factorised(tokens: int) -> int:
    """qwen2_vl.py get_image_size_with_most_features: step down until the token count has a factor
    pair with aspect ratio <= 200."""
    for n in range(tokens, 0, -1):
        small = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
        if (n // small) / small <= 200:
            return n
    return 1


def qwen3_vl_tower(config: ModelConfig, modality: str) -> Tower:
    v = config.vision
    return Tower(
        hidden=int(v["hidden_size"]),
        intermediate=int(v["intermediate_size"]),
        heads=int(v.get("num_heads") or v["num_attention_heads"]),
        patch_input=int(v.get("in_channels", 3)) * int(v["temporal_patch_size"]) * int(v["patch_size"]) ** 2,
        merge=int(v["spatial_merge_size"]),
    )


# --- Gemma 4 ---------------------------------------------------------------------------------------------

GEMMA4_VIDEO_FRAMES = 32  # models/gemma4_mm.py _VIDEO_MAX_FRAMES (0.29.0-0.33.0)
GEMMA4_VIDEO_SOFT_TOKENS = 70  # _VIDEO_MAX_SOFT_TOKENS


def gemma4_costs(
    config: ModelConfig, settings: EngineSettings, processor: dict[str, Any], facts: EngineFacts
) -> list[ModalityCost]:
    """models/gemma4_mm.py get_mm_max_tokens_per_item (0.33.0:272-296; 0.29.0:259-287): an image is
    vision_config.default_output_length soft tokens, a video 32 frames x (70 + 2 + 6) tokens, audio
    the processor's audio_seq_length. The HF processor pads every image to max_soft_tokens x k^2
    patches and every frame to 70 x k^2 (k the pooling kernel), and the tower runs the padded length."""
    vision = config.vision
    kernel2 = int(vision.get("pooling_kernel_size") or 3) ** 2
    image_tokens = int(vision.get("default_output_length") or 280)
    costs = [
        ModalityCost("image", image_tokens, image_tokens * kernel2, f"{image_tokens} soft tokens"),
        ModalityCost(
            "video",
            GEMMA4_VIDEO_FRAMES * (GEMMA4_VIDEO_SOFT_TOKENS + 8),
            GEMMA4_VIDEO_FRAMES * GEMMA4_VIDEO_SOFT_TOKENS * kernel2,
            f"{GEMMA4_VIDEO_FRAMES} frames at {GEMMA4_VIDEO_SOFT_TOKENS} soft tokens",
            rows_per_item=GEMMA4_VIDEO_FRAMES,
        ),
    ]
    if config.raw.get("audio_config"):
        audio = int((processor.get("processor_config.json") or {}).get("audio_seq_length") or 0)
        if not audio:
            raise _NotModelled("processor_config.json has no audio_seq_length for the audio tower")
        costs.append(ModalityCost("audio", audio, 0, f"{audio} audio tokens"))
    return costs


def gemma4_tower(config: ModelConfig, modality: str) -> Tower | None:
    if modality == "audio":
        return None  # the conformer audio tower is not modelled
    v = config.vision
    return Tower(
        hidden=int(v["hidden_size"]),
        intermediate=int(v["intermediate_size"]),
        heads=int(v["num_attention_heads"]),
        patch_input=3 * int(v["patch_size"]) ** 2,
        is_gated=True,
    )


# --- Idefics3 / SmolVLM (SigLIP-style tower, pixel-shuffle connector) ----------------------------------


def idefics3_costs(
    config: ModelConfig, settings: EngineSettings, processor: dict[str, Any], facts: EngineFacts
) -> list[ModalityCost]:
    """models/idefics3.py get_num_image_tokens: tiles x image_seq_len, one tile per image with
    do_image_splitting off, else (longest_edge / max_image_size)^2 tiles plus the global image."""
    vision = config.vision
    pre = processor.get("preprocessor_config.json") or {}
    seq_len = (processor.get("processor_config.json") or {}).get("image_seq_len")
    side = int(vision.get("image_size") or 0)
    patch = int(vision.get("patch_size") or 0)
    if not (seq_len and side and patch):
        raise _NotModelled("processor_config.json image_seq_len or vision_config image/patch size missing")
    tiles = 1
    if pre.get("do_image_splitting", True):
        longest = int((pre.get("size") or {}).get("longest_edge", side))
        tile = int((pre.get("max_image_size") or {}).get("longest_edge", side))
        tiles = math.ceil(longest / tile) ** 2 + 1
    per_tile = (side // patch) ** 2
    return [ModalityCost("image", tiles * int(seq_len), tiles * per_tile, f"{tiles} tile(s) of {side} px")]


def idefics3_tower(config: ModelConfig, modality: str) -> Tower:
    v = config.vision
    return Tower(
        hidden=int(v["hidden_size"]),
        intermediate=int(v["intermediate_size"]),
        heads=int(v["num_attention_heads"]),
        patch_input=3 * int(v["patch_size"]) ** 2,
    )


# --- Muse-Glimmer and GLM-5.3 (Qwen-VL-style patch towers with their own token budgets) ------------------


def muse_glimmer_costs(
    config: ModelConfig, settings: EngineSettings, processor: dict[str, Any], facts: EngineFacts
) -> list[ModalityCost]:
    """models/muse_glimmer.py get_mm_max_tokens_per_item (0.33.0:159-198): an image is
    max_image_tokens; a video min(max_model_len // frame_tokens, num_frames // temporal) frame groups
    of max_video_frame_tokens each. Each token is merge^2 patches."""
    proc = processor.get("processor_config.json") or {}
    image, video = proc.get("image_processor") or {}, proc.get("video_processor") or {}
    if "max_image_tokens" not in image:
        raise _NotModelled("processor_config.json has no image_processor.max_image_tokens")
    merge2 = int(image.get("merge_size", 2)) ** 2
    tokens = int(image["max_image_tokens"])
    costs = [ModalityCost("image", tokens, tokens * merge2, "max_image_tokens")]
    if "max_video_frame_tokens" in video:
        frame_tokens, temporal = int(video["max_video_frame_tokens"]), int(video.get("temporal_patch_size", 2))
        groups = min(
            max(1, settings.max_model_len // frame_tokens), max(1, int(video.get("num_frames", 2)) // temporal)
        )
        video_tokens = groups * frame_tokens
        costs.append(ModalityCost("video", video_tokens, video_tokens * merge2, f"{groups} frame groups"))
    return costs


def muse_glimmer_tower(config: ModelConfig, modality: str) -> Tower:
    v = config.vision
    return Tower(
        hidden=int(v["hidden_size"]),
        intermediate=int(v["intermediate_size"]),
        heads=int(v["num_attention_heads"]),
        patch_input=3 * int(v.get("patch_temporal", 2)) * int(v["patch_size"]) ** 2,
        merge=int(v.get("merge_size", 2)),
        is_rotary_fp32=True,  # the research note lists muse_glimmer among the fp32-rotary towers
    )


def glm5_costs(
    config: ModelConfig, settings: EngineSettings, processor: dict[str, Any], facts: EngineFacts
) -> list[ModalityCost]:
    """models/glm5next/common/multimodal.py (0.30.0+): an image is max_image_tokens, factorised exactly
    (get_image_size_with_most_features); video is capped at _MAX_VIDEO_TOKENS = 30000 tokens, taken
    here at the cap (the frame search of Glm4v's get_max_video_tokens is not reproduced)."""
    proc = processor.get("processor_config.json") or {}
    image, video = proc.get("image_processor") or {}, proc.get("video_processor") or {}
    if "max_image_tokens" not in image:
        raise _NotModelled("processor_config.json has no image_processor.max_image_tokens")
    merge2 = int(image.get("merge_size", 2)) ** 2
    tokens = int(image["max_image_tokens"])
    costs = [ModalityCost("image", tokens, tokens * merge2, "max_image_tokens")]
    if "max_image_tokens" in video:
        video_tokens = min(int(video["max_image_tokens"]), 30000)
        costs.append(ModalityCost("video", video_tokens, video_tokens * merge2, "the 30,000-token video cap"))
    return costs


def glm5_tower(config: ModelConfig, modality: str) -> Tower:
    v = config.vision
    return Tower(
        hidden=int(v["hidden_size"]),
        intermediate=int(v["intermediate_size"]),
        heads=int(v["num_heads"]),
        patch_input=int(v.get("in_channels", 3)) * int(v["temporal_patch_size"]) * int(v["patch_size"]) ** 2,
        merge=int(v["spatial_merge_size"]),
        is_gated=True,
    )


# --- MiniMax-M3 (CLIP-style tower with 3D rotary, a projector on every patch, then a patch merge) --------

# transformers_utils/processors/minimax_m3.py (0.30.0-0.33.0): the vendored processor's defaults, which
# vLLM uses when the checkpoint's preprocessor_config.json does not set them.
MINIMAX_M3_IMAGE_DEFAULTS = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2, "max_pixels": 451584}
MINIMAX_M3_VIDEO_DEFAULTS = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2, "max_pixels": 602112}
MINIMAX_M3_IMAGE_MAX_TOTAL_PIXELS = 12_845_056  # IMAGE_MAX_TOTAL_PIXELS, fixed in the processor module
MINIMAX_M3_MAX_FRAMES = 500  # models/minimax_m3/common/mm_preprocess.py _MAX_FRAMES_PER_VIDEO (0.30.0-0.33.0)


def minimax_m3_costs(
    config: ModelConfig, settings: EngineSettings, processor: dict[str, Any], facts: EngineFacts
) -> list[ModalityCost]:
    """models/minimax_m3/common/mm_preprocess.py (0.33.0:176-270; 0.30.0:177-271) with mm_counts 1 per
    modality (multimodal/encoder_budget.py 0.33.0:91-94). An image is the largest square of side
    isqrt(max_pixels) floored to patch x merge (or min(max_long_side_pixel, isqrt(max_total_pixels))),
    one temporal patch. A video's frame is the widest factor pair of max_pixels / (patch x merge)^2
    units; the frames are the most whose ceil(frames / temporal) x frame tokens fit max_model_len
    (_get_max_video_frames), at most 500. Each token is merge^2 patches."""
    pre = processor.get("preprocessor_config.json") or {}
    image = {k: int(pre.get(k) or v) for k, v in MINIMAX_M3_IMAGE_DEFAULTS.items()}
    video_cfg = processor.get("video_preprocessor_config.json") or {}
    video = {k: int(video_cfg.get(k) or v) for k, v in MINIMAX_M3_VIDEO_DEFAULTS.items()}
    source = "preprocessor_config.json" if pre else "the vendored processor's defaults (no preprocessor_config.json)"
    factor, merge2 = image["patch_size"] * image["merge_size"], image["merge_size"] ** 2
    long_side = pre.get("max_long_side_pixel")
    side_px = min(int(long_side), math.isqrt(MINIMAX_M3_IMAGE_MAX_TOTAL_PIXELS)) if long_side else None
    side = max(factor, ((side_px or math.isqrt(image["max_pixels"])) // factor) * factor)
    image_tokens = (side // factor) ** 2
    costs = [ModalityCost("image", image_tokens, image_tokens * merge2, f"a {side} px square image ({source})")]
    vfactor, vmerge2 = video["patch_size"] * video["merge_size"], video["merge_size"] ** 2
    frame_pixels = video["max_pixels"]
    if video_cfg.get("max_long_side_pixel"):
        frame_pixels = min(frame_pixels, int(video_cfg["max_long_side_pixel"]) ** 2)
    units = frame_pixels // (vfactor * vfactor)
    high = next(h for h in range(math.isqrt(units), 0, -1) if units % h == 0)
    frame_tokens = high * (units // high)
    temporal = video["temporal_patch_size"]
    fitting = temporal * (settings.max_model_len // frame_tokens) or 1
    frames = max(1, min(fitting, MINIMAX_M3_MAX_FRAMES))
    video_tokens = -(-frames // temporal) * frame_tokens
    costs.append(
        ModalityCost(
            "video",
            video_tokens,
            video_tokens * vmerge2,
            f"{frames} frames of {high * vfactor}x{units // high * vfactor} px ({frame_tokens} tokens per "
            f"{temporal} frames)",
        )
    )
    return costs


def minimax_m3_tower(config: ModelConfig, modality: str) -> Tower:
    """models/minimax_m3/common/vision_tower.py (0.33.0:36-330, 527-680): Conv3d patch embedding, CLIP
    blocks (LayerNorm, fc1/GELU/fc2), 3D rotary tables (3, N, half_rot) float32 for cos and sin
    (0.31.0-0.33.0; 0.30.0 builds (N, half_rot) tables, not modelled apart), then
    multi_modal_projector (vision hidden -> projector_hidden_size -> text hidden) on every patch and
    the patch-merge MLP on merge^2-patch groups."""
    v = config.vision
    compression = v.get("img_token_compression_config") or {}
    head = int(v["hidden_size"]) // int(v["num_attention_heads"])
    half_axis = (2 * (2 * (head // 2) // 3 // 2)) // 2  # t_dim = h_dim = w_dim = 2 * ((rope_dims // 3) // 2)
    text_hidden = config.hidden_size
    return Tower(
        hidden=int(v["hidden_size"]),
        intermediate=int(v["intermediate_size"]),
        heads=int(v["num_attention_heads"]),
        patch_input=int(v.get("num_channels", 3))
        * int(compression.get("temporal_patch_size", 2))
        * int(v["patch_size"]) ** 2,
        merge=int(compression.get("spatial_merge_size", 2)),
        is_rotary_fp32=True,
        rotary_width=3 * 3 * half_axis,
        projector=(int(config.raw.get("projector_hidden_size") or text_hidden), text_hidden),
    )


# --- DeepSeek-V4.1 (ViT with 2D rotary, one image per forward, a 3 x 3 aligner) ----------------------------


def deepseek_v41_costs(
    config: ModelConfig, settings: EngineSettings, processor: dict[str, Any], facts: EngineFacts
) -> list[ModalityCost]:
    """models/deepseek_v41/common/mm_preprocess.py: an image is vision_max_n_token (max_image_tokens)
    tokens (0.30.0-0.33.0:261-266). The dummy image (get_image_size_with_most_features, :274) is from
    0.32.0 the ViT grid that maximises patches under the budget, one newline token per aligner row:
    n_vit = (3h) x 3((budget - 2) // h - 1) over aligner rows h; in 0.30.0-0.31.0 the largest square
    solve_resize_ratio gives, floor(sqrt(budget - 2 + 1/4) - 1/2) aligner cells a side."""
    vision = config.vision
    patch, ratio = int(vision.get("patch_size", 14)), int(vision.get("downsample_ratio", 3))
    budget = int(vision.get("max_image_tokens", 1024))
    if vision.get("max_wh_ratio") is not None:
        raise _NotModelled("vision_config.max_wh_ratio is set: the dummy image's resize is not reproduced")
    if facts.at_least("0.32.0"):
        high, wide = max(
            ((h * ratio, ((budget - 2) // h - 1) * ratio) for h in range(1, (budget - 2) // 2 + 1)),
            key=lambda hw: hw[0] * hw[1],
        )
        if high * wide * patch * patch < int(vision.get("min_pixels", 295936)):
            raise _NotModelled("the dummy image is below min_pixels: its upscale and resize are not reproduced")
        shape = "the widest patch grid"
    else:
        side, cell = budget * patch * ratio, patch * ratio
        cells = math.floor(math.sqrt((budget - 2) + 0.25) - 0.5)  # solve_resize_ratio with r = 1
        if cells < 1:
            raise _NotModelled("max_image_tokens too small for one aligner cell")
        high = wide = math.floor(side * (cells * cell / side) / patch)
        shape = "the largest square"
    return [ModalityCost("image", budget, high * wide, f"{budget} tokens, {shape}: {high} x {wide} patches")]


def deepseek_v41_tower(config: ModelConfig, modality: str) -> Tower:
    """models/deepseek_v4/common/vision.py (0.33.0:81-240): a ReplicatedLinear patch embedding, RMSNorm
    blocks with a fused-QKV attention and a gated SiLU MLP (MergedColumnParallelLinear), 2D rotary
    tables [N, 1, head / 2] in float32. The aligner (3 x 3 unfold, w1 / GELU / w2 on patches / 9 rows)
    holds less than a block here and is not modelled."""
    v = config.vision
    head = int(v["hidden_size"]) // int(v["num_attention_heads"])
    return Tower(
        hidden=int(v["hidden_size"]),
        intermediate=int(v["intermediate_size"]),
        heads=int(v["num_attention_heads"]),
        patch_input=3 * int(v["patch_size"]) ** 2,
        merge=int(v.get("downsample_ratio", 3)),
        is_gated=True,
        is_rotary_fp32=True,
        rotary_width=head // 2,
    )


FAMILY_SOURCES = {
    "qwen3_vl": "models/qwen2_vl.py 0.33.0:1079-1139 and qwen3_vl.py 0.33.0:959-1070 (0.29.0:963-1014)",
    "gemma4": "models/gemma4_mm.py 0.33.0:272-296 and 1272-1300 (0.29.0:259-287)",
    "idefics3": "models/idefics3.py get_num_image_tokens (0.32.0)",
    "muse_glimmer": "models/muse_glimmer.py 0.33.0:159-198",
    "glm5next": "models/glm5next/common/multimodal.py 0.33.0:620-700",
    "minimax_m3": "models/minimax_m3/common/mm_preprocess.py 0.33.0:176-270 and vision_tower.py 0.33.0:293-680",
    "deepseek_v41": "models/deepseek_v41/common/mm_preprocess.py 0.33.0:261-300 (0.30.0:261-282), "
    "deepseek_v41/nvidia/vl_model.py 0.33.0:208-247 and deepseek_v4/common/vision.py 0.33.0:81-240",
}
if TYPE_CHECKING:
    CostsFn = Callable[[ModelConfig, EngineSettings, dict[str, Any], EngineFacts], list[ModalityCost]]
    TowerFn = Callable[[ModelConfig, str], Tower | None]
# tower family -> (costs, tower)
_FUNCTIONS: dict[str, tuple[CostsFn, TowerFn]] = {
    "qwen3_vl": (qwen3_vl_costs, qwen3_vl_tower),
    "gemma4": (gemma4_costs, gemma4_tower),
    "idefics3": (idefics3_costs, idefics3_tower),
    "muse_glimmer": (muse_glimmer_costs, muse_glimmer_tower),
    "glm5next": (glm5_costs, glm5_tower),
    "minimax_m3": (minimax_m3_costs, minimax_m3_tower),
    "deepseek_v41": (deepseek_v41_costs, deepseek_v41_tower),
}
# architecture -> (family, costs, tower, supports --mm-encoder-tp-mode data): plan/towers.py TOWERS
# with each family's functions.
FAMILIES: dict[str, tuple[str, CostsFn, TowerFn, bool]] = {
    arch: (family, *_FUNCTIONS[family], supports_data_mode) for arch, (family, supports_data_mode) in TOWERS.items()
}
