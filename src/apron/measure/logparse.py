"""Read a vLLM start-up log: the engine's own accounting, labelled measured, never guessed.

Covers the releases in use, 0.6 through 0.33: V0's "Memory profiling" lines, the V1 and V2 GPU
runners, the CPU worker's "Explicitly/Auto set (X/Y) GiB for KV cache" lines and the summary line of
0.2x. A field stays None when the log does not print it (the CPU build prints no "Model loading
took", eager mode no graph capture). Lines are matched after removing ANSI colour and the
`(EngineCore_DP0 pid=1)`-style process prefix; values printed by several ranks are kept per rank and
the field takes their minimum, as vLLM sizes the KV cache by its smallest worker.

The format strings come from vLLM's own `logger.info(...)` calls (tests/test_logparse.py renders the
ones the engine facts list for 0.29/0.30/0.33 and checks this reader takes them back). Older
releases' strings are quoted from their source next to each pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

GIB = 2**30
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# `(EngineCore_DP0 pid=12)`, `(VllmWorker TP1 pid=3)`, `(RayWorkerWrapper pid=9, ip=10.0.0.2)`.
PROCESS = re.compile(r"\((?P<proc>[A-Za-z][\w:. -]*?)(?: rank=\d+)? pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)")
# logger.py _FORMAT: "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"; releases
# before 0.7 printed "file.py:123]" without the opening bracket.
HEADER = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<time>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? "
    r"\[?(?P<file>[\w./-]+\.py):(?P<line>\d+)\] ?(?P<msg>.*)$"
)
NUM = r"(-?[\d,]*\.?\d+)"
MAX_ERRORS = 8


@dataclass(frozen=True)
class LogLine:
    number: int  # 1-based line number in the file
    process: str | None  # "EngineCore pid=12" or None for a line without a process prefix
    level: str | None  # None for raw lines (tracebacks, uvicorn, tqdm)
    source: str | None  # "gpu_worker.py:300"
    message: str


@dataclass(frozen=True)
class ParsedLog:
    engine_version: str | None = None
    weights_bytes: int | None = None
    weights_load_seconds: float | None = None
    model_load_seconds: float | None = None
    available_kv_bytes: int | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    num_gpu_blocks: int | None = None
    cudagraph_bytes: int | None = None
    cudagraph_estimate_bytes: int | None = None
    activation_peak_bytes: int | None = None
    non_torch_bytes: int | None = None
    torch_compile_seconds: float | None = None
    graph_capture_seconds: float | None = None
    init_engine_seconds: float | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    attention_backend: str | None = None
    # Printed by some releases only; kept because compare and the rules read them.
    requested_bytes: int | None = None
    total_memory_bytes: int | None = None
    consumed_bytes: int | None = None  # summary line: weights + non-torch
    peak_activation_logged_bytes: int | None = None  # summary line, includes the applied graph estimate
    non_kv_bytes: int | None = None  # CPU "Auto set": memory consumed by non-KV usages
    kv_cache_source: str | None = None  # "explicit" | "auto" | "profiled"
    platform: str | None = None  # "cpu" | "gpu" from the KV-size line
    errors: tuple[str, ...] = ()
    # Errors printed once shutdown had begun: noise after a healthy run (EngineDeadError), but the
    # only trace of a failure raised in the API server after it stopped the engine core.
    errors_after_shutdown: tuple[str, ...] = ()
    per_rank: dict = field(default_factory=dict)  # field -> {process: value} where ranks differ
    sources: dict = field(default_factory=dict)  # field -> the log line it came from (number: text)

    def to_json(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}


def split_line(number: int, raw: str) -> LogLine:
    text = ANSI.sub("", raw).rstrip("\r\n")
    text = text.rsplit("\r", 1)[-1]  # tqdm redraws a line with carriage returns: the last one wins
    proc_match = PROCESS.search(text)
    header = HEADER.search(text)
    process = (
        f"{proc_match['proc']} pid={proc_match['pid']}"
        if proc_match and (header is None or proc_match.start() < header.start())
        else None
    )
    if header is None:
        message = text[proc_match.end() :].lstrip() if process and proc_match else text
        return LogLine(number, process, None, None, message)
    return LogLine(number, process, header["level"], f"{header['file']}:{header['line']}", header["msg"])


def read_lines(text: str) -> list[LogLine]:
    return [split_line(i, raw) for i, raw in enumerate(text.split("\n"), start=1)]


def gib_bytes(text: str) -> int:
    """vLLM prints memory as round(bytes / 2**30, 2): the byte value is known to +-0.005 GiB."""
    return round(float(text.replace(",", "")) * GIB)


def count(text: str) -> int:
    return int(text.replace(",", "").split(".")[0])


def seconds(text: str) -> float:
    return float(text.replace(",", ""))


# (field, regex, group, converter) - the first matching pattern of a field in a line wins; a later
# line overrides an earlier one from the same process (V2 prints the graph line twice: profiling,
# then the real capture).
PATTERNS: tuple[tuple[str, re.Pattern[str], int, Callable[[str], Any]], ...] = tuple(
    (name, re.compile(regex), group, conv)
    for name, regex, group, conv in (
        # core.py: "Initializing a V1 LLM engine (v%s) with config: %s"; V0 "Initializing an LLM engine".
        ("engine_version", r"Initializing an? (?:V\d )?LLM engine \(v([^)\s]+)\)", 1, str),
        ("engine_version", r"vLLM (?:API )?server version ([\w.+-]+)", 1, str),
        ("engine_version", r"█\s+version\s+(\d+\.\d+[\w.+-]*)", 1, str),
        # "Model loading took %s GiB memory and %.6f seconds" (0.2x); "%.4f GiB and %.6f seconds"
        # (0.9-0.1x); "%.4f GB and %.6f seconds" (0.7/0.8 V1, GB meaning 2**30 bytes).
        ("weights_bytes", r"Model loading took " + NUM + r" ?Gi?B(?: memory)? and", 1, gib_bytes),
        ("model_load_seconds", r"Model loading took [\d.]+ ?Gi?B(?: memory)? and " + NUM + r" ?s", 1, seconds),
        # V0 model_runner.py: "Loading model weights took %.4f GB" (bytes / 2**30).
        ("weights_bytes", r"Loading model weights took " + NUM + r" ?GB", 1, gib_bytes),
        ("weights_load_seconds", r"Loading weights took " + NUM + r" ?s", 1, seconds),
        ("available_kv_bytes", r"Available KV cache memory: " + NUM + r" ?GiB", 1, gib_bytes),
        (
            "available_kv_bytes",
            r"reserved " + NUM + r" GiB memory for KV Cache as specified by kv_cache_memory_bytes",
            1,
            gib_bytes,
        ),
        ("available_kv_bytes", r"Current kv cache memory in use is " + NUM + r" ?GiB", 1, gib_bytes),
        # V0 worker.py (0.6.4-0.7): "... the rest of the memory reserved for KV Cache is %.2fGiB."
        ("available_kv_bytes", r"the rest of the memory reserved for KV Cache is " + NUM + r" ?GiB", 1, gib_bytes),
        ("non_torch_bytes", r"non_torch_memory takes " + NUM + r" ?GiB", 1, gib_bytes),
        ("activation_peak_bytes", r"PyTorch activation peak memory takes " + NUM + r" ?GiB", 1, gib_bytes),
        ("weights_bytes", r"model weights take " + NUM + r" ?GiB", 1, gib_bytes),
        ("requested_bytes", r"x gpu_memory_utilization \([\d.]+\) = " + NUM + r" ?GiB", 1, gib_bytes),
        ("total_memory_bytes", r"total_gpu_memory \(" + NUM + r" ?GiB\)", 1, gib_bytes),
        # V0 worker.py (0.6.0-0.6.3): "Memory profiling results: total_gpu_memory=%.2fGiB
        # initial_memory_usage=%.2fGiB peak_torch_memory=%.2fGiB memory_usage_post_profile=%.2fGiB
        # non_torch_memory=%.2fGiB kv_cache_size=%.2fGiB gpu_memory_utilization=%.2f"
        ("total_memory_bytes", r"Memory profiling results: total_gpu_memory=" + NUM + r"GiB", 1, gib_bytes),
        ("non_torch_bytes", r"Memory profiling results: .*non_torch_memory=" + NUM + r"GiB", 1, gib_bytes),
        ("available_kv_bytes", r"Memory profiling results: .*kv_cache_size=" + NUM + r"GiB", 1, gib_bytes),
        # V1 0.8-0.10 at DEBUG, MemoryProfilingResult.__repr__: "Memory profiling takes %.2f seconds.
        # Total non KV cache memory: %.2fGiB; torch peak memory increase: %.2fGiB; non-torch forward
        # increase memory: %.2fGiB; weights memory: %.2fGiB."
        ("activation_peak_bytes", r"torch peak memory increase: " + NUM + r" ?GiB", 1, gib_bytes),
        ("non_torch_bytes", r"non-torch forward increase memory: " + NUM + r" ?GiB", 1, gib_bytes),
        ("weights_bytes", r"Total non KV cache memory: .*weights memory: " + NUM + r" ?GiB", 1, gib_bytes),
        # cpu_worker.py determine_available_memory.
        ("available_kv_bytes", r"Explicitly set \(" + NUM + r"/[\d.]+\) GiB for KV cache", 1, gib_bytes),
        ("total_memory_bytes", r"Explicitly set \([\d.]+/" + NUM + r"\) GiB for KV cache", 1, gib_bytes),
        ("available_kv_bytes", r"Auto set \(" + NUM + r"/[\d.]+\) GiB for KV cache", 1, gib_bytes),
        ("total_memory_bytes", r"Auto set \([\d.]+/" + NUM + r"\) GiB for KV cache", 1, gib_bytes),
        ("requested_bytes", r"Auto set .* with " + NUM + r" GiB requested memory for the worker", 1, gib_bytes),
        ("non_kv_bytes", r"Auto set .* " + NUM + r" GiB memory was consumed by non-kv usages", 1, gib_bytes),
        # kv_cache_utils.py: 0.29 "GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per
        # request: %.2fx"; 0.30+ "%s KV cache size: ..." (GPU, CPU, "GPU + host"); tokens as f"{n:,}".
        ("kv_tokens", r"KV cache size: " + NUM + r" tokens", 1, count),
        ("max_concurrency", r"Maximum concurrency for [\d,]+ tokens per request: " + NUM + r"x", 1, seconds),
        ("max_concurrency_tokens_per_request", r"Maximum concurrency for " + NUM + r" tokens per request", 1, count),
        # V0 "# GPU blocks: %d, # CPU blocks: %d"; V1 0.7/0.8 "# GPU blocks: %d".
        ("num_gpu_blocks", r"# (?:GPU|gpu) blocks: " + NUM, 1, count),
        ("num_gpu_blocks", r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=" + NUM, 1, count),
        ("graph_capture_seconds", r"Graph capturing finished in " + NUM + r" secs?", 1, seconds),
        ("cudagraph_bytes", r"Graph capturing finished in [\d.]+ secs?, took " + NUM + r" ?GiB", 1, gib_bytes),
        ("cudagraph_bytes", r"CUDA graph pool memory: " + NUM + r" GiB \(actual\)", 1, gib_bytes),
        (
            "cudagraph_estimate_bytes",
            r"CUDA graph pool memory: [-\d.]+ GiB \(actual\), " + NUM + r" GiB \(estimated\)",
            1,
            gib_bytes,
        ),
        ("cudagraph_estimate_bytes", r"Estimated CUDA graph memory: " + NUM + r" GiB total", 1, gib_bytes),
        # gpu_worker.py summary (0.2x): "Free memory on device (F/T GiB) on startup. Desired GPU memory
        # utilization is (U, R GiB). Actual usage is C GiB for consumed memory (weights + non-torch),
        # P GiB for peak activation, and G GiB for CUDAGraph memory. ..."
        ("total_memory_bytes", r"Free memory on device \([\d.]+/" + NUM + r" GiB\) on startup", 1, gib_bytes),
        ("requested_bytes", r"Desired GPU memory utilization is \([\d.]+, " + NUM + r" GiB\)", 1, gib_bytes),
        ("consumed_bytes", r"Actual usage is " + NUM + r" GiB for consumed memory", 1, gib_bytes),
        (
            "peak_activation_logged_bytes",
            r"consumed memory \(weights \+ non-torch\), " + NUM + r" GiB for peak activation",
            1,
            gib_bytes,
        ),
        ("cudagraph_bytes", r"GiB for peak activation, and " + NUM + r" GiB for CUDAGraph memory", 1, gib_bytes),
        # compilation/monitor.py: "torch.compile takes %.2f s in total" (0.7-0.9), "[tag]torch.compile
        # took %.2f s in total" (0.2x, tag only in 0.33).
        ("torch_compile_seconds", r"torch\.compile (?:takes?|took) " + NUM + r" ?s in total", 1, seconds),
        (
            "init_engine_seconds",
            r"init engine \(profile, create kv cache, warmup model\) took " + NUM + r" ?s",
            1,
            seconds,
        ),
        ("max_model_len", r"Using max model len " + NUM, 1, count),
        ("max_model_len", r"Auto-fit max_model_len: reduced from \d+ to " + NUM, 1, count),
        ("block_size", r"Setting kv cache block size to " + NUM, 1, count),
        ("block_size", r"Setting attention block size to " + NUM + r" tokens", 1, count),
        ("attention_backend", r"Using (\w+) attention backend out of potential backends", 1, str),
        # V0/early V1: "Using Flash Attention backend.", "Using FlashAttention backend on V1 engine.",
        # "Using XFormers backend.".
        ("attention_backend", r"^Using ([A-Za-z][\w ]*?) backend(?: on V1 engine)?\.$", 1, str),
    )
)
# Summed over a process's lines rather than overwritten: 0.33 prints one compile line per tagged
# sub-model ("[language_model]", "[encoder]").
SUMMED = {"torch_compile_seconds"}
# Every pattern above contains one of these words: lines without any (most of a log) skip the ~60
# patterns, which keeps a 50 MB log to seconds.
ANCHORS = re.compile(
    r"took|takes|KV cache|kv cache|LLM engine|version|GiB|GB|blocks|Graph|Using|Setting|concurrency|"
    r"memory|Memory|Auto-fit"
)
NOT_A_BACKEND = re.compile(r"MoE|Model Runner|KV cache layout|executor", re.I)


CONTINUATION_STOP = re.compile(r"^(?:INFO:|WARNING:|ERROR:|Traceback|\[?[WE]\d{4} |\s*File \"|\s*$)")


def logical_messages(lines: list[LogLine]):
    """Each logged message with the unprefixed lines that continue it: V0 printed its memory
    profiling summary as one message over three lines."""
    for index, line in enumerate(lines):
        if line.level is None:
            continue
        parts = [line.message]
        for nxt in lines[index + 1 : index + 6]:
            if nxt.level is not None or nxt.process is not None or CONTINUATION_STOP.match(nxt.message):
                break
            parts.append(nxt.message)
        yield line, " ".join(parts)


def extract(lines: list[LogLine]) -> tuple[dict, dict]:
    """field -> {process: value}, and field -> source line, in the log's order."""
    observed: dict[str, dict[str, object]] = {}
    sources: dict[str, str] = {}
    for line, message in logical_messages(lines):
        if not ANCHORS.search(message):
            continue
        process = line.process or "main"
        seen_here: set[str] = set()
        for name, regex, group, conv in PATTERNS:
            if name in seen_here:
                continue
            match = regex.search(message)
            if not match or (name == "attention_backend" and NOT_A_BACKEND.search(message)):
                continue
            seen_here.add(name)
            value = conv(match.group(group))
            per_process = observed.setdefault(name, {})
            if name in SUMMED and process in per_process:
                value = round(per_process[process] + value, 2)
            per_process[process] = value
            sources[name] = f"{line.number}: {message[:300]}"
    return observed, sources


