"""Each term between the weights and the KV budget, against the shapes the vLLM source gives it.

The expected values are recomputed here from the config and the settings with the source's
formulas (file:line in src/apron/plan/*.py and docs/memory.md), not copied from a plan.
"""

from __future__ import annotations

import math

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.engine.facts import load_facts
from apron.hardware import resolve_gpu
from apron.plan.encoder import deepseek_v41_costs, estimate_encoder
from apron.plan.model_config import ModelConfig
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings, resolve_settings
from conftest import snapshot_path

MIB = 2**20


def plan(name: str, gpu: str, engine: str = "0.33.0", **settings):
    user = UserSettings(**{"max_model_len": 4096, **settings})
    return plan_checkpoint(load_snapshot(snapshot_path(name)), resolve_gpu(gpu), user, engine_version=engine)


def moment(result, name: str) -> dict:
    return next(m for m in result.details["activation"]["moments"] if m["name"] == name)


def buffers(result, name: str) -> dict[str, int]:
    return {b["name"]: b["bytes"] for b in moment(result, name)["buffers"]}


def components(result, key: str = "non_torch") -> dict[str, int]:
    return {c["name"]: c["num_bytes"] for c in result.details[key]}


@pytest.fixture(autouse=True)
def _facts(apron_home_with_facts):
    return apron_home_with_facts


QWEN3_32B = {"vocab": 151936, "hidden": 5120, "heads": 64, "head_dim": 128}


@pytest.mark.parametrize("engine", ["0.29.0", "0.33.0"])
def test_sampler_moment_per_release(engine):
    result = plan("Qwen/Qwen3-32B", "H100", engine)
    rows, tokens, vocab, hidden = 1024, 8192, QWEN3_32B["vocab"], QWEN3_32B["hidden"]
    expected = tokens * hidden * 2 + rows * hidden * 2 + rows * math.ceil(vocab / 64) * 64 * 2
    if engine == "0.33.0":  # fp32 copy, FlashInfer's top-k mask and softmax: three fp32 [R, V]
        expected += 3 * rows * vocab * 4
    assert moment(result, "sampler")["bytes"] == expected
    # 0.33's FlashInfer pass (3.6 GiB at these defaults) overtakes the compile transient
    assert result.details["activation"]["peak"] == ("sampler" if engine == "0.33.0" else "compile transient")


def test_sampler_gathers_logits_under_tensor_parallelism():
    one, two = (
        plan("Qwen/Qwen3-32B", "H100", "0.29.0"),
        plan("Qwen/Qwen3-32B", "H100", "0.29.0", tensor_parallel_size=2),
    )
    padded = math.ceil(QWEN3_32B["vocab"] / 128) * 128
    assert buffers(two, "sampler")["all-gathered logits"] == 1024 * padded * 2
    assert "all-gathered logits" not in buffers(one, "sampler")


def test_persistent_runner_state_scales_with_max_num_seqs():
    small, large = plan("Qwen/Qwen3-8B", "4090", "0.29.0"), plan("Qwen/Qwen3-8B", "H100", "0.29.0")
    for result, seqs in ((small, 256), (large, 1024)):
        parts = components(result)
        words = math.ceil(151936 / 32)
        assert parts["sampler penalty state"] == 4 * seqs * (151936 + words)
        assert parts["structured-output bitmask"] == 4 * seqs * (words + 1)
        assert parts["per-request sampler state"] == 17_924 * seqs


@pytest.mark.parametrize(
    "gpu, engine, expected",
    [("4090", "0.29.0", 8 * MIB + 128 * 1024), ("H100", "0.29.0", 32 * MIB), ("H100", "0.33.0", None)],
)
def test_cublas_workspace_before_the_snapshot_from_033(gpu, engine, expected):
    assert components(plan("Qwen/Qwen3-8B", gpu, engine)).get("cuBLAS workspace (default stream)") == expected


