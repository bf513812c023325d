"""Fingerprints on real error text: the CPU engine's logs, the training boots' failures, and the
refusal templates of vLLM 0.29.0 / 0.30.0 / 0.33.0 rendered with values."""

from __future__ import annotations

import random

import pytest

from apron.rules import catalog, classify, families
from apron.rules.fingerprint import fingerprint, normalize
from rules_text import FACTS_VERSIONS, log_index, log_text, render, shipped_refusals, template_with, training_failures

# The decisive error of every failed lab boot (tests/fixtures/logs/README.md).
LAB_FAMILIES = {
    "c_auto_kv_util_004_refused": ("cpu_kv_allocation", {"kv_gib": -0.1, "requested_gib": 0.44, "total_gib": 10.96}),
    "d_kv_too_small_deep_33554432": (
        "kv_cache_too_small",
        {"max_model_len": 32768, "needed_gib": 0.06, "available_gib": 0.03, "estimated_max_model_len": 16256},
    ),
    "d_kv_too_small_fast_1048575": ("kv_cache_too_small", {"max_model_len": 2048, "estimated_max_model_len": 1792}),
    "d_kv_too_small_mp_1048575": ("kv_cache_too_small", {"max_model_len": 2048, "estimated_max_model_len": 1792}),
    "e_max_model_len_gt_derived": (
        "max_model_len_over_derived",
        {"max_model_len": 4096, "derived_max_model_len": 2048, "derived_key": "max_position_embeddings"},
    ),
    "f_unsupported_architecture": ("architecture_unsupported", {"architectures": ["FakeTinyForCausalLM"]}),
    "g_corrupt_config_json": ("config_invalid_json", {}),
    "g_gemma2_float16": ("float16_unsupported", {"model_type": "gemma2"}),
    "g_missing_model_dir": ("model_path_invalid", {}),
    "g_no_weight_files": ("model_weights_missing", {}),
    "g_truncated_safetensors": ("weights_corrupt", {}),
    "h_default_kv_no_setting": (
        "cpu_startup_memory",
        {"free_gib": 9.49, "total_gib": 10.96, "gpu_memory_utilization": 0.92},
    ),
}


@pytest.mark.parametrize("name", sorted(log_index()))
def test_lab_logs(name):
    outcome = log_index()[name]["outcome"]
    found = fingerprint(log_text(name))
    if outcome == "healthy":
        assert found is None, f"{name} is healthy but got {found.family}: {found.message}"
        return
    family, fields = LAB_FAMILIES[name]
    assert found is not None
    assert found.family == family, found.message
    for key, value in fields.items():
        assert found.fields[key] == value, (key, found.fields)
    assert found.engine_version == "0.32.0"  # from the start-up banner


def test_decisive_error_is_not_the_last_traceback_of_the_shutdown():
    text = log_text("d_kv_too_small_mp_1048575")
    last_error = [line for line in text.splitlines() if "Error:" in line][-1]
    assert "Engine core initialization failed" in last_error
    found = fingerprint(text)
    assert found.family == "kv_cache_too_small"
    assert found.exception == "ValueError"
    assert found.line_number == 73 and found.process == "EngineCore"
    assert found.occurrences == 2  # the engine core's logger and stderr print it once each
    assert found.phase == "kv_cache"
    assert any(f.endswith(":_check_enough_kv_cache_memory") for f in found.frames)


def test_errors_after_shutdown_are_noise():
    """A healthy boot whose teardown prints an EngineDeadError traceback has no decisive error."""
    text = log_text("d_kv_exact_fit_deep_67371008")
    assert "EngineDeadError" in text
    assert fingerprint(text) is None


def test_the_root_cause_wins_over_the_worker_wrapper():
    found = fingerprint(log_text("g_truncated_safetensors"))
    assert found.process == "Worker" and found.phase == "weights_loading"
    assert found.blame == "harness"


def test_ansi_colour_and_rank_duplicates():
    """Colour codes and several ranks printing the same error: one fingerprint, counted per rank."""
    lines = log_text("d_kv_too_small_mp_1048575").splitlines()
    error = next(line for line in lines if "ValueError: To serve" in line and line.startswith("(EngineCore"))
    body = error.split(") ", 1)[1]
    coloured = [f"\x1b[1;36m(Worker_TP{rank} pid={4100 + rank})\x1b[0;0m \x1b[31m{body}\x1b[0m" for rank in range(4)]
    found = fingerprint("\n".join(lines[:60] + coloured + lines[60:]))
    assert found.family == "kv_cache_too_small"
    assert found.fields["estimated_max_model_len"] == 1792
    assert found.occurrences == 6
    assert set(found.processes) == {"EngineCore", "Worker_TP0", "Worker_TP1", "Worker_TP2", "Worker_TP3"}
    assert found.id == fingerprint(log_text("d_kv_too_small_mp_1048575")).id