def combine(observed: dict[str, dict[str, object]]) -> tuple[dict[str, Any], dict[str, dict[str, object]]]:
    """One value per field: the minimum over ranks for numbers, and the per-rank table where they differ."""
    values: dict[str, Any] = {}
    per_rank: dict[str, dict[str, object]] = {}
    for name, by_process in observed.items():
        distinct = set(by_process.values())
        numbers = [v for v in distinct if isinstance(v, (int, float))]
        if len(numbers) == len(distinct):
            values[name] = min(numbers)
        else:
            values[name] = list(by_process.values())[-1]
        if len(by_process) > 1 and len(distinct) > 1:
            per_rank[name] = dict(by_process)
    return values, per_rank


def kv_details(lines: list[LogLine], values: dict) -> dict:
    """Where the KV size came from, the platform, and the activation peak without the graph estimate."""
    text = "\n".join(line.message for line in lines if line.level is not None)
    out = {}
    if "Explicitly set (" in text or "as specified by kv_cache_memory_bytes" in text:
        out["kv_cache_source"] = "explicit"
    elif "Auto set (" in text:
        out["kv_cache_source"] = "auto"
    elif values.get("available_kv_bytes") is not None:
        out["kv_cache_source"] = "profiled"
    platform = re.search(r"(?m)^(GPU|CPU|XPU|TPU|HPU)(?: \+ host)? KV cache size:", text)
    if platform:
        out["platform"] = platform.group(1).lower()
    elif "cpu_worker.py" in "\n".join(line.source or "" for line in lines):
        out["platform"] = "cpu"
    peak = values.get("peak_activation_logged_bytes")
    if peak is not None and values.get("activation_peak_bytes") is None:
        # gpu_worker.py: peak_activation_memory = transient peak + the applied graph estimate; the
        # estimate is applied unless VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 says it is off.
        applied = (
            0 if "CUDA graph memory profiling is disabled" in text else (values.get("cudagraph_estimate_bytes") or 0)
        )
        out["activation_peak_bytes"] = peak - applied
    return out


ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault)|Exception|NCCL WARN)\b:?")
FRAME = re.compile(
    r"^(?:Traceback \(most recent call last\)|File \"|\s|\^+$|raise\b|During handling|The above exception)"
)
ERROR_WORDS = re.compile(
    r"CUDA out of memory|out of memory|NCCL error|Xid|uncorrectable ECC|No space left on device|"
    r"No CUDA GPUs are available|CUDA driver initialization failed|"
    r"Engine core initialization failed|failed to start",
    re.I,
)


