"""The extractor on a small stand-in release (tests/fixtures/engine_src), zipped into a wheel here."""

from __future__ import annotations

import gzip
import json

import engine_wheel  # tests/fixtures/engine_wheel.py
import pytest

from apron.engine import extract
from apron.engine.sync import sync
from apron.errors import BadInput


@pytest.fixture(scope="module")
def facts(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("engine")
    wheel = engine_wheel.build_wheel(root / "wheels")
    return sync(str(wheel), root / "facts").facts


def test_identity_pins_and_hash(facts, tmp_path):
    wheel = engine_wheel.build_wheel(tmp_path)
    import hashlib

    assert facts["schema"] == "apron.engine-facts/1"
    assert facts["version"] == "0.99.0" and facts["engine"] == "vllm"
    assert facts["source"] == {
        "kind": "wheel",
        "filename": wheel.name,
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
    }
    assert facts["pins"] == {"torch": "torch==2.14.0", "transformers": "transformers<6,>=5.10.4"}
    assert facts["extractor_version"] == extract.EXTRACTOR_VERSION
    # the stand-in release lacks most of the functions the planner mirrors, and says so
    assert "mirrored function unify_kv_cache_spec_page_size not found" in facts["gaps"]
    assert all(gap.startswith("mirrored function ") for gap in facts["gaps"])


def test_registry_spreads_order_and_categories(facts):
    registry = facts["registry"]
    # `**` spreads and a comprehension spread merge as Python merges them: first position, last value.
    assert registry["order"] == [
        "ToyForCausalLM",
        "ToyHybridForCausalLM",
        "ToyNoPPForCausalLM",
        "ToyMambaForCausalLM",
        "ToyAliasForCausalLM",
        "NewArchForCausalLM",
        "ToyModel",
        "ToyEmbeddingModel",
        "ToyForSequenceClassification",
        "ToyMambaForSequenceClassification",
        "ToyVLForConditionalGeneration",
    ]
    toy = registry["architectures"]["ToyForCausalLM"]
    assert toy["categories"] == ["text_generation", "embedding"] and toy["category"] == "text_generation"
    assert toy["module"] == "vllm.model_executor.models.toy" and toy["file"] == "model_executor/models/toy.py"
    new = registry["architectures"]["NewArchForCausalLM"]
    assert new["module"] == "vllm.models.newarch" and new["file"] == "models/newarch/__init__.py"
    assert registry["previously_supported"] == {"OldForCausalLM": "0.10.2"}
    assert registry["out_of_tree"] == {"PluginForCausalLM": "https://example.org/plugin"}
    assert registry["supported_archs_expr"] == "self.models.keys()"
    assert facts["config_hooks"] == {"ToyHybridForCausalLM": "ToyHybridConfig"}


@pytest.mark.parametrize(
    "arch, expected",
    [
        ("ToyForCausalLM", dict(is_hybrid=False, supports_pp=True, is_moe=False, is_attention_free=False)),
        ("ToyHybridForCausalLM", dict(is_hybrid=True, has_inner_state=True, is_moe=True, supports_pp=True)),
        ("ToyNoPPForCausalLM", dict(supports_pp=False)),  # a class attribute overrides the protocol's
        ("ToyMambaForCausalLM", dict(is_attention_free=True, has_inner_state=True, supports_pp=False)),
        ("ToyAliasForCausalLM", dict(supports_pp=True)),  # `ToyAlias = ToyForCausalLM`
        ("NewArchForCausalLM", dict(is_moe=True, supports_pp=True)),  # re-exported, CUDA branch of a switch
        ("ToyForSequenceClassification", dict(is_hybrid=True)),  # base built by `X = as_seq_cls_model(...)`
        ("ToyMambaForSequenceClassification", dict(is_attention_free=True)),  # `class C(as_seq_cls_model(...))`
        ("ToyVLForConditionalGeneration", dict(supports_multimodal=True, is_hybrid=False)),
    ],
)
def test_traits_follow_bases_to_the_marker_protocols(facts, arch, expected):
    entry = facts["registry"]["architectures"][arch]
    assert {key: entry[key] for key in expected} == expected


def test_defaults(facts):
    d = facts["defaults"]
    assert (d["gpu_memory_utilization"], d["block_size"], d["kv_cache_dtype"], d["dtype"]) == (0.92, 16, "auto", "auto")
    assert d["vocab_padding_size"] == 64
    assert d["scheduler"]["max_num_seqs"] == 128 and d["scheduler"]["max_num_batched_tokens"] == 2048
    assert d["engine_args"]["gpu_memory_utilization"] == 0.92  # = CacheConfig.gpu_memory_utilization
    assert d["engine_args"]["mamba_block_size"] is None  # get_field(CacheConfig, ...), default None
    assert d["engine_args"]["optimization_level"] == "O2"
    assert d["engine_args_unresolved"] == ["computed"]
    assert d["cache_config"]["swap_space_bytes"] == 4 * 2**30
    assert d["optimization_level"] == "O2"
    assert d["cudagraph_mode_by_level"] == {
        "O0": "NONE",
        "O1": "PIECEWISE",
        "O2": "FULL_AND_PIECEWISE",
        "O3": "FULL_AND_PIECEWISE",
    }
    assert d["cudagraph"] == {
        "default_max_graph_size": 512,
        "max_graph_size_by_capability_family": {"100": 1024},
        "max_graph_size_by_capability": {},
        "adds_max_num_seqs": True,
        "max_num_seqs_multiplier": 2,
    }
    tiers = d["batch_tiers"]
    assert [t["min_device_memory_bytes"] for t in tiers] == [160 * 2**30, 70 * 2**30, 0]
    assert tiers[1]["name_excludes"] == ["a100"] and tiers[1]["excluded_capabilities"] == [[12, 1]]
    assert tiers[1]["max_num_batched_tokens"] == {"LLM_CLASS": 16384, "OPENAI_API_SERVER": 8192}
    assert d["batch_device_name_lowercased"] is True


def test_env_defaults_from_type_checking_block(facts):
    d = facts["defaults"]
    assert d["env"] == {
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": True,
        "VLLM_USE_V2_MODEL_RUNNER": None,
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN": False,
        "VLLM_HTTP_MAX_REQUEST_BODY_SIZE": 32 * 1024 * 1024,
    }
    assert d["env_unresolved"] == ["VLLM_CACHE_ROOT"]
    assert d["env_getenv"]["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"] == "1"


def test_quantization(facts):
    q = facts["quantization"]
    assert q["fp8"]["min_capability"] == 75 and q["fp8"]["act_dtypes"] == ["bfloat16", "float16"]
    assert q["gpt_oss_mxfp4"]["min_capability"] == 80  # inherited from Mxfp4Config
    assert q["fp8_per_tensor"]["config_class"] == "Fp8Config"  # the `for ... setdefault` shorthands
    assert q["platform_only"] == {
        "config_class": None,
        "module": None,
        "min_capability": None,
        "act_dtypes": None,
        "is_cli_choice": True,
    }


def test_attention_backends_and_priority(facts):
    backends = facts["attention_backends"]
    assert backends["FLASH_ATTN"]["kernel_block_sizes"] == [{"multiple_of": 16}]
    assert backends["FLASH_ATTN"]["kernel_block_sizes_variants"] == [[{"multiple_of": 64}], [{"multiple_of": 16}]]
    assert backends["FLASHINFER"]["kernel_block_sizes_variants"][0] == [16, 32, 64]
    assert backends["TRITON_ATTN"]["kernel_block_sizes"] == [{"multiple_of": 1}]  # inherited default
    assert backends["TRITON_ATTN"]["supported_kv_cache_dtypes"] == ["auto", "bfloat16"]
    assert "TORCH_SDPA" not in backends
    assert facts["backend_priority"]["default"] == {
        "10": ["FLASHINFER", "FLASH_ATTN", "TRITON_ATTN"],
        "default": ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"],
    }
    assert facts["backend_priority_conditional"]["default"]["10"]["when"] == ["not use_non_causal"]


def test_parsers_and_tokenizer(facts):
    assert facts["parsers"]["reasoning"]["deepseek_r1"] == {
        "module": "vllm.reasoning.deepseek_r1_reasoning_parser",
        "class": "DeepSeekR1ReasoningParser",
    }
    assert sorted(facts["parsers"]["tool"]) == ["hermes", "llama3_json", "openai"]
    tokenizer = facts["tokenizer"]
    assert tokenizer["modes"]["toy_mode"] == {"module": "vllm.tokenizers.hf", "class": "CachedHfTokenizer"}
    assert tokenizer["literal"] == ["auto", "hf", "slow", "mistral", "toy_mode"]
    assert tokenizer["arch_defaults"] == {
        "ToyForCausalLM": "toy_mode",
        "ToyVLForConditionalGeneration": "mistral",
        "NewArchForCausalLM": "mistral",
    }


def test_log_formats(facts):
    logs = {(entry["function"], entry["format"]): entry for entry in facts["log_formats"]}
    assert ("Worker.determine_available_memory", "Available KV cache memory: %s GiB") in logs
    # an f-string: fields become {expr}, literal braces are doubled
    assert (
        logs[("Worker.determine_available_memory", "Initial free memory {self.free:.2f} GiB, reserved {{kv}} bytes")][
            "level"
        ]
        == "info"
    )
    # a local variable holding a `+` concatenation
    assert logs[("Worker.determine_available_memory", "Memory profiling {str(result)} done")]["level"] == "debug"
    # `"a " + "b"` as the first argument, and f-string + plain string concatenation in a nested block
    assert ("VllmConfig._set_cudagraph_sizes", "Capture sizes up to %d (%d uniform decode sizes)") in logs
    assert (
        logs[("FlashAttentionBackend.validate", "FlashAttention rejected head size {head_size}; falling back.")][
            "level"
        ]
        == "warning"
    )
    # a module-level constant, and a small helper that returns the message
    assert ("FlashAttentionBackend.select", "VLLM_FLASH_ATTN_VERSION is deprecated; use --attention-config.") in logs
    assert (
        "FlashAttentionBackend.select",
        "Using {chosen.value} FlashAttention kernel out of potential kernels: {candidates}.",
    ) in logs
    assert facts["counts"]["log_calls_unresolved"] == 0


def test_refusals(facts):
    refusals = {(r["function"], r["template"]): r for r in facts["refusals"]}
    # nested in a for loop / try / finally
    assert ("Worker.determine_available_memory", "No available memory for the cache blocks.") in refusals
    # a raise of a local `msg = f"..."`
    assert refusals[("ToyForCausalLM.forward", "Toy needs input, got {x!r}")]["exception"] == "ValueError"
    # nested inside try/except in a method
    assert ("FlashAttentionBackend.validate", "Head size {head_size} is not supported by FlashAttention.") in refusals
    registry = [r["template"] for r in facts["refusals"] if r["function"] == "_ModelRegistry._raise_for_unsupported"]
    assert len(registry) == 4 and "v{previous_version}" in registry[1]


def test_mirrored_functions_are_hashed_by_qualified_name(facts):
    mirrored = facts["mirrored_functions"]
    assert "v1/worker/gpu_worker.py:Worker.determine_available_memory" in mirrored
    assert "v1/kv_cache_interface.py:FullAttentionSpec.page_size_bytes" in mirrored
    assert "model_executor/layers/mamba/mamba_utils.py:MambaStateShapeCalculator.mamba1_state_shape" in mirrored
    assert "v1/core/kv_cache_utils.py:get_kv_cache_configs" in mirrored
    assert all(len(digest) == 64 for digest in mirrored.values())


def test_profiling_functions_are_every_profile_run_under_the_worker(facts):
    """What `apron probe` wraps: each runner's profile_run by module and qualified name, and the CPU
    runner's warm-up that reaches it (the stand-in's returns early in eager mode, as 0.29-0.33's does)."""
    assert facts["profiling"] == {
        "functions": [
            {
                "file": "v1/worker/gpu_model_runner.py",
                "module": "vllm.v1.worker.gpu_model_runner",
                "qualname": "GPUModelRunner.profile_run",
            }
        ],
        "cpu_warm_up": [
            {
                "calls_profile_run": True,
                "file": "v1/worker/cpu_model_runner.py",
                "module": "vllm.v1.worker.cpu_model_runner",
                "qualname": "CPUModelRunner.warming_up_model",
            }
        ],
    }


def test_a_tree_gives_the_same_facts_as_the_wheel(facts, tmp_path):
    tree = engine_wheel.write_tree(tmp_path / "tree")
    tree_facts = sync(str(tree), tmp_path / "out").facts
    assert tree_facts["source"]["kind"] == "tree"
    strip = lambda f: {k: v for k, v in f.items() if k != "source"}  # noqa: E731
    assert strip(tree_facts) == strip(facts)


def test_sync_is_deterministic_and_pool_matches_in_process(tmp_path, monkeypatch):
    wheel = engine_wheel.build_wheel(tmp_path / "w")
    first = sync(str(wheel), tmp_path / "a", jobs=1).path.read_bytes()
    second = sync(str(wheel), tmp_path / "b", jobs=1).path.read_bytes()
    assert first == second
    monkeypatch.setattr(extract, "_IN_PROCESS_BELOW", 0)  # force the process pool on a small tree
    pooled = sync(str(wheel), tmp_path / "c", jobs=2).path.read_bytes()
    assert pooled == first
    text = gzip.decompress(first).decode()
    assert text == json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def test_missing_registry_is_a_clear_error_and_writes_nothing(tmp_path):
    wheel = engine_wheel.build_wheel(tmp_path / "w", edits={"vllm/model_executor/models/registry.py": None})
    with pytest.raises(BadInput, match=r"no vllm/model_executor/models/registry\.py"):
        sync(str(wheel), tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_unparsable_file_is_named_and_nothing_written(tmp_path):
    wheel = engine_wheel.build_wheel(tmp_path / "w", edits={"vllm/broken.py": "def f(:\n    pass\n"})
    with pytest.raises(BadInput, match=r"vllm/broken\.py \(line 1: .*\) does not parse"):
        sync(str(wheel), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_registry_that_is_not_static_is_a_clear_error(tmp_path):
    edits = {"vllm/model_executor/models/registry.py": "_VLLM_MODELS = load_models()\n"}
    with pytest.raises(BadInput, match=r"registry\.py has no registry this extractor can read statically"):
        sync(str(engine_wheel.build_wheel(tmp_path / "w", edits=edits)), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_tree_without_metadata_reads_the_version_file(tmp_path):
    tree = engine_wheel.write_tree(
        tmp_path / "tree",
        edits={"vllm-0.99.0.dist-info/METADATA": None, "vllm/_version.py": "__version__ = version = '0.99.5'\n"},
    )
    facts = sync(str(tree / "vllm"), tmp_path / "out").facts
    assert facts["version"] == "0.99.5" and facts["pins"] == {"torch": None, "transformers": None}
    assert "pins: no dist-info METADATA in this source" in facts["gaps"]


def test_unexpected_shapes_become_gaps_not_crashes(tmp_path):
    edits = {
        "vllm/engine/arg_utils.py": "class EngineArgs:\n    def get_batch_defaults(cls):\n        return 1\n",
        "vllm/platforms/cuda.py": "x = 1\n",
        "vllm/model_executor/layers/quantization/__init__.py": "def get_quantization_config(q):\n    return q\n",
        "vllm/tool_parsers/__init__.py": "_TOOL_PARSERS_TO_REGISTER = make()\n",
    }
    facts = sync(str(engine_wheel.build_wheel(tmp_path / "w", edits=edits)), tmp_path / "out").facts
    assert facts["defaults"]["batch_tiers"] is None and facts["backend_priority"] is None
    assert facts["quantization"] is None and facts["parsers"]["tool"] is None
    assert facts["parsers"]["reasoning"]  # the rest still comes through
    gaps = " | ".join(facts["gaps"])
    assert "get_batch_defaults" in gaps and "backend_priority" in gaps and "parsers.tool" in gaps


@pytest.mark.parametrize(
    "spec, message",
    [
        ("/no/such/place", "no such file or folder"),
        (__file__, "not a wheel"),
    ],
)
def test_bad_local_sources(tmp_path, spec, message):
    with pytest.raises(BadInput, match=message):
        sync(spec, tmp_path / "out")


def test_skipping_unread_function_bodies_changes_nothing(tmp_path):
    from apron.engine.extract.mirrored import MIRRORED_PATTERNS
    from apron.engine.extract.scan import scan_source

    for path, text in engine_wheel.source_files().items():
        if path.endswith(".py"):
            rel = path.removeprefix("vllm/")
            assert scan_source(rel, text, MIRRORED_PATTERNS, fast=True) == scan_source(
                rel, text, MIRRORED_PATTERNS, fast=False
            ), path


def test_skeleton_keeps_lines_and_needed_bodies():
    from apron.engine.extract.scan import _RETURN_METHODS
    from apron.engine.extract.skeleton import protected_names, skeleton

    text = engine_wheel.source_files()["vllm/utils/awkward.py"]
    names, classes = protected_names((), _RETURN_METHODS)
    reduced = skeleton(text, names, classes)
    assert reduced is not None and reduced.count("\n") == text.count("\n")
    assert "return inner()" not in reduced and "value = x +" not in reduced  # plain bodies are left out...
    assert 'logger.info("awkward %s", x)' in reduced and '"bad holder"' in reduced  # ...needed ones are not
    assert "def generated(x):\n    return x" in reduced  # code inside a string is text
    assert "no indentation here" in reduced and "total = a + len(b)" in reduced  # readings in doubt keep it