def test_moe_workspace_follows_the_experts_class():
    hopper = components(plan("openai/gpt-oss-120b", "H100", "0.29.0"))
    ada = components(plan("openai/gpt-oss-20b", "4090", "0.30.0"))
    assert "MoE workspace" not in hopper  # monolithic OAI Triton MXFP4 kernels allocate inside the kernel
    tokens, topk, inter, hidden = 2048, 4, 2944, 3072  # Marlin pads intermediate 2880 -> 2944, hidden -> 3072
    expected = (tokens * topk * max(inter, hidden) + tokens * topk * max(2 * inter, hidden)) * 2
    assert ada["MoE workspace"] == expected
    # the compile copy's segment (2 MiB-rounded) is kept; the persistent blocks inside it are counted
    # as their own components: the 32 MiB cuBLAS workspace on Hopper, and the MoE workspace on Ada
    table_segment = -(-201088 * 2880 * 2 // (2 * MIB)) * 2 * MIB
    assert hopper["retained allocator segments"] == table_segment - 32 * MIB
    assert ada["retained allocator segments"] == table_segment - ada["MoE workspace"] - (8 * MIB + 128 * 1024)


@pytest.mark.parametrize("engine, cublas_rest", [("0.31.0", 12 * MIB - 128 * 1024), ("0.33.0", 0)])
def test_split_limit_around_profile_run_frees_the_compile_copy_from_031(engine, cublas_rest):
    """0.31 wraps profile_run in max_split_size_mb:20: neither workspace can take the freed table copy
    (a block over the limit, more than 20 MiB larger than the request), so the copy is released; what
    stays is the rest of the cuBLAS workspace's fresh 20 MiB segment (before 0.33 only)."""
    ada = components(plan("openai/gpt-oss-20b", "4090", engine))
    assert ada["retained allocator segments"] == cublas_rest


def test_untied_workspace_takes_a_fresh_large_segment():
    """Ada's 8.125 MiB cuBLAS workspace is under 10 MiB: on an untied model it gets a fresh segment of
    20 MiB (kLargeBuffer) and the rest of that segment stays reserved; at 0.31 the same."""
    for engine in ("0.29.0", "0.31.0"):
        retained = components(plan("Qwen/Qwen3-8B", "4090", engine))["retained allocator segments"]
        assert retained == 12 * MIB - 128 * 1024


def test_fa3_accumulators_only_with_hopper_aot_full_graphs():
    def graph_parts(name, gpu, **kw):
        return components(plan(name, gpu, "0.29.0", **kw), "cudagraphs")

    name = "FA3 split-KV accumulators (first FULL graph)"
    hopper = graph_parts("Qwen/Qwen3-32B", "H100")
    assert hopper[name] == 32 * 512 * 64 * (128 + 1) * 4  # 512: the largest FULL size at 1,024 sequences
    assert name not in graph_parts("Qwen/Qwen3-32B", "A100")  # FlashAttention 2
    assert name not in graph_parts("openai/gpt-oss-120b", "H100")  # two window configs: no AOT scheduler
    eager = plan("Qwen/Qwen3-32B", "H100", "0.29.0", enforce_eager=True)
    assert eager.quantities["cudagraph_bytes"].value == 0


# --- the vision encoder ----------------------------------------------------------------------------------


def test_qwen_vl_dummy_batch_from_the_processor_config():
    result = plan("Qwen/Qwen3.8-27B", "H100")
    batch = result.details["encoder"]["batch"]
    # preprocessor_config.json longest_edge 16,777,216 px over (16 x 2)^2 px per token
    assert (batch["modality"], batch["tokens_per_item"], batch["items"]) == ("image", 16384, 1)
    assert batch["patches"] == 16384 * 4
    assert buffers(result, "vision encoder")["pixel values on the device"] == 65536 * 3 * 2 * 16 * 16  # uint8
    held = buffers(result, "forward pass")["encoder outputs held in the encoder cache"]
    assert held == 16384 * 5120 * 2 == buffers(result, "sampler")["encoder outputs held in the encoder cache"]
    assert "compile transient" in dict(result.details["activation"]["skipped"])
    older = plan("Qwen/Qwen3.8-27B", "H100", "0.31.0")
    assert buffers(older, "vision encoder")["pixel values on the device"] == 65536 * 3 * 2 * 16 * 16 * 4  # float32


def test_limits_pick_the_profiled_modality_and_zero_makes_the_runner_text_only():
    video = plan("Qwen/Qwen3.8-27B", "H100", limit_mm_per_prompt=(("image", 0),)).details["encoder"]
    assert (video["batch"]["modality"], video["batch"]["tokens_per_item"]) == ("video", 12288)
    none = plan("Qwen/Qwen3.8-27B", "H100", limit_mm_per_prompt=(("image", 0), ("video", 0)))
    assert "every modality" in none.details["encoder"]["skipped"]
    assert none.details["activation"]["peak"] in ("compile transient", "sampler", "forward pass")
    assert "compile transient" in {m["name"] for m in none.details["activation"]["moments"]}
    assert "multimodal inputs_embeds buffer" not in components(none)
    # image and video both 0: the vision tower is not built (models/interfaces.py _mark_tower_model)
    full = plan("Qwen/Qwen3.8-27B", "H100")
    assert none.quantities["weights_bytes_per_gpu"].value < full.quantities["weights_bytes_per_gpu"].value
    assert video.get("skipped") is None


def test_language_model_only_drops_the_encoder_and_its_buffers():
    full = plan("Qwen/Qwen3.8-27B", "H100")
    text = plan("Qwen/Qwen3.8-27B", "H100", language_model_only=True)
    assert "vision encoder" not in {m["name"] for m in text.details["activation"]["moments"]}
    assert components(full)["multimodal inputs_embeds buffer"] == 8192 * 5120 * 2
    assert "multimodal inputs_embeds buffer" not in components(text)
    assert text.quantities["weights_bytes_per_gpu"].value < full.quantities["weights_bytes_per_gpu"].value


def test_encoder_tp_mode_data_runs_the_whole_tower_on_one_rank():
    weights = plan("Qwen/Qwen3.8-27B", "H100", tensor_parallel_size=2)
    data = plan("Qwen/Qwen3.8-27B", "H100", tensor_parallel_size=2, mm_encoder_tp_mode="data")
    assert data.details["encoder"]["batch"]["encoder_tp_mode"] == "data"
    assert buffers(data, "vision encoder")["MLP fc1 output"] == 2 * buffers(weights, "vision encoder")["MLP fc1 output"]
    assert "--mm-encoder-tp-mode data" in data.command
    gemma = plan("google/gemma-4-31B-it", "H100", tensor_parallel_size=2, mm_encoder_tp_mode="data")
    assert gemma.details["encoder"]["batch"]["encoder_tp_mode"] == "weights"  # no supports_encoder_tp_data


def test_encoder_tp_mode_data_keeps_the_whole_tower_on_every_rank():
    """The tower's layers are built with disable_tp in data mode: each rank holds all of it, while the
    language model stays sharded (weights mode splits the tower's linear layers like the LM's)."""
    snapshot = load_snapshot(snapshot_path("Qwen/Qwen3.8-27B"))
    tower_tensors = [t for t in snapshot.tensors if t.name.startswith(("model.visual.", "visual."))]
    tower = sum(t.num_elements for t in tower_tensors) * 2
    assert tower > 0
    per_gpu = {
        mode: plan("Qwen/Qwen3.8-27B", "H100", tensor_parallel_size=2, **kw).quantities["weights_bytes_per_gpu"].value
        for mode, kw in (
            ("text", {"language_model_only": True}),
            ("weights", {}),
            ("data", {"mm_encoder_tp_mode": "data"}),
        )
    }
    # the whole tower, plus what the allocator rounds each of its parameters up to (under 2 MiB each)
    assert 0 <= per_gpu["data"] - per_gpu["text"] - tower < 2 * MIB * len(tower_tensors)
    assert per_gpu["text"] < per_gpu["weights"] < per_gpu["data"]
    gemma = plan("google/gemma-4-31B-it", "H100", tensor_parallel_size=2, mm_encoder_tp_mode="data")
    gemma_weights = plan("google/gemma-4-31B-it", "H100", tensor_parallel_size=2)
    assert gemma.quantities["weights_bytes_per_gpu"].value == gemma_weights.quantities["weights_bytes_per_gpu"].value


def test_gemma4_profiles_video_frames_in_chunks_sized_by_the_gpu():
    h100, h200 = plan("google/gemma-4-31B-it", "H100"), plan("google/gemma-4-31B-it", "H200")
    batch = h100.details["encoder"]["batch"]
    assert (batch["modality"], batch["tokens_per_item"], batch["items"]) == ("video", 32 * 78, 8192 // 2496)
    frames, patches = 3 * 32, 70 * 9
    for result in (h100, h200):
        chunk = min(frames, (result.total_bytes_per_gpu // 10) // (patches * 4 * 10240 * 8))
        assert (
            buffers(result, "vision encoder")["residual stream (patch + position embeddings)"]
            == chunk * patches * 1152 * 2
        )


def test_dummy_items_are_capped_by_prompts_of_max_model_len():
    # a short max_model_len leaves one image per prompt; the budget still allows max(T, tokens) // tokens
    short = plan("meta-models/Muse-Glimmer-30B", "H100", max_model_len=640).details["encoder"]["batch"]
    assert (short["modality"], short["tokens_per_item"], short["items"]) == ("image", 4096, 2)
    long = plan("meta-models/Muse-Glimmer-30B", "H100", max_model_len=32768).details["encoder"]["batch"]
    assert (long["modality"], long["tokens_per_item"], long["items"]) == ("video", 48 * 144, 1)


def test_every_multimodal_fixture_has_an_encoder_term_or_says_why_not():
    # (MiniMax-M3 and DeepSeek-V4.1 have their own tests below)
    for name in ("Qwen/Qwen3.6-35B-A3B-FP8", "google/gemma-4-31B-it", "meta-models/Muse-Glimmer-30B"):
        result = plan(name, "H100")
        assert moment(result, "vision encoder")["bytes"] > 0, name
        assert not [u for u in result.unknowns if "encoder" in u], (name, result.unknowns)
    # a tower the plan does not read says so and adds no zero (a real snapshot under a new class name)
    snapshot = load_snapshot(snapshot_path("meta-models/Muse-Glimmer-30B"))
    config = ModelConfig.from_config(snapshot.config)
    facts, gpu = load_facts("0.33.0"), resolve_gpu("H100")
    settings = resolve_settings(snapshot, config, gpu, facts, UserSettings(max_model_len=4096))
    unread = estimate_encoder(
        "NewTowerForConditionalGeneration", config, settings, facts, {}, gpu_total_bytes=gpu.total_bytes
    )
    assert unread.moment is None and "encoder peak not modelled" in (unread.unknown or "")


def test_minimax_m3_profiles_the_longest_dummy_video():
    """mm_preprocess.py: a frame is the widest factor pair of 602,112 px / 28^2 = 768 units (24 x 32),
    768 tokens per 2 frames; the frames are the most that fit max_model_len, at most 500."""
    short = plan("MiniMaxAI/MiniMax-M3", "H100").details["encoder"]["batch"]
    # 4096 // 768 = 5 frame pairs; budget max(8192, 3840) // 3840 = 2 items
    assert (short["modality"], short["tokens_per_item"], short["items"]) == ("video", 5 * 768, 2)
    assert short["patches"] == 2 * 5 * 768 * 4
    images = plan("MiniMaxAI/MiniMax-M3", "H100", limit_mm_per_prompt=(("video", 0),)).details["encoder"]["batch"]
    # isqrt(451,584) = 672 px square: (672 / 28)^2 tokens
    assert (images["modality"], images["tokens_per_item"], images["items"]) == ("image", 24 * 24, 8192 // 576)


def test_minimax_m3_projector_on_every_patch_sets_the_encoder_peak():
    result = plan("MiniMaxAI/MiniMax-M3", "H200", tensor_parallel_size=8, max_model_len=1048576)
    batch = result.details["encoder"]["batch"]
    assert (batch["tokens_per_item"], batch["items"]) == (250 * 768, 1)  # 500 frames
    patches = 250 * 768 * 4
    encoder = buffers(result, "vision encoder")
    assert encoder["pixel values on the device"] == patches * 3 * 2 * 14 * 14 * 4  # float32
    assert encoder["projector activation output"] == patches * (6144 // 8) * 2
    # row-parallel fc2: the partial sum and the all-reduce's new tensor, both full width
    assert encoder["projector fc2 output"] == encoder["projector all-reduce output"] == patches * 6144 * 2
    assert encoder["encoder outputs held in the encoder cache"] == 250 * 768 * 6144 * 2
    assert "residual stream (patch + position embeddings)" not in encoder  # the blocks' set is smaller
    data = plan("MiniMaxAI/MiniMax-M3", "H200", tensor_parallel_size=8, mm_encoder_tp_mode="data")
    assert "projector all-reduce output" not in buffers(data, "vision encoder")
    assert not result.unknowns or all("layout" not in u for u in result.unknowns)
    text = plan("MiniMaxAI/MiniMax-M3", "H200", tensor_parallel_size=8, language_model_only=True)
    assert "vision encoder" not in {m["name"] for m in text.details["activation"]["moments"]}


def test_deepseek_v41_encodes_one_widest_image_at_a_time():
    snapshot, gpu = load_snapshot(snapshot_path("deepseek-ai/DeepSeek-V4.1-Flash")), resolve_gpu("H200")
    user = UserSettings(max_model_len=4096, tensor_parallel_size=8)
    result = plan_checkpoint(snapshot, gpu, user, engine_version="0.33.0")
    batch = result.details["encoder"]["batch"]
    # budget 1024 tokens: one aligner row of (1022 // 1 - 1) cells + newline + start/end -> 3 x 3063 patches
    assert (batch["modality"], batch["tokens_per_item"], batch["items"]) == ("image", 1024, 8192 // 1024)
    assert batch["patches"] == 8 * 3 * 3063
    encoder = buffers(result, "vision encoder")
    assert encoder["pixel values on the device"] == 8 * 3 * 3063 * 3 * 14 * 14 * 2  # bf16 from the processor
    assert encoder["residual stream (patch + position embeddings)"] == 3 * 3063 * 1024 * 2  # one image
    assert encoder["embeddings of the images already encoded"] == 7 * 3063 // 3 * 5120 * 2
    assert encoder["rotary cos and sin"] == 2 * 3 * 3063 * 32 * 4
    assert not result.unknowns
    # 0.30.0: the largest square, floor(sqrt(1022.25) - 0.5) = 31 cells of 3 patches a side
    config, older = ModelConfig.from_config(snapshot.config), load_facts("0.30.0")
    settings = resolve_settings(snapshot, config, gpu, older, user)
    assert [c.patches_per_item for c in deepseek_v41_costs(config, settings, {}, older)] == [93 * 93]


def test_hybrid_refusal_at_defaults_and_the_emitted_max_num_seqs_still_fits():
    """The state-block count is the one vLLM sees at its defaults (the refusal case), and the emitted
    --max-num-seqs is the low end of its range; re-planned with it, the S-sized terms shrink, so the
    blocks can only grow past it."""
    at_defaults = plan("Qwen/Qwen3.8-27B", "H100", max_model_len=32768, language_model_only=True)
    flag = next(f for f in at_defaults.flags if f.startswith("--max-num-seqs"))
    seqs = int(flag.split()[1])
    blocks = at_defaults.quantities["num_kv_blocks"]
    assert seqs == blocks.low < blocks.value < 1024
    corrected = plan("Qwen/Qwen3.8-27B", "H100", max_model_len=32768, language_model_only=True, max_num_seqs=seqs)
    assert corrected.quantities["num_kv_blocks"].value >= seqs
    assert not [f for f in corrected.flags if f.startswith("--max-num-seqs") and f != flag]


def test_load_window_slack_is_the_shared_segments_tails():
    """Qwen3-0.6B's layers hold 4, 2, 6 and 3 MiB parameters that share 20 MiB segments under the load's
    split limit and leave a 2 MiB tail a layer (28 layers); Qwen3-8B's and 14B's parameters are
    2 MiB multiples over the limit and leave none, so they keep only the sampler buffers' slack, which
    depends on the vocabulary and max_num_seqs they share."""
    slack = {
        name: components(plan(name, "4090", "0.29.0"))["load-window allocator slack"]
        for name in ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B")
    }
    assert abs(slack["Qwen/Qwen3-8B"] - slack["Qwen/Qwen3-14B"]) < MIB  # small-pool norms differ
    assert slack["Qwen/Qwen3-0.6B"] - slack["Qwen/Qwen3-8B"] >= 28 * 2 * MIB


def test_graph_estimate_follows_vllms_extrapolation():
    """profile_cudagraph_memory keeps the first FULL sample and stands the second, floored at 1 MiB, for
    every later FULL graph; a new capture stream brings its own cuBLAS workspace segment (32 MiB on
    Hopper against the 20 MiB segment already in the fit's intercept)."""
    h100 = components(plan("Qwen/Qwen3-32B", "H100", "0.29.0", max_model_len=640), "cudagraphs")
    ada = components(plan("Qwen/Qwen3-8B", "4090", "0.29.0", max_model_len=640), "cudagraphs")
    per_graph = int(0.0123 * 2**30 / 86 * 64)
    assert h100["FULL graphs extrapolated from the second sample"] == 50 * per_graph  # 51 FULL sizes up to 512
    assert h100["capture stream's cuBLAS workspace (beyond the fit's GPUs)"] == 12 * MIB
    assert "capture stream's cuBLAS workspace (beyond the fit's GPUs)" not in ada
    assert ada["FULL graphs extrapolated from the second sample"] == 34 * int(0.0123 * 2**30 / 86 * 36)


def test_hopper_workspace_lands_in_the_compile_copy_before_031():
    """Hopper's 32 MiB cuBLAS workspace cannot use a 20 MiB segment's remainder, so before 0.31 it lands
    in the freed embedding-table copy and keeps its whole segment (observed on both H100 boots); from
    0.31 the split limit keeps the copy whole and releasable, and 0.33 creates the workspace before the
    snapshot."""
    table_segment = -(-151936 * 5120 * 2 // (2 * MIB)) * 2 * MIB
    retained = {
        engine: components(plan("Qwen/Qwen3-32B", "H100", engine))["retained allocator segments"]
        for engine in ("0.29.0", "0.31.0", "0.33.0")
    }
    assert retained == {"0.29.0": table_segment - 32 * MIB, "0.31.0": 0, "0.33.0": 0}
    # tensor parallelism routes the embedding to vLLM's own op: no copy, nothing kept
    assert (
        components(plan("Qwen/Qwen3-32B", "H100", "0.29.0", tensor_parallel_size=2))["retained allocator segments"] == 0
    )
