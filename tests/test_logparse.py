"""The vLLM log reader on real logs: the CPU engine's own (tests/fixtures/logs, captured on this kind of
machine), vLLM's format strings for 0.29.0-0.33.0 rendered with values (from the engine facts), and
the older releases' lines quoted from their source (tests/test_log_eras.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from apron.measure.logparse import GIB, parse_file, parse_log
from conftest import FIXTURES

LOGS = FIXTURES / "logs"


def test_cpu_explicit_kv_boot():
    parsed = parse_file(LOGS / "a_healthy_fast_uni.log")
    assert parsed.engine_version == "0.32.0"
    assert parsed.platform == "cpu" and parsed.kv_cache_source == "explicit"
    assert parsed.available_kv_bytes == round(0.06 * GIB)  # "Explicitly set (0.06/10.96) GiB for KV cache"
    assert parsed.total_memory_bytes == round(10.96 * GIB)
    assert parsed.kv_tokens == 131072  # "131,072 tokens": thousands separator
    assert parsed.max_concurrency == 256.0 and parsed.max_concurrency_tokens_per_request == 512
    assert parsed.max_model_len == 512
    assert parsed.weights_load_seconds == 0.02 and parsed.init_engine_seconds == 0.14
    # The CPU build prints no "Model loading took", no "Available KV cache memory", no graphs: absent.
    for name in (
        "weights_bytes",
        "model_load_seconds",
        "cudagraph_bytes",
        "activation_peak_bytes",
        "non_torch_bytes",
        "num_gpu_blocks",
        "graph_capture_seconds",
        "torch_compile_seconds",
        "block_size",
        "attention_backend",
    ):
        assert getattr(parsed, name) is None, name
    assert parsed.errors == ()
    # The healthy run's teardown printed no error before [shutdown]; what follows is not an error.
    assert "kv_tokens" in parsed.sources and parsed.sources["kv_tokens"].split(":")[0].isdigit()


def test_cpu_auto_kv_boot_reads_non_kv_usage():
    parsed = parse_file(LOGS / "c_auto_kv_util_005.log")
    assert parsed.kv_cache_source == "auto"
    assert parsed.available_kv_bytes == round(0.01 * GIB)
    assert parsed.requested_bytes == round(0.55 * GIB)
    assert parsed.non_kv_bytes == round(0.54 * GIB)
    assert parsed.kv_tokens == 25600 and parsed.max_concurrency == 50.0


def test_worker_process_lines_are_read_in_multiprocess_mode():
    parsed = parse_file(LOGS / "b_healthy_mp_eager.log")  # KV line from "(Worker pid=..)"
    assert parsed.available_kv_bytes == round(0.06 * GIB) and parsed.kv_tokens == 131072


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "d_kv_too_small_fast_1048575",
            "ValueError: To serve at least one request with the model's max seq len (2048)",
        ),
        (
            "c_auto_kv_util_004_refused",
            "ValueError: Available memory on node 0 (9.75/10.96 GiB) on kv cache allocation",
        ),
        ("e_max_model_len_gt_derived", "Value error, User-specified max_model_len (4096) is greater than the derived"),
        ("f_unsupported_architecture", "Value error, Model architectures ['FakeTinyForCausalLM'] are not supported"),
        ("g_gemma2_float16", "Value error, The model type 'gemma2' does not support float16"),
        ("g_no_weight_files", "RuntimeError: Cannot find any model weights"),
    ],
)
def test_refusals_keep_the_engines_error(name, expected):
    parsed = parse_file(LOGS / f"{name}.log")
    assert any(expected in line for line in parsed.errors), parsed.errors
    assert all(not line.startswith(("File ", "Traceback", " ")) for line in parsed.errors)


def test_errors_after_shutdown_are_kept_apart():
    # A healthy boot stopped by SIGTERM logs EngineDeadError after "[shutdown]": not an error of the boot.
    text = (LOGS / "a_healthy_fast_uni.log").read_text()
    text += (
        "(APIServer pid=1) ERROR 11-30 06:26:26 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
    )
    parsed = parse_log(text)
    assert parsed.errors == ()
    assert any("EngineDeadError" in e for e in parsed.errors_after_shutdown)
    # The API server refusing a tool parser stops the engine core first: the cause follows [shutdown].
    refused = parse_file(LOGS / "tool_parser_refused.log")
    assert refused.errors == ()
    assert any("Llama3JsonToolParser could not locate the bot token" in e for e in refused.errors_after_shutdown)


def test_gpu_lines_with_prefixes_colour_debug_and_ranks():
    log = "\n".join(
        [
            "\x1b[1;36m(EngineCore_DP0 pid=101)\x1b[0;0m INFO 05-01 10:00:00 [core.py:74] Initializing a V1 LLM engine "
            "(v0.30.0) with config: model='m', max_seq_len=4096",
            "(Worker_TP0 pid=201) INFO 05-01 10:00:10 [gpu_model_runner.py:2900] Model loading took 7.51 GiB memory "
            "and 12.500000 seconds",
            "(Worker_TP1 pid=202) INFO 05-01 10:00:10 [gpu_model_runner.py:2900] Model loading took 7.49 GiB memory "
            "and 12.700000 seconds",
            "(Worker_TP0 pid=201) DEBUG 05-01 10:00:11 [gpu_worker.py:300] Initial free memory: 78.5 GiB; Requested "
            "memory: 0.900000 (util), 71.55 GiB",
            "(Worker_TP0 pid=201) INFO 05-01 10:00:20 [gpu_worker.py:320] Available KV cache memory: 55.12 GiB",
            "(Worker_TP1 pid=202) INFO 05-01 10:00:20 [gpu_worker.py:320] Available KV cache memory: 55.10 GiB",
            "(EngineCore_DP0 pid=101) INFO 05-01 10:00:21 [kv_cache_utils.py:1200] GPU KV cache size: 1,204,224 tokens, "
            "Maximum concurrency for 4,096 tokens per request: 294.00x",
            "(Worker_TP0 pid=201) INFO 05-01 10:00:40 [gpu_model_runner.py:3500] Graph capturing finished in 13 secs, "
            "took 0.55 GiB",
            "(EngineCore_DP0 pid=101) INFO 05-01 10:00:41 [core.py:210] init engine (profile, create kv cache, warmup "
            "model) took 32.10 s (compilation: 20.02 s)",
            "(EngineCore_DP0 pid=101) INFO 05-01 10:00:05 [cuda.py:300] Using FLASH_ATTN attention backend out of "
            "potential backends: ['FLASH_ATTN', 'FLASHINFER'].",
            "(EngineCore_DP0 pid=101) INFO 05-01 10:00:05 [fp8.py:100] Using TRITON Fp8 MoE backend out of potential "
            "backends: ['TRITON'].",
        ]
    )
    parsed = parse_log(log)
    assert parsed.engine_version == "0.30.0"
    assert parsed.weights_bytes == round(7.49 * GIB)  # the minimum over ranks
    assert parsed.per_rank["weights_bytes"] == {
        "Worker_TP0 pid=201": round(7.51 * GIB),
        "Worker_TP1 pid=202": round(7.49 * GIB),
    }
    assert parsed.available_kv_bytes == round(55.10 * GIB)
    assert parsed.model_load_seconds == 12.5
    assert parsed.kv_tokens == 1204224 and parsed.max_concurrency_tokens_per_request == 4096
    assert parsed.cudagraph_bytes == round(0.55 * GIB) and parsed.graph_capture_seconds == 13
    assert parsed.init_engine_seconds == 32.1
    assert parsed.attention_backend == "FLASH_ATTN"
    assert parsed.platform == "gpu" and parsed.kv_cache_source == "profiled"


def test_summary_line_activation_peak_excludes_the_applied_graph_estimate():
    # gpu_worker.py: peak_activation_memory = transient peak + the applied CUDA-graph estimate.
    log = "\n".join(
        [
            "INFO 05-01 10:00:15 [gpu_model_runner.py:4000] Estimated CUDA graph memory: 0.46 GiB total",
            "INFO 05-01 10:00:50 [gpu_worker.py:500] Free memory on device (23.26/23.52 GiB) on startup. Desired GPU "
            "memory utilization is (0.9, 21.16 GiB). Actual usage is 5.97 GiB for consumed memory (weights + non-torch), "
            "1.65 GiB for peak activation, and 0.27 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with "
            "`--kv-cache-memory=14573408052` (13.57 GiB) to fit into requested memory, or `--kv-cache-memory=16900000000` "
            "(15.74 GiB) to fully utilize gpu memory. Current kv cache memory in use is 13.55 GiB.",
        ]
    )
    parsed = parse_log(log)
    assert parsed.cudagraph_estimate_bytes == round(0.46 * GIB)
    assert parsed.cudagraph_bytes == round(0.27 * GIB)
    assert parsed.peak_activation_logged_bytes == round(1.65 * GIB)
    assert parsed.activation_peak_bytes == round(1.65 * GIB) - round(0.46 * GIB)
    assert parsed.consumed_bytes == round(5.97 * GIB)
    assert parsed.requested_bytes == round(21.16 * GIB) and parsed.total_memory_bytes == round(23.52 * GIB)
    assert parsed.available_kv_bytes == round(13.55 * GIB)
    assert parsed.non_torch_bytes is None  # the summary gives weights + non-torch together: not split, not guessed


def test_v0_memory_profiling_lines():
    # worker.py 0.6.4-0.7 prints a multi-line message; continuation lines carry no prefix.
    v06 = "\n".join(
        [
            "INFO 11-02 10:00:00 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: model='m'",
            "INFO 11-02 10:00:09 model_runner.py:1067] Loading model weights took 14.9888 GB",
            "INFO 11-02 10:00:12 worker.py:262] Memory profiling results: total_gpu_memory=79.10GiB "
            "initial_memory_usage=15.50GiB peak_torch_memory=16.73GiB memory_usage_post_profile=15.66GiB "
            "non_torch_memory=0.65GiB kv_cache_size=54.47GiB gpu_memory_utilization=0.90",
            "INFO 11-02 10:00:12 gpu_executor.py:122] # GPU blocks: 27889, # CPU blocks: 2048",
            "INFO 11-02 10:00:12 gpu_executor.py:126] Maximum concurrency for 8192 tokens per request: 54.47x",
            "INFO 11-02 10:00:30 model_runner.py:1523] Graph capturing finished in 18 secs.",
            "INFO 11-02 10:00:01 selector.py:135] Using Flash Attention backend.",
        ]
    )
    parsed = parse_log(v06)
    assert parsed.engine_version == "0.6.3.post1"
    assert parsed.weights_bytes == round(14.9888 * GIB)
    assert parsed.non_torch_bytes == round(0.65 * GIB) and parsed.available_kv_bytes == round(54.47 * GIB)
    assert parsed.total_memory_bytes == round(79.10 * GIB)
    assert parsed.num_gpu_blocks == 27889 and parsed.max_concurrency == 54.47
    assert parsed.graph_capture_seconds == 18 and parsed.cudagraph_bytes is None
    assert parsed.attention_backend == "Flash Attention"


def test_v0_multiline_message_is_one_logical_line():
    v07 = (
        "INFO 01-20 10:00:00 worker.py:266] Memory profiling takes 5.20 seconds\nthe current vLLM instance can "
        "use total_gpu_memory (79.10GiB) x gpu_memory_utilization (0.90) = 71.19GiB\nmodel weights take "
        "14.99GiB; non_torch_memory takes 0.65GiB; PyTorch activation peak memory takes 1.24GiB; the rest of "
        "the memory reserved for KV Cache is 54.31GiB.\nINFO 01-20 10:00:01 engine.py:1] next"
    )
    parsed = parse_log(v07)
    assert parsed.weights_bytes == round(14.99 * GIB)
    assert parsed.non_torch_bytes == round(0.65 * GIB)
    assert parsed.activation_peak_bytes == round(1.24 * GIB)
    assert parsed.available_kv_bytes == round(54.31 * GIB)
    assert parsed.requested_bytes == round(71.19 * GIB) and parsed.total_memory_bytes == round(79.10 * GIB)


def test_v1_debug_profiling_result():
    line = (
        "(VllmWorker rank=0 pid=9) DEBUG 04-01 10:00:00 [gpu_worker.py:250] Memory profiling takes 3.10 seconds. "
        "Total non KV cache memory: 16.83GiB; torch peak memory increase: 1.40GiB; non-torch forward increase "
        "memory: 0.44GiB; weights memory: 14.99GiB."
    )
    parsed = parse_log(line)
    assert parsed.activation_peak_bytes == round(1.40 * GIB)
    assert parsed.non_torch_bytes == round(0.44 * GIB)
    assert parsed.weights_bytes == round(14.99 * GIB)


def test_torch_compile_seconds_sum_tagged_submodels():
    # compilation/monitor.py; the facts files do not list this line (it is logged through a helper),
    # so the strings are quoted from the source (shared/research/vllm-source-facts.md section 3).
    log = "\n".join(
        [
            "(EngineCore pid=1) INFO 05-01 10:00:00 [monitor.py:40] [language_model]torch.compile took 20.50 s in total",
            "(EngineCore pid=1) INFO 05-01 10:00:00 [monitor.py:40] [encoder]torch.compile took 3.25 s in total",
        ]
    )
    assert parse_log(log).torch_compile_seconds == 23.75
    assert (
        parse_log("INFO 02-01 10:00:00 [monitor.py:30] torch.compile takes 11.20 s in total").torch_compile_seconds
        == 11.2
    )


def test_cli_log_parse_json(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "apron.cli", "log", "parse", "--json", str(LOGS / "a_healthy_fast_uni.log")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["kv_tokens"] == 131072 and document["weights_bytes"] is None
    missing = subprocess.run(
        [sys.executable, "-m", "apron.cli", "log", "parse", str(tmp_path / "nope.log")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and missing.stderr.startswith("apron: error:") and "Traceback" not in missing.stderr


# --- vLLM's own format strings, from the shipped engine facts ---------------------------------------------

SAMPLES = {"%s KV cache size": ("GPU", "1,204,224", "4,096", 294.0)}
ACCOUNTING = {
    # format-string needle -> (values to render it with, {field: expected})
    "Model loading took %s GiB memory and %.6f seconds": (
        (7.51, 12.5),
        {"weights_bytes": round(7.51 * GIB), "model_load_seconds": 12.5},
    ),
    "Loading weights took %.2f seconds": ((3.21,), {"weights_load_seconds": 3.21}),
    "Available KV cache memory: %s GiB": ((55.12,), {"available_kv_bytes": round(55.12 * GIB)}),
    "KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx": (
        None,
        {"kv_tokens": 1204224, "max_concurrency": 294.0, "max_concurrency_tokens_per_request": 4096},
    ),
    "Graph capturing finished in %.0f secs, took %.2f GiB": (
        (13.0, 0.55),
        {"graph_capture_seconds": 13, "cudagraph_bytes": round(0.55 * GIB)},
    ),
    "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), difference: %s GiB (%.1f%%).": (
        (0.27, 0.46, -0.19, -41.3),
        {"cudagraph_bytes": round(0.27 * GIB), "cudagraph_estimate_bytes": round(0.46 * GIB)},
    ),
    "Estimated CUDA graph memory: %.2f GiB total": ((0.46,), {"cudagraph_estimate_bytes": round(0.46 * GIB)}),
    "init engine (profile, create kv cache, warmup model) took %.2f s": ((32.1,), {"init_engine_seconds": 32.1}),
    "Using max model len %s": ((4096,), {"max_model_len": 4096}),
    "Setting kv cache block size to %d for %s backend": ((16, "FLASH_ATTN"), {"block_size": 16}),
    "Using %s attention backend out of potential backends: %s.": (
        ("FLASHINFER", "['FLASHINFER']"),
        {"attention_backend": "FLASHINFER"},
    ),
    "Initializing a V1 LLM engine (v%s) with config: %s": (("{version}", "model='m'"), {"engine_version": "{version}"}),
}


def facts_log_formats(version: str) -> list[dict]:
    from apron.engine.facts import known_versions, load_facts

    try:
        known = known_versions()
    except OSError:  # no facts folder at all in this checkout
        known = []
    if version not in known:
        pytest.fail(
            f"engine facts for vLLM {version} are not installed: these tests need the facts files "
            "(src/apron/engine/data/vllm-X.json.gz)"
        )
    return load_facts(version).log_formats


def render(fmt: str, values) -> str:
    """printf-render a format string the way logging does (%s of a float prints like format_gib)."""
    return fmt % tuple(values)


@pytest.mark.parametrize("version", ["0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"])
def test_vllm_format_strings_rendered_with_values_are_read_back(version, apron_home_with_facts):
    formats = facts_log_formats(version)
    checked = 0
    for needle, (values, expected) in ACCOUNTING.items():
        matches = [f for f in formats if needle in f["format"] and "%" in f["format"]]
        assert matches, f"vLLM {version}: no format string contains {needle!r} (the reader would go blind)"
        for entry in matches:
            fmt = entry["format"]
            args = values
            if values is None:
                args = ("GPU", "1,204,224", "4,096", 294.0) if fmt.startswith("%s") else ("1,204,224", "4,096", 294.0)
            args = tuple(version if a == "{version}" else a for a in args)
            wanted = len(re.findall(r"%(?:\.\d+)?[sdf]", fmt))
            if len(args) < wanted and fmt.startswith("%s") and not needle.startswith("%s"):
                args = ("",) + args  # 0.33's "[tag] " prefix, empty
            args = args + (1.0,) * (wanted - len(args))  # trailing extras, e.g. "(compilation: %.2f s)"
            message = render(fmt, args)
            line = f"(EngineCore_DP0 pid=7) INFO 05-01 10:00:00 [{entry['file'].rsplit('/', 1)[-1]}:1] {message}"
            # As printed, pasted without any prefix, and inside `docker compose logs`.
            for form in (line, message, f"vllm-1  | {line}"):
                parsed = parse_log(form)
                for name, value in expected.items():
                    value = version if value == "{version}" else value
                    assert getattr(parsed, name) == value, (version, fmt, form, name, getattr(parsed, name))
            checked += 1
    assert checked >= len(ACCOUNTING)


@pytest.mark.parametrize("version", ["0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"])
def test_vllm_summary_and_cpu_fstrings_rendered_are_read_back(version, apron_home_with_facts):
    formats = facts_log_formats(version)
    values = {
        "format_gib(self.init_snapshot.free_memory)": "23.26",
        "format_gib(self.init_snapshot.total_memory)": "23.52",
        "self.cache_config.gpu_memory_utilization": "0.9",
        "format_gib(self.requested_memory)": "21.16",
        "format_gib(self.total_consumed)": "5.97",
        "format_gib(self.peak_activation_memory)": "1.65",
        "format_gib(cuda_graph_memory_bytes)": "0.27",
        "format_gib(self.available_kv_cache_memory_bytes)": "13.55",
        "format_gib(kv_cache_size)": "0.64",
        "format_gib(memory_status.total_memory)": "23.54",
        "cpu_core.numa_node": "0",
        "format_gib(self.requested_cpu_memory)": "1.18",
        "format_gib(consumed_memory)": "0.54",
    }

    def fill(fmt: str) -> str:
        return re.sub(r"\{([^{}]+)\}", lambda m: values.get(m.group(1), "1"), fmt)

    summary = [f["format"] for f in formats if f["format"].startswith("Free memory on device (")]
    auto = [f["format"] for f in formats if f["format"].startswith("Auto set (")]
    assert summary and auto
    parsed = parse_log("INFO 05-01 10:00:00 [gpu_worker.py:1] " + fill(summary[0]))
    assert parsed.total_memory_bytes == round(23.52 * GIB) and parsed.requested_bytes == round(21.16 * GIB)
    assert parsed.consumed_bytes == round(5.97 * GIB) and parsed.peak_activation_logged_bytes == round(1.65 * GIB)
    assert parsed.cudagraph_bytes == round(0.27 * GIB) and parsed.available_kv_bytes == round(13.55 * GIB)
    parsed = parse_log("INFO 05-01 10:00:00 [cpu_worker.py:1] " + fill(auto[0]))
    assert parsed.available_kv_bytes == round(0.64 * GIB) and parsed.non_kv_bytes == round(0.54 * GIB)
    assert parsed.requested_bytes == round(1.18 * GIB) and parsed.kv_cache_source == "auto"
