"""The shipped facts (src/apron/engine/data): every release from 0.29.0 loads, has the schema, and
agrees with what the research and an independent count of the real wheels say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import engine_wheel  # tests/fixtures/engine_wheel.py
import pytest

from apron.engine.diff import diff_facts
from apron.engine.facts import _shipped_files, choose_version, load_facts
from apron.engine.sync import sync

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ["0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"]
# An independent count of the real wheels (scripts/count_wheel_registries.py) and the research notes.
COUNTS = {
    "0.29.0": (376, 32, 49),
    "0.30.0": (386, 34, 51),
    "0.31.0": (387, 35, 51),
    "0.32.0": (391, 38, 54),
    "0.33.0": (415, 42, 58),
}
SCHEMA_KEYS = {
    "schema",
    "extractor_version",
    "engine",
    "version",
    "source",
    "pins",
    "registry",
    "config_hooks",
    "defaults",
    "quantization",
    "attention_backends",
    "backend_priority",
    "parsers",
    "tokenizer",
    "log_formats",
    "refusals",
    "mirrored_functions",
}
ARCH_KEYS = {
    "module",
    "class",
    "category",
    "is_hybrid",
    "is_attention_free",
    "has_inner_state",
    "supports_multimodal",
    "supports_pp",
    "is_moe",
}
DEFAULT_KEYS = {
    "gpu_memory_utilization",
    "block_size",
    "kv_cache_dtype",
    "dtype",
    "vocab_padding_size",
    "scheduler",
    "batch_tiers",
    "cudagraph",
    "optimization_level",
    "cudagraph_mode_by_level",
    "env",
}


def test_every_release_from_0_29_is_shipped():
    assert set(SHIPPED) <= set(_shipped_files())


@pytest.mark.parametrize("version", SHIPPED)
def test_shipped_facts_load_with_the_schema(version, apron_home):
    facts = load_facts(version)
    data = {**facts.data, "log_formats": facts.log_formats, "refusals": facts.refusals}
    assert facts.log_formats and facts.refusals
    assert SCHEMA_KEYS <= set(data) and data["schema"] == "apron.engine-facts/1" and data["version"] == version
    assert data["source"]["kind"] == "wheel" and len(data["source"]["sha256"]) == 64
    assert data["source"]["filename"] == f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert data["pins"]["torch"].startswith("torch==")
    assert all(ARCH_KEYS <= set(entry) for entry in facts.architectures.values())
    assert DEFAULT_KEYS <= set(facts.defaults)
    assert {"previously_supported", "out_of_tree"} <= set(data["registry"])
    assert {"modes", "literal", "arch_defaults"} <= set(data["tokenizer"])
    assert data["gaps"] == []
    assert (len(facts.architectures), len(facts.reasoning_parsers), len(facts.tool_parsers)) == COUNTS[version]
    assert all({"file", "function", "level", "format"} == set(e) for e in data["log_formats"])
    assert all({"file", "function", "exception", "template"} == set(e) for e in data["refusals"])
    assert all(key.count(":") == 1 and len(digest) == 64 for key, digest in data["mirrored_functions"].items())


def test_registries_change_between_releases(apron_home):
    assert load_facts("0.30.0").architecture("DeepseekV41ForCausalLM") is not None
    assert load_facts("0.29.0").architecture("DeepseekV41ForCausalLM") is None  # added in 0.30.0
    assert load_facts("0.32.0").architecture("MedusaModel") is not None
    assert load_facts("0.33.0").architecture("MedusaModel") is None  # removed in 0.33.0
    assert choose_version("MedusaModel", SHIPPED).version == "0.32.0"
    assert load_facts("0.33.0").architecture("GlmForCausalLM")["module"] == "vllm.model_executor.models.transformers"
    diff = diff_facts(load_facts("0.32.0").full_data, load_facts("0.33.0").full_data)
    assert "MedusaModel" in diff["architectures"]["removed"]
    # 0.33 moved KV grouping to v1/core/kv_cache_planning.py: a move, found by qualified name
    assert diff["mirrored_functions"]["moved"]["_check_enough_kv_cache_memory"] == [
        ["v1/core/kv_cache_utils.py"],
        ["v1/core/kv_cache_planning.py"],
    ]


def test_known_facts_of_real_releases(apron_home):
    v33, v29 = load_facts("0.33.0"), load_facts("0.29.0")
    assert v33.defaults["gpu_memory_utilization"] == 0.92 and v33.defaults["block_size"] == 16
    h100 = v33.batch_defaults(85_017_493_504, "NVIDIA H100 80GB HBM3", (9, 0))
    assert (h100.max_num_seqs, h100.max_num_batched_tokens) == (1024, 8192)
    a100 = v29.batch_defaults(85_174_583_296, "NVIDIA A100-SXM4-80GB", (8, 0))
    assert (a100.max_num_seqs, a100.max_num_batched_tokens) == (256, 2048)
    h200 = v33.batch_defaults(150_110_011_392, "NVIDIA H200", (9, 0))
    assert (h200.max_num_seqs, h200.max_num_batched_tokens) == (1024, 8192)  # 140 GiB < 160 GiB
    assert v33.cudagraph_default_max_size((10, 0)) == 1024 and v33.cudagraph_default_max_size((9, 0)) == 512
    assert v33.defaults["cudagraph"]["adds_max_num_seqs"] and not v29.defaults["cudagraph"]["adds_max_num_seqs"]
    assert v33.defaults["cudagraph_mode_by_level"]["O2"] == "FULL_AND_PIECEWISE"
    assert v33.env_default("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") is True
    arch = v33.architecture("Qwen3NextForCausalLM")
    assert arch["is_hybrid"] and arch["has_inner_state"] and arch["is_moe"]
    assert v33.architecture("MambaForCausalLM")["is_attention_free"]
    assert v33.quantization("gptq")["min_capability"] == 60 and v33.quantization("fp_quant")["min_capability"] == 100
    refusal = v33.quantization_capability_refusal("fp8", (7, 0))
    assert refusal.message == (
        "The quantization method fp8 is not supported for the current GPU. Minimum capability: "
        "75. Current capability: 70."
    )
    assert v33.unregistered_architecture_refusal(["MPTForCausalLM"]).message.startswith(
        "Model architecture MPTForCausalLM was supported in vLLM until v0.28.0"
    )
    assert "bart-plugin" in v33.unregistered_architecture_refusal(["BartModel"]).message
    assert v33.default_tokenizer_mode("DeepseekV32ForCausalLM") == "deepseek_v32"
    assert v33.reasoning_parser("openai_gptoss") and v33.tool_parser("hermes")
    assert v33.has_tokenizer_mode("alpamayo2_super") and not v33.has_tokenizer_mode("slow")
    assert v29.has_tokenizer_mode("slow")
    assert v33.attention_backend("FLASH_ATTN")["kernel_block_sizes"] == [{"multiple_of": 16}]
    assert v33.attention_backend("CUTLASS_MLA")["kernel_block_sizes"] == [128]
    assert v33.backend_priority((9, 0))[:2] == ["FLASH_ATTN", "FLASHINFER"]
    assert v33.backend_priority((10, 0), use_mla=True)[0] == "FLASHINFER_MLA"
    formats = {e["format"] for e in v29.log_formats}
    assert "GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx" in formats
    assert "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx" in {
        e["format"] for e in v33.log_formats
    }


@pytest.mark.parametrize("version", SHIPPED)
def test_profiling_functions_of_real_releases(version, apron_home):
    """Both model runners' profile_run (V1 gpu_model_runner.py, which the CPU runner inherits, and V2
    gpu/model_runner.py) and the CPU warm-ups that call it, in every shipped release."""
    facts = load_facts(version)
    assert facts.profiling_functions == [
        "vllm.v1.worker.gpu.model_runner:GPUModelRunner.profile_run",
        "vllm.v1.worker.gpu_model_runner:GPUModelRunner.profile_run",
    ]
    warm_ups = facts.data["profiling"]["cpu_warm_up"]
    assert {w["qualname"] for w in warm_ups} == {"CPUModelRunner.warming_up_model"}
    assert all(w["calls_profile_run"] for w in warm_ups)


def test_independent_count_script_agrees_with_the_extractor(tmp_path):
    wheel = engine_wheel.build_wheel(tmp_path / "w")
    sync(str(wheel), tmp_path / "facts")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "count_wheel_registries.py"),
            str(wheel),
            "--check",
            "--json",
            "--data-dir",
            str(tmp_path / "facts"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)[0]
    assert row["architectures"] == 11 and row["matches_shipped_facts"] is True


@pytest.mark.parametrize("version", SHIPPED)
def test_core_companion_is_the_full_file_without_the_message_tables(version):
    import gzip
    import json
    from importlib import resources

    from apron.engine.facts import MESSAGE_KEYS, EngineFacts, core_bytes, read_core

    root = resources.files("apron.engine").joinpath("data")
    full = json.loads(gzip.decompress(root.joinpath(f"vllm-{version}.json.gz").read_bytes()))
    path = root.joinpath("core", f"vllm-{version}.json")
    assert path.read_bytes() == core_bytes(full)  # written by the sync from the full file, nothing else
    data, lines = read_core(str(path))
    assert lines is not None and "architectures" not in data["registry"]
    facts = EngineFacts(data, architecture_lines=lines)
    core = {**data, "registry": {**data["registry"], "architectures": facts.architectures}}
    assert core == {k: v for k, v in full.items() if k not in MESSAGE_KEYS}
    # one architecture's line decoded alone is its entry; an unknown one is None
    for arch in list(full["registry"]["architectures"])[:: max(1, len(full["registry"]["architectures"]) // 25)]:
        assert EngineFacts(data, architecture_lines=lines).architecture(arch) == full["registry"]["architectures"][arch]
    assert EngineFacts(data, architecture_lines=lines).architecture('NoSuch"Arch\nForCausalLM') is None
