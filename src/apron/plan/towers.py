"""Which architectures have a vision tower Apron models: its family, and whether it runs whole on
every rank under --mm-encoder-tp-mode data. Every plan reads this (the parallel-layout checks and the
weights ask about the tower); plan/encoder.py, which models the tower's profiling batch, is imported
only for a multimodal model."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from apron.plan.model_config import ModelConfig
    from apron.plan.settings import EngineSettings

# architecture -> (tower family, supports --mm-encoder-tp-mode data); plan/encoder.py FAMILIES adds
# each family's cost and tower functions.
TOWERS: dict[str, tuple[str, bool]] = {
    **{
        arch: ("qwen3_vl", True)
        for arch in (
            "Qwen3VLForConditionalGeneration",
            "Qwen3VLMoeForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "Qwen4ExpForConditionalGeneration",
        )
    },
    "Gemma4ForConditionalGeneration": ("gemma4", False),
    "Idefics3ForConditionalGeneration": ("idefics3", False),
    "MuseGlimmerForConditionalGeneration": ("muse_glimmer", False),
    "Glm5NextForConditionalGeneration": ("glm5next", False),
    # models/minimax_m3/nvidia/model.py (0.33.0:1155, 1207-1256): --mm-encoder-tp-mode data runs
    # run_dp_sharded_mrope_vision_model with a replicated tower.
    "MiniMaxM3SparseForConditionalGeneration": ("minimax_m3", True),
    # models/deepseek_v41/nvidia/vl_model.py (0.33.0:218-224): data mode runs run_dp_sharded_vision_tower
    # (whole images per rank, replicated tower).
    "DeepseekV41ForCausalLM": ("deepseek_v41", True),
}


def tower_family(architecture: str) -> str | None:
    tower = TOWERS.get(architecture)
    return tower[0] if tower else None


def is_tower_whole_on_every_rank(architecture: str, settings: EngineSettings) -> bool:
    """--mm-encoder-tp-mode data on a tower that supports it: the vision layers are built with
    disable_tp (models/vision.py and the family's tower, e.g. qwen3_vl.py Qwen3_VisionTransformer
    use_data_parallel), so every rank holds the whole tower; other towers fall back to weights
    (config/model.py 0.33.0:836-843)."""
    tower = TOWERS.get(architecture)
    return bool(tower and tower[1]) and settings.user.mm_encoder_tp_mode == "data"


def rotary_cache_shape(family: str | None, config: ModelConfig, release: str) -> tuple[int, int] | None:
    """The tower's own rotary cos/sin cache, [rows, rotary_dim] in the model dtype: a get_rope
    buffer (rotary_embedding/base.py registers cos_sin_cache at construction, under load_model's
    default dtype: model_loader/base_loader.py 0.30.0:66), not in the checkpoint and not split under
    TP. The Qwen3-VL tower (Qwen3-VL/3.5/3.8) builds it over 8,192 positions (qwen3_vl.py 0.29.0:620,
    0.31.0:622, 0.32.0/0.33.0:630), GLM-5.3-Flash's over 8,192 in 0.30 and 0.31 (glm5next
    nvidia/multimodal.py 0.30.0:390-395, common/multimodal.py 0.31.0:390-395) and over the text's
    max_position_embeddings from 0.32 (common/multimodal.py 0.32.0/0.33.0:397-402); both rotate half
    of each head (partial_rotary_factor 0.5). The other towers Apron models build no get_rope."""
    if family not in ("qwen3_vl", "glm5next"):
        return None
    from apron.engine.facts import version_key

    vision = config.vision
    heads = int(vision.get("num_heads") or 0)
    if heads <= 0:
        return None
    rows = 8192
    if family == "glm5next" and version_key(release) >= version_key("0.32.0"):
        rows = int(config.text.get("max_position_embeddings") or 0)
    width = int(int(vision.get("hidden_size") or 0) // heads * 0.5)
    return (rows, width) if rows and width else None