def test_the_id_masks_values():
    """The same failure with other numbers, paths and pids has the same id."""
    ids = {
        fingerprint(log_text(n)).id
        for n in ("d_kv_too_small_deep_33554432", "d_kv_too_small_fast_1048575", "d_kv_too_small_mp_1048575")
    }
    assert len(ids) == 1
    assert fingerprint(log_text("e_max_model_len_gt_derived")).id not in ids


def test_normalize():
    text = (
        "RuntimeError: NCCL error in: /opt/torch/csrc/NCCLUtils.hpp:275 on 10.0.3.7:29500 pid=4242 "
        "at 0x7f3a2c000000, 1,024 blocks of 3.5 GiB, uuid 123e4567-e89b-12d3-a456-426614174000"
    )
    assert normalize(text) == (
        "RuntimeError: NCCL error in: <path>:<n> on <addr> pid=<n> at <hex>, <n> blocks of <n> GiB, uuid <uuid>"
    )


# ------------------------------------------------------------------ the training boots' failures

TRAINING_FAMILIES = {
    "QueryError": ("instances_unavailable", "host"),
    "DOWNLOAD_INCOMPLETE": ("download_incomplete", "harness"),
    "CUDA OOM while loading weights": ("cuda_oom", "model"),
    "Waiting for 1 local": ("engine_startup_stall", "unknown"),
    "To serve at least one request": ("kv_cache_too_small", "model"),
    "User-specified max_model_len": ("max_model_len_over_derived", "model"),
    "does not support float16": ("float16_unsupported", "model"),
}


@pytest.mark.parametrize("boot", training_failures(), ids=lambda b: b["failure"]["last_error"][:40])
def test_training_failures(boot):
    text = boot["failure"]["last_error"]
    expected = next(v for k, v in TRAINING_FAMILIES.items() if k in text)
    found = fingerprint(text, engine_version=boot["vllm_version"].lstrip("v"))
    assert (found.family, found.blame) == expected


def test_training_summaries_keep_their_numbers_and_phase():
    by_phrase = {b["failure"]["last_error"][:30]: b for b in training_failures()}
    kv = next(b for k, b in by_phrase.items() if "ValueError" in k)
    found = fingerprint(kv["failure"]["last_error"])
    assert found.fields == {
        "max_model_len": 40960,
        "needed_gib": 5.62,
        "available_gib": 4.48,
        "estimated_max_model_len": 32640,
    }
    assert found.phase == "kv_cache"  # from "(v1/core/kv_cache_utils.py:879 _check_enough_kv_cache_memory)"
    oom = next(b for b in training_failures() if "CUDA OOM" in b["failure"]["last_error"])
    assert fingerprint(oom["failure"]["last_error"]).phase == "weights_loading"


# ------------------------------------------------------------------ the engine's refusal templates

