"""The KV half of the plan: unknown layouts stay unknown, hybrids get --max-num-seqs, the JSON
contract is filled, and the numbers follow the engine's formulas."""

from __future__ import annotations

import json

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.result import REQUIRED_QUANTITIES
from apron.plan.settings import UserSettings
from conftest import loaded_snapshot, snapshot_document, snapshot_names, snapshot_path

GIB = 2**30


def checkpoint_with(name: str, **text_fields):
    doc = snapshot_document(name)
    config = doc["files"]["config.json"]
    target = config.get("text_config") or config
    target.update(text_fields)
    return load_snapshot("mutated.json", document=doc)


UNMODELLED = [
    ("Qwen/Qwen3-8B", {"index_topk": 2048, "index_n_heads": 64}),  # sparse-attention indexer
    ("Qwen/Qwen3-8B", {"compress_ratios": [4, 4, 128]}),  # compressed KV records
    ("meta-llama/Llama-3.1-8B-Instruct", {"ring_buffer_size": 4096}),  # ring buffer
    ("meta-llama/Llama-3.1-8B-Instruct", {"hyper_connections": 4}),  # hyper-connections
    ("Qwen/Qwen3-8B", {"ngram_vocab_size_ratio": 4}),  # n-gram tables
    ("Qwen/Qwen3-8B", {"sparse_attention_config": {"block": 64}}),  # sparse attention
    ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", {"use_replayssm": True}),  # replay SSM ring state
    ("mistralai/Mistral-7B-Instruct-v0.3", {"attention_sink_size": 4}),  # attention sinks in the cache
    ("Qwen/Qwen3-8B", {"kv_lora_rank": 512, "qk_rope_head_dim": 64}),  # MLA fields, non-MLA family
    ("google/gemma-2-2b-it", {"rswa_window": 1024}),  # reference sliding window
    ("openai/gpt-oss-20b", {"linear_attn_config": {"kda_layers": [1, 2]}}),  # linear attention layout
]


@pytest.mark.parametrize("name,fields", UNMODELLED, ids=[next(iter(f)) for _, f in UNMODELLED])
def test_unmodelled_layout_fields_make_the_kv_side_unknown(name, fields, apron_home_with_facts):
    plan = plan_checkpoint(
        checkpoint_with(name, **fields), resolve_gpu("H200"), UserSettings(max_model_len=8192, language_model_only=True)
    )
    assert plan.verdict == "unknown"
    for quantity in ("kv_block_bytes", "num_kv_blocks", "kv_tokens", "max_concurrency"):
        assert plan.quantities[quantity].label == "unknown" and plan.quantities[quantity].value is None
    assert any(next(iter(fields)) in u for u in plan.unknowns), plan.unknowns


def test_unmodelled_field_still_does_not_fit_when_weights_alone_exceed(apron_home_with_facts):
    plan = plan_checkpoint(checkpoint_with("Qwen/Qwen3-32B", index_topk=2048), resolve_gpu("4090"), UserSettings())
    assert plan.verdict == "does_not_fit"
    assert plan.quantities["kv_tokens"].label == "unknown"


# Layouts expected to stay unknown (none: issue 10 modelled the second wave's newest six).
NEW_LAYOUTS: set[str] = set()


def test_unmodified_configs_are_modelled(apron_home_with_facts):
    for name in sorted(set(snapshot_names()) - NEW_LAYOUTS):
        plan = plan_checkpoint(
            loaded_snapshot(name),
            resolve_gpu("B200"),
            UserSettings(max_model_len=4096, language_model_only=True),
        )
        assert not [u for u in plan.unknowns if "config field" in u], (name, plan.unknowns)


