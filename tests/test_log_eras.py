"""Every era's accounting lines read back, as the release printed them and as people paste them.

0.29-0.33: the format strings the shipped engine facts list (read from each release's source).
0.6-0.28: the format strings quoted from each release's source (the sdist on PyPI), file and release
named beside each; the logger prefix and the process tag are the release's own (logger.py `_FORMAT`,
`_add_prefix`). Each era's log is read in four forms: as printed, without the process tag, with every
prefix stripped, and inside `docker compose logs -t`; all must give the same values."""

from __future__ import annotations

import re

import pytest

from apron.measure.logparse import GIB, parse_log

# The logger prefix of each era (vllm/logger.py _FORMAT): no bracket before 0.8.
OLD_LOGGER = "{level} 11-02 10:00:00 {file}] "
NEW_LOGGER = "{level} 11-02 10:00:00 [{file}] "

# (release, logger prefix, process tag of a worker, [(file, printf format, args, {field: value})])
ERAS = [
    (
        "0.6.0",
        OLD_LOGGER,
        "(VllmWorkerProcess pid=2211) ",  # executor/multiproc_worker_utils.py _add_prefix
        [
            (
                "llm_engine.py:213",
                "Initializing an LLM engine (v%s) with config: model=%r, device_config=%s",
                ("0.6.0", "m", "cuda"),
                {"engine_version": "0.6.0", "platform": "gpu"},
            ),
            (
                "model_runner.py:926",
                "Loading model weights took %.4f GB",
                (14.9888,),
                {"weights_bytes": round(14.9888 * GIB)},
            ),
            ("gpu_executor.py:122", "# GPU blocks: %d, # CPU blocks: %d", (27889, 2048), {"num_gpu_blocks": 27889}),
            ("model_runner.py:1335", "Graph capturing finished in %.0f secs.", (18.0,), {"graph_capture_seconds": 18}),
            ("selector.py:116", "Using XFormers backend.", (), {"attention_backend": "XFormers"}),
        ],
    ),
    (
        "0.6.3.post1",
        OLD_LOGGER,
        "(VllmWorkerProcess pid=2211) ",
        [
            (
                "gpu_executor.py:126",
                "Maximum concurrency for %s tokens per request: %.2fx",
                (8192, 54.47),
                {"max_concurrency": 54.47, "max_concurrency_tokens_per_request": 8192},
            ),
        ],
    ),
    (
        "0.6.4",
        OLD_LOGGER,
        "(VllmWorkerProcess pid=2211) ",
        [
            # worker/worker.py determine_num_available_blocks ("Gib" is the release's own typo)
            (
                "worker.py:232",
                "Memory profiling results: total_gpu_memory=%.2fGiB initial_memory_usage=%.2fGiB peak_torch_memory=%.2fGiB "
                "memory_usage_post_profile=%.2fGib non_torch_memory=%.2fGiB kv_cache_size=%.2fGiB gpu_memory_utilization=%.2f",
                (79.10, 15.50, 16.73, 15.66, 0.65, 54.47, 0.90),
                {
                    "total_memory_bytes": round(79.10 * GIB),
                    "non_torch_bytes": round(0.65 * GIB),
                    "available_kv_bytes": round(54.47 * GIB),
                },
            ),
        ],
    ),
    (
        "0.6.6",
        OLD_LOGGER,
        "(VllmWorkerProcess pid=2211) ",
        [
            # worker/worker.py: one message over three lines (each continuation line gets the prefix again).
            (
                "worker.py:225",
                "Memory profiling takes %.2f seconds\nthe current vLLM instance can use total_gpu_memory (%.2fGiB) x "
                "gpu_memory_utilization (%.2f) = %.2fGiB\nmodel weights take %.2fGiB; non_torch_memory takes %.2fGiB; "
                "PyTorch activation peak memory takes %.2fGiB; the rest of the memory reserved for KV Cache is %.2fGiB.",
                (5.2, 79.10, 0.90, 71.19, 14.99, 0.65, 1.24, 54.31),
                {
                    "weights_bytes": round(14.99 * GIB),
                    "non_torch_bytes": round(0.65 * GIB),
                    "activation_peak_bytes": round(1.24 * GIB),
                    "available_kv_bytes": round(54.31 * GIB),
                    "requested_bytes": round(71.19 * GIB),
                    "total_memory_bytes": round(79.10 * GIB),
                },
            ),
            (
                "model_runner.py:1535",
                "Graph capturing finished in %.0f secs, took %.2f GiB",
                (12.0, 0.41),
                {"graph_capture_seconds": 12, "cudagraph_bytes": round(0.41 * GIB)},
            ),
            (
                "llm_engine.py:431",
                "init engine (profile, create kv cache, warmup model) took %.2f seconds",
                (33.4,),
                {"init_engine_seconds": 33.4},
            ),
        ],
    ),
    (
        "0.7.3",
        OLD_LOGGER,
        "(VllmWorker rank=1 pid=2211) ",  # v1/executor/multiproc_executor.py
        [
            ("kv_cache_utils.py:522", "# GPU blocks: %d", (40612,), {"num_gpu_blocks": 40612}),
            ("backends.py:33", "torch.compile takes %.2f s in total", (11.2,), {"torch_compile_seconds": 11.2}),
            (
                "gpu_model_runner.py:1060",
                "Loading model weights took %.4f GB",
                (7.5,),
                {"weights_bytes": round(7.5 * GIB)},
            ),
        ],
    ),
    (
        "0.8.5",
        NEW_LOGGER,
        "(VllmWorker rank=1 pid=2211) ",
        [
            (
                "gpu_model_runner.py:1347",
                "Model loading took %.4f GiB and %.6f seconds",
                (7.5095, 3.1),
                {"weights_bytes": round(7.5095 * GIB), "model_load_seconds": 3.1},
            ),
            (
                "kv_cache_utils.py:634",
                "GPU KV cache size: %s tokens",
                ("1,204,224",),
                {"kv_tokens": 1204224, "platform": "gpu"},
            ),
            (
                "kv_cache_utils.py:637",
                "Maximum concurrency for %s tokens per request: %.2fx",
                ("4,096", 294.0),
                {"max_concurrency": 294.0, "max_concurrency_tokens_per_request": 4096},
            ),
        ],
    ),
    (
        "0.9.2",
        NEW_LOGGER,
        "(VllmWorker rank=1 pid=2211) ",
        [
            (
                "gpu_worker.py:232",
                "Available KV cache memory: %.2f GiB",
                (55.12,),
                {"available_kv_bytes": round(55.12 * GIB)},
            ),
            (
                "loggers.py:137",
                "Engine %03d: vllm cache_config_info with initialization after num_gpu_blocks is: %d",
                (0, 75264),
                {"num_gpu_blocks": 75264},
            ),
            ("default_loader.py:273", "Loading weights took %.2f seconds", (2.5,), {"weights_load_seconds": 2.5}),
            # utils.py MemoryProfilingResult.__repr__, logged at DEBUG
            (
                "gpu_worker.py:226",
                "Memory profiling takes %.2f seconds. Total non KV cache memory: %.2fGiB; torch peak memory increase: "
                "%.2fGiB; non-torch forward increase memory: %.2fGiB; weights memory: %.2fGiB.",
                (3.1, 16.83, 1.40, 0.44, 14.99),
                {"activation_peak_bytes": round(1.40 * GIB), "non_torch_bytes": round(0.44 * GIB)},
            ),
        ],
    ),
    (
        "0.11.0",
        NEW_LOGGER,
        "(EngineCore_DP0 pid=2211) ",  # utils/__init__.py decorate_logs
        [
            (
                "core.py:77",
                "Initializing a V1 LLM engine (v%s) with config: model=%r, device_config=%s",
                ("0.11.0", "m", "cuda"),
                {"engine_version": "0.11.0"},
            ),
            (
                "gpu_model_runner.py:2653",
                "Model loading took %.4f GiB and %.6f seconds",
                (15.2678, 9.25),
                {"weights_bytes": round(15.2678 * GIB)},
            ),
        ],
    ),
    (
        "0.14.0",
        NEW_LOGGER,
        "(Worker_TP1 pid=2211) ",
        [
            (
                "gpu_model_runner.py:3906",
                "Model loading took %s GiB memory and %.6f seconds",
                ("15.27", 9.25),
                {"weights_bytes": round(15.27 * GIB)},
            ),
            (
                "gpu_worker.py:359",
                "Available KV cache memory: %s GiB",
                ("55.1",),
                {"available_kv_bytes": round(55.1 * GIB)},
            ),
            ("monitor.py:35", "torch.compile takes %.2f s in total", (21.3,), {"torch_compile_seconds": 21.3}),
        ],
    ),
    (
        "0.25.0",
        NEW_LOGGER,
        "(Worker_TP1 pid=2211) ",
        [
            (
                "core.py:338",
                "init engine (profile, create kv cache, warmup model) took %.2f s (compilation: %.2f s)",
                (41.7, 20.2),
                {"init_engine_seconds": 41.7},
            ),
            (
                "gpu_model_runner.py:6708",
                "Graph capturing finished in %.0f secs, took %.2f GiB",
                (9.0, 0.55),
                {"cudagraph_bytes": round(0.55 * GIB)},
            ),
            ("kv_cache_utils.py:2146", "GPU KV cache size: %s tokens", ("1,204,224",), {"kv_tokens": 1204224}),
            ("monitor.py:20", "torch.compile took %.2f s in total", (20.5,), {"torch_compile_seconds": 20.5}),
        ],
    ),
]


