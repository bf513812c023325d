"""The six newest layouts end to end: DeepSeek-V4, DeepSeek-V4.1, GLM-5.3 (DSA), GLM-5.3-Flash,
Qwen3.8-Flash-Next and MiniMax-M3, planned from their real snapshots. The per-layer specs, blocks and
groups are checked against vLLM-built models in test_kv_conformance.py; here: the plan around them
(releases, refusals, weights, host RAM, flags, bad input)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from apron.errors import BadInput
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot

GIB = 2**30
DSV4, DSV41 = "deepseek-ai/DeepSeek-V4-Flash-0731", "deepseek-ai/DeepSeek-V4.1-Flash"
GLM, GLM_FLASH = "zai-org/GLM-5.3", "zai-org/GLM-5.3-Flash"
QWEN, MINIMAX = "Qwen/Qwen3.8-Flash-Next", "MiniMaxAI/MiniMax-M3"
SIX = (DSV4, DSV41, GLM, GLM_FLASH, QWEN, MINIMAX)


def plan(model: str, gpu: str = "H200", tp: int = 8, engine: str | None = None, **user):
    settings = UserSettings(tensor_parallel_size=tp, max_model_len=user.pop("max_model_len", 32768), **user)
    return plan_checkpoint(loaded_snapshot(model), resolve_gpu(gpu), settings, engine)


@pytest.mark.parametrize("model", SIX)
@pytest.mark.parametrize("gpu,tp", [("H200", 4), ("H200", 8), ("B200", 4), ("B200", 2)])
def test_text_path_has_no_unknown(model, gpu, tp, apron_home_with_facts):
    p = plan(model, gpu, tp, language_model_only=True)
    assert not p.unknowns, p.unknowns
    assert not [name for name, q in p.quantities.items() if q.label == "unknown"]
    assert p.verdict in ("fits", "tight", "does_not_fit")
    if p.verdict == "tight":
        assert any(q.kind == "fix" and "at the low end of the range" in q.message for q in p.problems)
    if p.verdict == "does_not_fit":
        kinds = {problem.kind for problem in p.problems}
        assert kinds & {"weights_exceed_request", "kv_cache_too_small", "no_kv_memory"}, kinds
    else:
        assert p.quantities["kv_tokens"].value > 0 and p.quantities["num_kv_blocks"].value > 0
    assert p.details["weights"]["unknown_layout_tensors"] == []


def test_deepseek_v4_fp8_record_whatever_the_kv_dtype_and_bf16_refused(apron_home_with_facts):
    auto, fp8 = plan(DSV4), plan(DSV4, kv_cache_dtype="fp8")
    assert auto.quantities["kv_block_bytes"].value == fp8.quantities["kv_block_bytes"].value == 1_002_240
    assert auto.details["kv"]["groups"] == [22, 21, 62, 42, 20]
    assert auto.quantities["kv_bytes_per_token"].value is None  # windows and compressed states
    # Every cache is one head, the same on every rank: TP does not change the block.
    assert plan(DSV4, tp=4).quantities["kv_block_bytes"].value == 1_002_240
    refused = plan(DSV4, kv_cache_dtype="bfloat16")
    assert refused.verdict == "does_not_fit"
    problem = next(p for p in refused.problems if p.kind == "kv_cache_dtype")
    assert problem.label == "proven_constraint" and "only supports fp8 kv-cache" in problem.message


def test_deepseek_v4_has_no_kernel_below_hopper(apron_home_with_facts):
    p = plan(DSV4, "A100", 8)
    assert p.verdict == "does_not_fit"
    assert any(x.kind == "compute_capability" and x.label == "proven_constraint" for x in p.problems)


def test_deepseek_v41_mega_attention_on_blackwell_and_its_stride_from_033(apron_home_with_facts):
    hopper = plan(DSV41, "H200", 4, language_model_only=True)
    assert hopper.details["kv"]["block_size"] == 64 and hopper.quantities["kv_block_bytes"].value == 116_928
    v032 = plan(DSV41, "B200", 4, "0.32.0", language_model_only=True)
    v033 = plan(DSV41, "B200", 4, "0.33.0", language_model_only=True)
    # NVFP4 compressed records (288 B) on both; 0.33 rounds the packed block up to lcm(528, 288).
    assert v032.quantities["kv_block_bytes"].value == 135_168
    assert v033.quantities["kv_block_bytes"].value == 136_224 == -(-135_168 // 3168) * 3168
    # 0.31 brings mega attention; 0.30 keeps FlashMLA's 528-B records on Blackwell (nvidia/model.py).
    assert plan(DSV41, "B200", 4, "0.31.0", language_model_only=True).quantities["kv_block_bytes"].value == 135_168
    v030 = plan(DSV41, "B200", 4, "0.30.0", language_model_only=True)
    assert v030.quantities["kv_block_bytes"].value == 211_968 and v030.details["kv"]["block_size"] == 128
    assert plan(DSV41, "H200", 4, "0.30.0", language_model_only=True).quantities["kv_block_bytes"].value == 116_928


def test_deepseek_v41_kv_dtypes_by_release(apron_home_with_facts):
    # 0.30 packs every fp8* dtype as fp8_ds_mla; 0.31 takes auto and fp8 only (_resolve_dsv4_kv_cache_dtype).
    v030 = plan(DSV41, "H200", 8, "0.30.0", language_model_only=True, kv_cache_dtype="fp8_e4m3")
    assert v030.quantities["kv_block_bytes"].value == 116_928
    v031 = plan(DSV41, "H200", 8, "0.31.0", language_model_only=True, kv_cache_dtype="fp8_e4m3")
    assert v031.verdict == "does_not_fit"
    assert any(p.kind == "kv_cache_dtype" and "only support fp8" in p.message for p in v031.problems)


@pytest.mark.parametrize("model", (GLM_FLASH, QWEN, DSV41))
@pytest.mark.parametrize("engine", ("0.30.0", "0.31.0"))
@pytest.mark.parametrize("gpu,tp", [("H200", 4), ("B200", 2)])
def test_the_new_models_plan_on_the_release_that_first_registered_them(model, engine, gpu, tp, apron_home_with_facts):
    p = plan(model, gpu, tp, engine, language_model_only=True)
    assert not p.unknowns, p.unknowns
    assert p.verdict in ("fits", "tight", "does_not_fit")
    for name in ("kv_tokens", "max_concurrency", "num_kv_blocks", "kv_block_bytes"):
        assert p.quantities[name].label != "unknown", name
    if p.verdict == "fits":
        assert p.quantities["kv_tokens"].value > 0 and p.quantities["max_concurrency"].value > 0


def test_n_gram_tables_live_in_host_ram(apron_home_with_facts):
    for model, table_gib in ((DSV41, 188.8), (QWEN, 95.4)):
        p = plan(model, language_model_only=True)
        skipped = {s["reason"]: s["bytes"] for s in p.details["weights"]["skipped"]}
        table = next(n for r, n in skipped.items() if r.startswith("n-gram tables"))
        assert abs(table / GIB - table_gib) < 0.1
        host = p.quantities["host_ram_bytes"]
        assert host.value > table and "pinned n-gram tables" in host.basis
        small = plan(model, language_model_only=True, host_ram_bytes=64 * GIB)
        assert small.verdict == "does_not_fit"
        problem = next(x for x in small.problems if x.kind == "host_ram_exceeded")
        assert "--host-ram-bytes" in problem.message and "cpu_offload" in problem.message
    assert plan(DSV4).details["weights"]["skipped"][0]["reason"].startswith("MTP")


def test_glm53_indexers_and_fp8_ds_mla(apron_home_with_facts):
    p = plan(GLM)
    assert p.quantities["kv_bytes_per_token"].value == 78 * 576 * 2 + 21 * 132
    assert p.details["kv"]["groups"] == [99]
    fp8 = plan(GLM, kv_cache_dtype="fp8")
    assert fp8.quantities["kv_bytes_per_token"].value == 78 * 656 + 21 * 132
    assert "--reasoning-parser glm45" in p.flags


def test_glm53_flash_hybrid_block_and_older_grouping_path(apron_home_with_facts):
    p = plan(GLM_FLASH, tp=1, engine="0.32.0", gpu="H200", language_model_only=True, max_model_len=8192)
    assert p.details["kv"]["block_size"] == 4352  # 128 x cdiv(KDA state, 128 x 1024 B)
    assert p.details["kv"]["mamba_cache_mode"] == "align"
    packed = p.quantities["kv_block_bytes"].value
    for engine in ("0.30.0", "0.31.0"):
        # _get_kv_cache_groups_glm5_next: MLA + indexer in one group, the tails, the KDA layers in
        # cdiv(34, 11) = 4 groups; a block is the 11 MLA pages and the 11 indexer pages only.
        old = plan(GLM_FLASH, tp=1, engine=engine, gpu="H200", language_model_only=True, max_model_len=8192)
        assert old.details["kv"]["block_size"] == 4352 and not old.unknowns
        assert sorted(old.details["kv"]["groups"]) == [8, 8, 9, 9, 11, 22]
        assert old.quantities["kv_block_bytes"].value == 11 * 4352 * 1024 + 11 * (4352 // 4) * 132 == 50_600_704
        assert packed != 50_600_704
    assert plan(GLM_FLASH, engine="0.29.0", language_model_only=True).verdict == "unsupported"


def test_qwen38_flash_next_ple_state_is_replicated(apron_home_with_facts):
    from apron.engine.facts import load_facts
    from apron.plan.kv.layouts import build_layout
    from apron.plan.model_config import ModelConfig
    from apron.plan.settings import resolve_settings

    checkpoint = loaded_snapshot(QWEN)
    config = ModelConfig.from_config(checkpoint.config)
    facts, gpu = load_facts("0.33.0"), resolve_gpu("H200")
    shapes = {}
    for tp in (1, 8):
        settings = resolve_settings(
            checkpoint, config, gpu, facts, UserSettings(tensor_parallel_size=tp, language_model_only=True)
        )
        layout = build_layout(
            checkpoint.architecture, config, settings, facts, capability=(9, 0), is_attention_free=False
        )
        specs = dict(layout.specs)
        shapes[tp] = (specs["layers.1.ple"].shapes, specs["layers.0.linear_attn"].shapes)
        assert specs["layers.1.ple"].tp_replicated
    assert shapes[1][0] == shapes[8][0] == ((9, 10240),)  # the whole PLE state on every rank
    assert shapes[8][1][1] == (6, 128, 128)  # the delta-net state splits by value head
    assert "--reasoning-parser qwen3" in plan(QWEN, language_model_only=True).flags


def test_qwen38_flash_next_fp8_kv_from_031(apron_home_with_facts):
    old = plan(QWEN, "H200", 4, "0.30.0", language_model_only=True, kv_cache_dtype="fp8")
    assert old.verdict == "does_not_fit"
    assert any(p.kind == "kv_cache_dtype" and "requires a BF16 main KV cache" in p.message for p in old.problems)
    new = plan(QWEN, "H200", 4, "0.31.0", language_model_only=True, kv_cache_dtype="fp8")
    assert not new.unknowns and new.verdict in ("fits", "tight", "does_not_fit")
    bf16 = plan(QWEN, "H200", 4, "0.31.0", language_model_only=True)
    # one-byte keys and values: the block that holds a delta-net state doubles
    assert new.details["kv"]["block_size"] == 2 * bf16.details["kv"]["block_size"] == 1568


def test_minimax_m3_block_size_refusal_before_031(apron_home_with_facts):
    for engine in ("0.29.0", "0.30.0"):
        old = plan(MINIMAX, engine=engine, language_model_only=True)
        assert old.verdict == "does_not_fit"
        problem = next(p for p in old.problems if p.kind == "block_size")
        assert "No common block size for 16" in problem.message and "--block-size 128" in problem.message
    new = plan(MINIMAX, engine="0.31.0", language_model_only=True)
    assert new.details["kv"]["block_size"] == 128 and new.details["kv"]["groups"] == [117]


def test_tokenizer_mode_is_the_releases_default_no_flag(apron_home_with_facts):
    p = plan(DSV41, language_model_only=True)
    assert not any("--tokenizer-mode" in f for f in p.flags)
    assert any("'deepseek_v41'" in n and "no --tokenizer-mode flag needed" in n for n in p.notes)


BAD = [
    (
        "negative window",
        {
            "architectures": ["DeepseekV4ForCausalLM"],
            "model_type": "deepseek_v4",
            "compress_ratios": [0, 4],
            "sliding_window": -128,
            "head_dim": 512,
            "index_head_dim": 128,
            "index_n_heads": 64,
            "index_topk": 512,
        },
        "sliding_window is -128",
    ),
    (
        "indexer with 0 heads",
        {
            "architectures": ["GlmMoeDsaForCausalLM"],
            "model_type": "glm_moe_dsa",
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "index_head_dim": 128,
            "index_n_heads": 0,
            "index_topk": 2048,
        },
        "index_n_heads",
    ),
    (
        "compress ratio 0",
        {
            "architectures": ["Qwen4ExpForConditionalGeneration"],
            "model_type": "qwen4_exp",
            "indexer_compress_ratio": 0,
            "indexer_head_dim": 128,
            "indexer_n_heads": 4,
        },
        "indexer_compress_ratio is 0",
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[b[0] for b in BAD])
def test_bad_new_fields_are_one_line_exit_2(case, tmp_path, apron_home_with_facts):
    _, fields, wording = case
    config = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 128}
    config.update(fields, torch_dtype="bfloat16")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    result = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", str(folder), "--gpu", "H200"], capture_output=True, text=True
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "config.json" in lines[0] and wording in lines[0], lines


def test_bad_input_is_raised_not_swallowed(apron_home_with_facts):
    from apron.checkpoint.snapshot import load_snapshot
    from conftest import snapshot_document

    doc = snapshot_document(MINIMAX)
    doc["files"]["config.json"]["text_config"]["sparse_attention_config"]["sparse_num_index_heads"] = 0
    with pytest.raises(BadInput, match="sparse_num_index_heads"):
        plan_checkpoint(
            load_snapshot("m3.json", document=doc), resolve_gpu("H200"), UserSettings(tensor_parallel_size=8)
        )


def test_host_ram_flag_must_be_positive(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", str(tmp_path), "--gpu", "H200", "--host-ram-bytes", "0"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == ["apron: error: --host-ram-bytes 0 must be a positive integer"]


def test_a_multimodal_plan_that_fits_no_length_at_its_budget_names_a_shorter_one_that_fits():
    """MiniMax-M3 at its 1M default profiles a 500-frame dummy video that leaves no KV memory on 8 x H200;
    the dummy batch shrinks with --max-model-len, so the advice re-plans shorter lengths."""
    checkpoint = loaded_snapshot("MiniMaxAI--MiniMax-M3")
    h200 = resolve_gpu("H200")
    plan = plan_checkpoint(checkpoint, h200, UserSettings(tensor_parallel_size=8), "0.33.0")
    assert plan.verdict == "does_not_fit"
    fixes = [p.message for p in plan.problems if p.kind == "fix"]
    assert not any(f.startswith("no max_model_len fits") for f in fixes)
    (advice,) = [f for f in fixes if f.startswith("--max-model-len ")]
    length = int(advice.split()[1])
    assert length < plan.settings.max_model_len

    def verdict(max_model_len: int) -> str:
        user = UserSettings(tensor_parallel_size=8, max_model_len=max_model_len)
        return plan_checkpoint(checkpoint, h200, user, "0.33.0").verdict

    # the advice fits at the low end of the range; twice the length does not (or only above it)
    assert verdict(length) == "fits" and verdict(2 * length) in ("tight", "does_not_fit")


def test_buffers_made_at_construction_count_with_the_weights(apron_home_with_facts):
    """Qwen3.8-Flash-Next's 12 QSA layers each register an int32 [T, budget + ratio] selection buffer
    when the model is built (nvidia/qsa.py): inside load_model, so vLLM's "Model loading took" holds
    them, and the profiling peak (measured above what is allocated after loading) does not."""
    p = plan(QWEN, "H200", 4, "0.30.0", language_model_only=True)
    tokens = p.settings.max_num_batched_tokens
    one = tokens * (2048 + 4) * 4
    line = next(g for g in p.details["weights"]["groups"] if g["group"] == "buffers made at construction")
    assert line["bytes_per_gpu"] == 12 * (-(-one // 2**21) * 2**21)  # each 2 MiB-rounded (over 20 MiB)
    names = {b["name"] for m in p.details["activation"]["moments"] for b in m.get("buffers", [])}
    assert not any("QSA top-k" in n for n in names)