def test_multimodal_encoder_peak_is_modelled_and_language_model_only_drops_it(apron_home_with_facts):
    plan = plan_checkpoint(
        load_snapshot(snapshot_path("google/gemma-4-31B-it")), resolve_gpu("H200"), UserSettings(max_model_len=8192)
    )
    moments = {m["name"]: m for m in plan.details["activation"]["moments"]}
    assert moments["vision encoder"]["bytes"] > 0 and plan.details["encoder"]["batch"]["modality"] == "video"
    assert plan.quantities["available_kv_bytes"].value is not None
    text_only = plan_checkpoint(
        load_snapshot(snapshot_path("google/gemma-4-31B-it")),
        resolve_gpu("H200"),
        UserSettings(max_model_len=8192, language_model_only=True),
    )
    assert "vision encoder" not in {m["name"] for m in text_only.details["activation"]["moments"]}
    assert text_only.quantities["activation_peak_bytes"].value > 0


def test_hybrid_gets_max_num_seqs_at_or_below_its_state_blocks(apron_home_with_facts):
    plan = plan_checkpoint(
        load_snapshot(snapshot_path("Qwen/Qwen3.8-27B")),
        resolve_gpu("H100"),
        UserSettings(max_model_len=32768, language_model_only=True),
    )
    blocks = plan.quantities["num_kv_blocks"].value
    assert blocks < 1024  # the H100's default max_num_seqs
    flag = next(f for f in plan.flags if f.startswith("--max-num-seqs"))
    assert int(flag.split()[1]) <= blocks
    assert flag in plan.command
    assert plan.verdict == "fits"
    problem = next(p for p in plan.problems if p.kind == "max_num_seqs_exceeds_state_blocks")
    assert f"max_num_seqs (1024) exceeds available Mamba cache blocks ({blocks})" in problem.message


def test_hybrid_with_enough_blocks_needs_no_flag(apron_home_with_facts):
    plan = plan_checkpoint(
        load_snapshot(snapshot_path("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16")),
        resolve_gpu("B200"),
        UserSettings(max_model_len=8192),
    )
    assert plan.quantities["num_kv_blocks"].value >= 1024
    assert not any(f.startswith("--max-num-seqs") for f in plan.flags)


def test_json_contract_is_filled(apron_home_with_facts):
    plan = plan_checkpoint(load_snapshot(snapshot_path("Qwen/Qwen3-8B")), resolve_gpu("H100"), UserSettings())
    doc = json.loads(json.dumps(plan.to_json()))
    assert doc["schema"] == "apron.plan/1"
    assert set(REQUIRED_QUANTITIES) <= set(doc["quantities"])
    for name in REQUIRED_QUANTITIES:
        q = doc["quantities"][name]
        assert q["value"] is not None, name
        assert q["label"] in ("derived", "proven_constraint", "predicted", "measured")
        assert q["unit"] in ("bytes", "tokens", "sequences", "blocks") and q["basis"]
    assert doc["verdict"] == "fits"
    assert doc["command"].startswith("vllm serve Qwen/Qwen3-8B")
    for key in (
        "tensor_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "kv_cache_dtype",
        "dtype",
        "enforce_eager",
    ):
        assert key in doc["settings"]