def render(logger: str, tag: str, file: str, fmt: str, args: tuple) -> list[str]:
    """What the release wrote: NewLineFormatter repeats the whole prefix on every line of a message."""
    prefix = tag + logger.format(level="INFO" if "DEBUG" not in fmt else "DEBUG", file=file)
    return [prefix + part for part in (fmt % args).split("\n")]


FORMS = {
    "as printed": lambda line, tag: line,
    "no process tag": lambda line, tag: line.removeprefix(tag),
    "prefix stripped": lambda line, tag: re.sub(r"^.*?(?:INFO|DEBUG) 11-02 10:00:00 \[?[\w.]+:\d+\] ", "", line),
    "docker compose": lambda line, tag: f"vllm-1  | 2025-01-20T10:00:00.000000000Z {line}",
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("release, logger, tag, lines", ERAS, ids=[era[0] for era in ERAS])
def test_each_eras_lines_read_back(release, logger, tag, lines, form):
    for file, fmt, args, expected in lines:
        text = "\n".join(FORMS[form](line, tag) for line in render(logger, tag, file, fmt, args))
        parsed = parse_log(text)
        for name, value in expected.items():
            assert getattr(parsed, name) == value, (release, form, fmt, name, getattr(parsed, name))


def test_ranks_take_the_minimum_and_a_stripped_paste_too():
    """Per-rank duplicates: the minimum over ranks (vLLM sizes the KV cache by its smallest worker),
    whether the lines carry their rank's tag or lost it in a paste."""
    lines = [
        f"(VllmWorker rank={rank} pid={100 + rank}) INFO 04-01 10:00:00 [gpu_worker.py:232] Available KV cache "
        f"memory: {gib} GiB"
        for rank, gib in ((0, "55.12"), (1, "54.98"), (2, "55.40"))
    ]
    tagged = parse_log("\n".join(lines))
    assert tagged.available_kv_bytes == round(54.98 * GIB)
    assert set(tagged.per_rank["available_kv_bytes"]) == {
        "VllmWorker pid=100",
        "VllmWorker pid=101",
        "VllmWorker pid=102",
    }
    stripped = parse_log("\n".join(line.split("] ", 1)[1] for line in lines))
    assert stripped.available_kv_bytes == round(54.98 * GIB)


def test_ray_lines_keep_their_node_and_say_they_were_folded():
    text = (
        "(RayWorkerWrapper pid=9, ip=10.0.0.2) INFO 05-01 10:00:20 [gpu_worker.py:320] Available KV cache memory: "
        "55.10 GiB [repeated 3x across cluster]\n"
        "(RayWorkerWrapper pid=9, ip=10.0.0.3) INFO 05-01 10:00:20 [gpu_worker.py:320] Available KV cache memory: "
        "54.00 GiB"
    )
    parsed = parse_log(text)
    assert parsed.available_kv_bytes == round(54.00 * GIB)
    assert set(parsed.per_rank["available_kv_bytes"]) == {
        "RayWorkerWrapper pid=9 ip=10.0.0.2",
        "RayWorkerWrapper pid=9 ip=10.0.0.3",
    }
    first = parse_log(text.split("\n")[0])
    assert first.available_kv_bytes == round(55.10 * GIB)
    assert "printed by 3 processes" in first.sources["available_kv_bytes"]


def test_absent_stays_absent():
    """A log that prints no accounting line has no value, whatever else it says."""
    parsed = parse_log("INFO 05-01 10:00:00 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n")
    assert all(
        value is None
        for name, value in parsed.to_json().items()
        if name.endswith(("_bytes", "_seconds", "_tokens", "_blocks")) or name in ("max_model_len", "kv_tokens")
    )


def test_settings_of_every_era():
    """0.9 on: `non-default args: {...}`; 0.6-0.8: `args: Namespace(...)` (every argument, the
    non-literal ones left out)."""
    new = parse_log(
        "(APIServer pid=1) INFO 05-01 10:00:00 [utils.py:233] non-default args: {'model': 'm', 'max_model_len': 4096}"
    )
    assert new.settings == {"model": "m", "max_model_len": 4096} and new.settings_from == "non-default args"
    old = parse_log(
        "INFO 11-02 10:00:00 api_server.py:529] args: Namespace(host=None, port=8000, model='m', "
        "max_model_len=8192, gpu_memory_utilization=0.9, dtype='auto', middleware=[], chat_template=None, "
        "ssl_cert_reqs=<VerifyMode.CERT_NONE: 0>)"
    )
    assert old.settings_from == "args"
    assert old.settings["max_model_len"] == 8192 and old.settings["model"] == "m"
    assert "ssl_cert_reqs" not in old.settings