def error_lines(lines: list[LogLine]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The last error lines before shutdown began (what the engine said went wrong, in order), and
    those after it; after "[shutdown]" the engine mostly reports its own teardown, not the cause."""
    shutdown = next((i for i, line in enumerate(lines) if "[shutdown]" in line.message), len(lines))
    return _errors(lines[:shutdown]), _errors(lines[shutdown:])


def _errors(lines: list[LogLine]) -> tuple[str, ...]:
    found: list[str] = []
    for index, line in enumerate(lines):
        message = line.message.strip()
        if not message or FRAME.match(line.message) or message.startswith('File "'):
            continue
        is_error = bool(
            ERROR_LINE.match(message) or (line.level in ("ERROR", "CRITICAL") and ERROR_WORDS.search(message))
        )
        if line.level is None and not is_error and ERROR_WORDS.search(message) and "Warning" not in message:
            is_error = True
        if not is_error:
            continue
        # pydantic prints the reason on the next line: "  Value error, User-specified max_model_len ..."
        nxt = lines[index + 1].message.strip() if index + 1 < len(lines) else ""
        if message.endswith("validation error for ModelConfig") or re.search(r"\d+ validation errors? for", message):
            message = f"{message}: {nxt}" if nxt else message
        message = message[:2000]
        if message in found:
            found.remove(message)
        found.append(message)
    return tuple(found[-MAX_ERRORS:])


def parse_log(text: str) -> ParsedLog:
    lines = read_lines(text)
    observed, sources = extract(lines)
    values, per_rank = combine(observed)
    values.update(kv_details(lines, values))
    if (
        "activation_peak_bytes" in values
        and "activation_peak_bytes" not in sources
        and "peak_activation_logged_bytes" in sources
    ):
        sources["activation_peak_bytes"] = (
            sources["peak_activation_logged_bytes"] + " (minus the applied CUDA-graph estimate)"
        )
    errors, after_shutdown = error_lines(lines)
    return ParsedLog(**values, errors=errors, errors_after_shutdown=after_shutdown, per_rank=per_rank, sources=sources)


def parse_file(path) -> ParsedLog:
    with open(path, "rb") as handle:
        return parse_log(handle.read().decode("utf-8", errors="replace"))