def test_kv_tokens_follow_the_engine_formula_not_bytes_per_token(apron_home_with_facts):
    """max_model_len 1000 is not a multiple of the 16-token block: the engine reports
    int(blocks / cdiv(1000, 16) * 1000), fewer than blocks * 16."""
    plan = plan_checkpoint(
        load_snapshot(snapshot_path("meta-llama/Llama-3.1-8B-Instruct")),
        resolve_gpu("H100"),
        UserSettings(max_model_len=1000),
    )
    q = {k: v.value for k, v in plan.quantities.items()}
    assert q["kv_tokens"] == int(q["num_kv_blocks"] / 63 * 1000)
    assert q["kv_tokens"] < q["num_kv_blocks"] * 16
    assert q["num_kv_blocks"] == q["available_kv_bytes"] // q["kv_block_bytes"]
    assert q["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2


def test_fp8_kv_cache_halves_attention_pages(apron_home_with_facts):
    ckpt = load_snapshot(snapshot_path("Qwen/Qwen3-8B"))
    bf16 = plan_checkpoint(ckpt, resolve_gpu("H100"), UserSettings())
    fp8 = plan_checkpoint(ckpt, resolve_gpu("H100"), UserSettings(kv_cache_dtype="fp8"))
    assert fp8.quantities["kv_block_bytes"].value * 2 == bf16.quantities["kv_block_bytes"].value
    assert "--kv-cache-dtype fp8" in fp8.flags


def test_one_request_too_long_is_refused_with_the_engines_message_and_a_fix(apron_home_with_facts):
    plan = plan_checkpoint(load_snapshot(snapshot_path("Qwen/Qwen3-8B")), resolve_gpu("4090"), UserSettings())
    assert plan.verdict == "does_not_fit"
    refusal = next(p for p in plan.problems if p.kind == "kv_cache_too_small")
    assert refusal.message.startswith("To serve at least one request with the model's max seq len (40960)")
    assert "the estimated maximum model length is" in refusal.message
    fix = next(p for p in plan.problems if p.kind == "fix")
    length = int(fix.message.split("--max-model-len ")[1].split(";")[0])
    shorter = plan_checkpoint(
        load_snapshot(snapshot_path("Qwen/Qwen3-8B")), resolve_gpu("4090"), UserSettings(max_model_len=length)
    )
    assert shorter.verdict == "fits"


def test_eager_mode_has_no_graphs_and_no_compile_transient(apron_home_with_facts):
    plan = plan_checkpoint(
        load_snapshot(snapshot_path("Qwen/Qwen3-8B")),
        resolve_gpu("4090"),
        UserSettings(max_model_len=4096, enforce_eager=True),
    )
    assert plan.quantities["cudagraph_bytes"].value == 0
    assert plan.details["activation"]["peak"] != "compile transient"
    assert plan.settings.cudagraph_capture_sizes == ()


def test_registered_stateful_architecture_without_a_modelled_family_is_unknown(apron_home_with_facts):
    doc = snapshot_document("meta-llama/Llama-3.1-8B-Instruct")
    doc["files"]["config.json"]["architectures"] = ["FalconH1ForCausalLM"]
    plan = plan_checkpoint(
        load_snapshot("falcon-h1.json", document=doc), resolve_gpu("H100"), UserSettings(max_model_len=8192)
    )
    assert plan.verdict == "unknown"
    assert any("recurrent state" in u for u in plan.unknowns)


def test_parsers_follow_the_checkpoints_chat_template(apron_home_with_facts):
    from dataclasses import replace

    from apron.plan.parsers import family_parsers

    llama = load_snapshot(snapshot_path("meta-llama/Llama-3.1-8B-Instruct"))
    assert family_parsers(llama).tool == "llama3_json"  # no template shipped: the family's format
    chatml = replace(llama, chat_template="{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}")
    assert family_parsers(chatml).tool is None
    hermes = replace(llama, chat_template=chatml.chat_template + "{% if tools %}<tool_call>{% endif %}")
    assert family_parsers(hermes).tool == "hermes"
    qwen = load_snapshot(snapshot_path("Qwen/Qwen3-8B"))
    assert family_parsers(replace(qwen, chat_template="<think></think><tool_call>")).reasoning == "qwen3"
    assert family_parsers(replace(qwen, chat_template="plain")).reasoning is None


def test_backend_follows_the_releases_priority_and_kv_dtypes(apron_home_with_facts):
    """FLASH_ATTN_MLA leads the Hopper MLA list but lists no fp8 KV cache dtype, so an fp8 cache
    falls to FLASHMLA and its 64-token kernel block (platforms/cuda.py, flashattn_mla.py)."""
    checkpoint = load_snapshot(snapshot_path("deepseek-ai/DeepSeek-V2-Lite"))
    auto = plan_checkpoint(checkpoint, resolve_gpu("H100"), UserSettings(max_model_len=8192))
    fp8 = plan_checkpoint(checkpoint, resolve_gpu("H100"), UserSettings(max_model_len=8192, kv_cache_dtype="fp8"))
    assert (auto.details["kv"]["backend"], auto.details["kv"]["block_size"]) == ("FLASH_ATTN_MLA", 16)
    assert (fp8.details["kv"]["backend"], fp8.details["kv"]["block_size"]) == ("FLASHMLA", 64)
    assert "FLASH_ATTN_MLA: kv cache dtype fp8" in next(n for n in fp8.notes if "FLASHMLA" in n)