# (phrase of the template, values of its fields, family, typed fields expected back)
RENDERED = [
    (
        "To serve at least one request",
        {
            "max_model_len": 131072,
            "format_gib(needed_memory)": 16.0,
            "format_gib(available_memory)": 9.31,
            "estimated_msg": "Based on the available memory, the estimated maximum model length is 76144. ",
        },
        "kv_cache_too_small",
        {"max_model_len": 131072, "needed_gib": 16.0, "available_gib": 9.31, "estimated_max_model_len": 76144},
    ),
    (
        "exceeds available Mamba cache blocks",
        {"max_num_reqs": 1024, "kv_cache_config.num_blocks": 418},
        "mamba_blocks_below_max_num_seqs",
        {"max_num_seqs": 1024, "num_blocks": 418},
    ),
    (
        "does not support float16",
        {"model_type": "gemma3", "reason": "Numerical instability. Please use bfloat16 or float32 instead."},
        "float16_unsupported",
        {"model_type": "gemma3"},
    ),
    (
        "Bfloat16 is only supported",
        {"gpu_name": "Tesla T4", "compute_str": "has compute capability 7.5"},
        "bfloat16_unsupported",
        {"gpu_name": "Tesla T4", "compute_capability": "7.5"},
    ),
    (
        "is smaller than max_model_len",
        {"self.max_num_batched_tokens": 2048, "max_model_len": 8192},
        "batched_tokens_below_max_model_len",
        {"max_num_batched_tokens": 2048, "max_model_len": 8192},
    ),
    (
        "must be greater than or equal to max_num_seqs",
        {"self.max_num_batched_tokens": 128, "self.max_num_seqs": 256},
        "batched_tokens_below_max_num_seqs",
        {"max_num_batched_tokens": 128, "max_num_seqs": 256},
    ),
    (
        "CUDA out of memory occurred when warming up sampler",
        {"num_reqs": 1024},
        "sampler_warmup_oom",
        {"num_reqs": 1024},
    ),
    ("No available memory for the cache blocks", {}, "no_kv_cache_memory", {}),
    (
        "Minimum capability: {quant_config",
        {"model_config.quantization": "fp8", "quant_config.get_min_capability()": 89, "capability": 86},
        "quantization_capability",
        {"quantization": "fp8", "min_capability": 89, "capability": 86},
    ),
    (
        "Chunked MM input disabled",
        {"max_tokens_per_mm_item": 16384, "scheduler_config.max_num_batched_tokens": 8192},
        "mm_item_over_batched_tokens",
        {"max_tokens_per_mm_item": 16384, "max_num_batched_tokens": 8192},
    ),
    (
        "invalid reasoning parser",
        {"reasoning_parser": "qwen9", "','.join(valid_reasoning_parsers)": "deepseek_r1,qwen3"},
        "invalid_reasoning_parser",
        {"reasoning_parser": "qwen9", "valid_reasoning_parsers": ["deepseek_r1", "qwen3"]},
    ),
    (
        "on startup is less than desired GPU memory utilization",
        {
            "init_snapshot.device_": "cuda:0",
            "format_gib(init_snapshot.free_memory)": 60.12,
            "format_gib(init_snapshot.total_memory)": 79.19,
            "cache_config.gpu_memory_utilization": 0.92,
            "format_gib(requested_memory)": 72.85,
        },
        "gpu_startup_free_memory",
        {"free_gib": 60.12, "total_gib": 79.19, "gpu_memory_utilization": 0.92},
    ),
    (
        "NCCL error: {error_str}",
        {"error_str": "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
        "nccl_error",
        {"nccl_error": "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
    ),
    (
        "Total number of attention heads (",
        {"total_num_attention_heads": 40, "tensor_parallel_size": 16},
        "tp_heads_indivisible",
        {"total_num_attention_heads": 40, "tensor_parallel_size": 16},
    ),
]


@pytest.mark.parametrize("version", FACTS_VERSIONS)
@pytest.mark.parametrize("phrase,values,family,fields", RENDERED, ids=[r[2] for r in RENDERED])
def test_rendered_refusal_templates(version, phrase, values, family, fields):
    refusal = template_with(shipped_refusals(version), phrase)
    message = render(refusal["template"], values)
    log = f"(EngineCore pid=7) ERROR 12-01 10:00:00 [core.py:1] {refusal['exception']}: {message}\n"
    found = fingerprint(log, engine_version=version)
    assert found.family == family
    assert found.source.startswith(f"vllm {version} {refusal['file']}")
    for key, value in fields.items():
        assert found.fields[key] == value, (key, found.fields)


@pytest.mark.parametrize("version", FACTS_VERSIONS)
def test_every_template_family_is_recognised(version):
    """The templates of the release (the named families' and 500 others), rendered with stand-in
    values, classify back into their family (or that of a template rendering the same text). Only
    the wrappers, which point at an earlier error by design, classify as wrappers."""
    all_refusals = shipped_refusals(version)
    refusals = [r for r in all_refusals if catalog._anchor(r["template"])]
    assert len(refusals) > 0.99 * len(all_refusals)  # nearly every template has words to anchor on
    renders: dict[str, set[str]] = {}
    for refusal in refusals:
        renders.setdefault(catalog.template_family(refusal["template"]), set()).add(render(refusal["template"], {}))
    named = [r for r in refusals if not catalog.template_family(r["template"]).startswith("refusal.")]
    sample = named + random.Random(version).sample(refusals, min(500, len(refusals)))  # all would take a minute
    misses = []
    for refusal in sample:
        message = render(refusal["template"], {})
        found = classify.classify(refusal["exception"], message, version)
        if found.family != catalog.template_family(refusal["template"]) and message not in renders.get(
            found.family, ()
        ):
            misses.append((refusal["template"][:80], found.family))
    assert all(families.is_wrapper(family) for _, family in misses), misses


def test_named_families_fall_back_to_their_templates_without_facts(monkeypatch):
    """No facts installed: the families rules need still classify, from the templates as of 0.29-0.33."""
    monkeypatch.setattr(catalog, "_refusals", lambda version: [])
    catalog.catalog.cache_clear()
    try:
        found = fingerprint(log_text("d_kv_too_small_deep_33554432"))
        assert found.family == "kv_cache_too_small" and found.source.startswith("apron fallback")
        assert found.fields["estimated_max_model_len"] == 16256
        assert fingerprint(log_text("g_gemma2_float16")).family == "float16_unsupported"
    finally:
        catalog.catalog.cache_clear()


# ------------------------------------------------------------------ failures no template produces

# PyTorch's caching-allocator message (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x wording) inside a
# vLLM profiling traceback; NCCL's and CUDA's runtime errors as torch and vLLM's pynccl raise them.
OOM_IN_PROFILING = """\
(EngineCore_DP0 pid=2211) ERROR 11-02 09:14:03 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=2211) ERROR 11-02 09:14:03 [core.py:708]   File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 263, in determine_available_memory
(EngineCore_DP0 pid=2211) ERROR 11-02 09:14:03 [core.py:708]     self.model_runner.profile_run()
(EngineCore_DP0 pid=2211) ERROR 11-02 09:14:03 [core.py:708]   File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 3471, in _dummy_run
(EngineCore_DP0 pid=2211) ERROR 11-02 09:14:03 [core.py:708]     outputs = self.model(
(EngineCore_DP0 pid=2211) ERROR 11-02 09:14:03 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of 23.52 GiB of which 1.46 GiB is free. Including non-PyTorch memory, this process has 22.05 GiB memory in use. Of the allocated memory 19.51 GiB is allocated by PyTorch, and 2.08 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""

GRAPH_CAPTURE = """\
(EngineCore_DP0 pid=31) INFO 11-02 09:20:11 [gpu_model_runner.py:3800] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 37%
(EngineCore_DP0 pid=31) ERROR 11-02 09:20:12 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=31) ERROR 11-02 09:20:12 [core.py:708]   File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 3702, in capture_model
(EngineCore_DP0 pid=31) ERROR 11-02 09:20:12 [core.py:708]     self._capture_cudagraphs(
(EngineCore_DP0 pid=31) ERROR 11-02 09:20:12 [core.py:708]   File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 3471, in _dummy_run
(EngineCore_DP0 pid=31) ERROR 11-02 09:20:12 [core.py:708] RuntimeError: CUDA error: operation not permitted when stream is capturing
(EngineCore_DP0 pid=31) ERROR 11-02 09:20:12 [core.py:708] CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""

NCCL = """\
(Worker_TP0 pid=88) ERROR 11-02 10:01:00 [multiproc_executor.py:671] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
(Worker_TP1 pid=89) ERROR 11-02 10:01:00 [multiproc_executor.py:671] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
(EngineCore_DP0 pid=70) ERROR 11-02 10:01:01 [core.py:708] RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

NCCL_WARN_ONLY = """\
node-7:88:88 [0] transport/nvls.cc:154 NCCL WARN Cuda failure 801 'operation not supported'
(EngineCore_DP0 pid=70) ERROR 11-02 10:01:01 [core.py:708] RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_cuda_oom_in_profiling():
    found = fingerprint(OOM_IN_PROFILING)
    assert (found.family, found.phase, found.blame) == ("cuda_oom", "profiling", "model")
    assert found.fields["tried_bytes"] == int(2.32 * 2**30)
    assert found.fields["free_bytes"] == int(1.46 * 2**30)
    assert found.fields["gpu_index"] == 0


def test_graph_capture_failure():
    found = fingerprint(GRAPH_CAPTURE)
    assert (found.family, found.phase) == ("cudagraph_capture_failed", "graph_capture")


def test_nccl_error_is_the_hosts():
    found = fingerprint(NCCL)
    assert (found.family, found.blame, found.occurrences) == ("nccl_error", "host", 2)
    assert found.fields["nccl_error"].startswith("unhandled cuda error")
    warned = fingerprint(NCCL_WARN_ONLY)
    assert warned.family == "nccl_error" and warned.line_number == 1


@pytest.mark.parametrize(
    "text,family",
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_illegal_memory_access"),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "no_kernel_image"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.", "cuda_oom"),
        ("OSError: [Errno 28] No space left on device", "disk_full"),
    ],
)
def test_opaque_kernel_and_host_errors(text, family):
    assert fingerprint(text).family == family


def test_no_error_means_no_fingerprint():
    assert fingerprint("") is None
    assert fingerprint(log_text("a_healthy_fast_uni")) is None
