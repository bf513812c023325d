"""Read a vLLM start-up log: the engine's own accounting, labelled measured, never guessed, and
the one parsed-log value the rest of Apron reads (the diagnosis included: apron.rules consumes it).

Covers 0.6 through 0.33, V0 and V1 (docs/logs.md lists every line read, per era): V0's "Memory
profiling" lines, the V1 and V2 GPU runners, the CPU worker's "Explicitly/Auto set (X/Y) GiB for KV
cache" lines and the summary line of 0.2x. A field stays None when the log does not print it (the CPU
build prints no "Model loading took", eager mode no graph capture). Lines are read after taking off
whatever prefixes they carry (apron.measure.loglines); values printed by several ranks are kept per
rank and the field takes their minimum, as vLLM sizes the KV cache by its smallest worker.

A line is vLLM's when it carries vLLM's logger prefix, or when its message matches one of the
release's own format strings: a line pasted without its prefix (an issue thread, a log shipper that
keeps only the message, the process tag or the level) is read as the engine printed it, taking the
level its format string is logged at, and `template_lines` lists the lines recognised by their
message alone. The format strings are the engine facts' (log formats and refusal templates), handed
in by the caller (`Formats`, apron.rules.formats), and the accounting patterns below.

The format strings come from vLLM's own `logger.info(...)` calls (tests/test_logparse.py renders the
ones the engine facts list for 0.29-0.33 and checks this reader takes them back). Older releases'
strings are quoted from their source next to each pattern.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any, Protocol

from apron.frozen import field, frozen, replace
from apron.measure.logerrors import LogError, errors_in, is_code_line
from apron.measure.loglines import LogLine, read_lines, shutdown_index

GIB = 2**30
NUM = r"(-?[\d,]*\.?\d+)"
MAX_ERRORS = 8
_JSON_SKIP = ("lines", "log_errors", "log_errors_after_shutdown")
# Prefixes that settle whose line it is: vLLM's own logger, and loggers that are not vLLM's.
_SETTLED_PREFIXES = ("vllm", "glog", "uvicorn")


@frozen
class Recognised:
    """A message that renders one of the release's format strings."""

    template: str
    level: str | None  # "INFO", ...: the level the release logs it at; None for an exception's message


class Formats(Protocol):
    """The release's format strings, asked of one message (apron.rules.formats builds it from the facts)."""

    def recognise(self, message: str, engine_version: str | None) -> Recognised | None: ...


@frozen
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
    per_rank: dict[str, dict[str, object]] = field(default_factory=dict)  # field -> {process: value} where ranks differ
    sources: dict[str, str] = field(default_factory=dict)  # field -> the log line it came from (number: text)
    # The flags the run used, as vLLM printed them: `non-default args: {...}` (0.9 on) or
    # `args: Namespace(...)` (0.6-0.8, every argument); None when the log shows neither.
    settings: dict[str, Any] | None = None
    settings_from: str | None = None  # "non-default args" | "args"
    processes: tuple[str, ...] = ()  # every process tag seen, in order ("EngineCore_DP0 pid=12")
    # The lines without vLLM's logger prefix that are vLLM's by their message alone (it matches one of
    # the release's format strings or an accounting pattern), by line number.
    template_lines: tuple[int, ...] = ()
    # What the rules read, kept out of the JSON: every line as read, and every error with its context.
    lines: tuple[LogLine, ...] = field(default=(), compare=False, repr=False)
    log_errors: tuple[LogError, ...] = field(default=(), compare=False, repr=False)
    log_errors_after_shutdown: tuple[LogError, ...] = field(default=(), compare=False, repr=False)

    @property
    def non_default_settings(self) -> dict[str, Any] | None:
        """The flags the run set beyond vLLM's defaults (`non-default args:`, 0.9 on); None where the log
        prints every argument (0.6-0.8's Namespace) or none."""
        return self.settings if self.settings_from == "non-default args" else None

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
            for f in fields(self)
            if f.name not in _JSON_SKIP
        }

    @property
    def has_vllm_lines(self) -> bool:
        """Some line carries vLLM's logger prefix or matches one of its format strings."""
        return bool(self.template_lines) or any(line.prefix == "vllm" for line in self.lines)

    @property
    def live_lines(self) -> tuple[LogLine, ...]:
        """The lines before shutdown began."""
        return self.lines[: shutdown_index(list(self.lines))]


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
        ("engine_version", r"^vLLM version v?(\d+\.\d+[\w.+-]*)", 1, str),
        # v1/worker/gpu_model_runner.py "Model loading took %.4f GiB and %.6f seconds" (0.8-0.11),
        # "%s GiB memory and %.6f seconds" (0.14 on; "%s GiB and" in the V2 runner).
        ("weights_bytes", r"Model loading took " + NUM + r" ?Gi?B(?: memory)? and", 1, gib_bytes),
        ("model_load_seconds", r"Model loading took [\d.]+ ?Gi?B(?: memory)? and " + NUM + r" ?s", 1, seconds),
        # worker/model_runner.py "Loading model weights took %.4f GB" (V0 0.6-0.10 and V1 0.6.6-0.7;
        # bytes / 2**30).
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
        # worker/worker.py (V0, 0.6.5-0.10), one message over three lines: "Memory profiling takes %.2f
        # seconds\nthe current vLLM instance can use total_gpu_memory (%.2fGiB) x gpu_memory_utilization
        # (%.2f) = %.2fGiB\nmodel weights take %.2fGiB; non_torch_memory takes %.2fGiB; PyTorch
        # activation peak memory takes %.2fGiB; the rest of the memory reserved for KV Cache is %.2fGiB."
        ("available_kv_bytes", r"the rest of the memory reserved for KV Cache is " + NUM + r" ?GiB", 1, gib_bytes),
        ("non_torch_bytes", r"non_torch_memory takes " + NUM + r" ?GiB", 1, gib_bytes),
        ("activation_peak_bytes", r"PyTorch activation peak memory takes " + NUM + r" ?GiB", 1, gib_bytes),
        ("weights_bytes", r"model weights take " + NUM + r" ?GiB", 1, gib_bytes),
        ("requested_bytes", r"x gpu_memory_utilization \([\d.]+\) = " + NUM + r" ?GiB", 1, gib_bytes),
        ("total_memory_bytes", r"total_gpu_memory \(" + NUM + r" ?GiB\)", 1, gib_bytes),
        # worker/worker.py (V0, 0.6.4 only): "Memory profiling results: total_gpu_memory=%.2fGiB
        # initial_memory_usage=%.2fGiB peak_torch_memory=%.2fGiB memory_usage_post_profile=%.2fGib
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
        # v1/core/kv_cache_utils.py: "GPU KV cache size: %s tokens" and, on its own line, "Maximum
        # concurrency for %s tokens per request: %.2fx" (0.8-0.28; V0 0.6.3-0.10 prints the second);
        # 0.29 both on one line; 0.30+ "%s KV cache size: ..." (GPU, CPU, "GPU + host"); as f"{n:,}".
        ("kv_tokens", r"KV cache size: " + NUM + r" tokens", 1, count),
        ("max_concurrency", r"Maximum concurrency for [\d,]+ tokens per request: " + NUM + r"x", 1, seconds),
        ("max_concurrency_tokens_per_request", r"Maximum concurrency for " + NUM + r" tokens per request", 1, count),
        # V0 executor/gpu_executor.py "# GPU blocks: %d, # CPU blocks: %d" (0.6-0.10); V1
        # "# GPU blocks: %d" (0.6.6-0.7); v1/metrics/loggers.py "Engine %03d: vllm cache_config_info with
        # initialization after num_gpu_blocks is: %d" (INFO 0.9-0.11, DEBUG from 0.14).
        ("num_gpu_blocks", r"# (?:GPU|gpu) blocks: " + NUM, 1, count),
        ("num_gpu_blocks", r"after num_gpu_blocks is: " + NUM, 1, count),
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
# Fields whose later line in one process replaces the earlier: the V2 runner prints the graph line
# twice (profiling, then the real capture), a hybrid's block size is set twice (backend, then the
# alignment to the state page), auto-fit reduces max_model_len, V0 logs the blocks after an override.
LAST_WINS = {"cudagraph_bytes", "graph_capture_seconds", "block_size", "max_model_len", "num_gpu_blocks"}
NOT_A_BACKEND = re.compile(r"MoE|Model Runner|KV cache layout|executor", re.I)


CONTINUATION_STOP = re.compile(r"^(?:INFO:|WARNING:|ERROR:|Traceback|\[?[WE]\d{4} |\s*File \"|\s*$)")


def message_processes(lines: list[LogLine]) -> Iterator[tuple[LogLine, str | None]]:
    """Each line but a traceback's frames, with the process that printed it: its own tag, or for a
    bare line that continues a prefixed message (a paste of V0's three-line memory profiling message
    whose continuation lines lost their prefix), the message's. A bare line continues nothing when it
    renders a format string of its own (a prefix-stripped paste): it is a message of its own."""
    head: str | None = None
    following = 0
    for line in lines:
        if line.is_frame:
            continue
        continues = (
            line.prefix is None
            and line.level is None
            and line.process is None
            and following < 5
            and not CONTINUATION_STOP.match(line.message)
        )
        if line.prefix is not None and line.level is not None:
            head, following = line.process_key, 0
        elif continues and head is not None:
            following += 1
            yield line, head
            continue
        else:
            head = None
        yield line, line.process_key


def extract(lines: list[LogLine]) -> tuple[dict[str, dict[str, object]], dict[str, str], set[int]]:
    """field -> {process: value}, field -> source line, in the log's order, and the numbers of the
    lines a pattern read."""
    observed: dict[str, dict[str, object]] = {}
    sources: dict[str, str] = {}
    read: set[int] = set()
    for line, key in message_processes(lines):
        message = line.message
        if not ANCHORS.search(message):
            continue
        process = key or "main"
        seen_here: set[str] = set()
        for name, regex, group, conv in PATTERNS:
            if name in seen_here:
                continue
            match = regex.search(message)
            if not match or (name == "attention_backend" and NOT_A_BACKEND.search(message)):
                continue
            seen_here.add(name)
            read.add(line.number)
            value = _merge(name, observed.setdefault(name, {}).get(process), conv(match.group(group)))
            observed[name][process] = value
            repeated = f" [printed by {line.repeated} processes; Ray shows the first]" if line.repeated > 1 else ""
            sources[name] = f"{line.number}: {message[:300]}{repeated}"
    return observed, sources, read


def _merge(name: str, earlier: Any, value: Any) -> Any:
    """A field seen again in one process: summed, replaced, or the smaller kept (untagged ranks of
    a prefix-stripped log all read as one process)."""
    if earlier is None:
        return value
    if name in SUMMED:
        return round(earlier + value, 2)
    if name in LAST_WINS or not isinstance(value, int | float) or not isinstance(earlier, int | float):
        return value
    return min(earlier, value)


def combine(observed: dict[str, dict[str, object]]) -> tuple[dict[str, Any], dict[str, dict[str, object]]]:
    """One value per field: the minimum over ranks for numbers, and the per-rank table where they differ."""
    values: dict[str, Any] = {}
    per_rank: dict[str, dict[str, object]] = {}
    for name, by_process in observed.items():
        distinct = set(by_process.values())
        numbers = [v for v in distinct if isinstance(v, int | float)]
        if len(numbers) == len(distinct):
            values[name] = min(numbers)
        else:
            values[name] = list(by_process.values())[-1]
        if len(by_process) > 1 and len(distinct) > 1:
            per_rank[name] = dict(by_process)
    return values, per_rank


def kv_details(lines: list[LogLine], values: dict[str, Any]) -> dict[str, Any]:
    """Where the KV size came from, the platform, and the activation peak without the graph estimate."""
    text = "\n".join(line.message for line in lines if not line.is_frame)
    out = {}
    if "Explicitly set (" in text or "as specified by kv_cache_memory_bytes" in text:
        out["kv_cache_source"] = "explicit"
    elif "Auto set (" in text:
        out["kv_cache_source"] = "auto"
    elif values.get("available_kv_bytes") is not None:
        out["kv_cache_source"] = "profiled"
    platform = re.search(r"(?m)^(GPU|CPU|XPU|TPU|HPU)(?: \+ host)? KV cache size:", text)
    device = _DEVICE_CONFIG.search(text)
    if platform:
        out["platform"] = platform.group(1).lower()
    elif device:
        out["platform"] = {"cuda": "gpu"}.get(device.group(1), device.group(1))
    elif _CPU_WORKER.search(text) or any(_CPU_WORKER.search(line.source or line.message) for line in lines):
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


# The engine's config line ("Initializing a V1 LLM engine (v%s) with config: ..., device_config=%s,"),
# printed by every release since 0.6: the device it runs on.
_DEVICE_CONFIG = re.compile(r"LLM engine \(v[^)]*\) with config: .*?\bdevice_config=(cuda|cpu|xpu|tpu|hpu|neuron)\b")
# The CPU worker's own lines, or a traceback through it: its file name is the one sure sign.
_CPU_WORKER = re.compile(r"\bcpu_worker\.py\b|\) GiB for KV cache\b")
_NON_DEFAULT_ARGS = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
_NAMESPACE_ARGS = re.compile(r"^args: Namespace\((?P<args>.*)\)\s*$")
SETTINGS_WINDOW = 400  # the start-up banner and arguments come first


def settings_in(lines: list[LogLine]) -> tuple[dict[str, Any] | None, str | None]:
    """The flags the run used: 0.9 on logs the non-default ones as a dict, 0.6-0.8 every argument
    as an argparse Namespace. Values that are not Python literals are left out, never guessed."""
    for line in lines[:SETTINGS_WINDOW]:
        if m := _NON_DEFAULT_ARGS.search(line.message):
            try:
                value = ast.literal_eval(m["args"])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None, None
            return (value, "non-default args") if isinstance(value, dict) else (None, None)
        if m := _NAMESPACE_ARGS.match(line.message.strip()):
            return _namespace(m["args"]), "args"
    return None, None


def _namespace(text: str) -> dict[str, Any]:
    """`host=None, port=8000, ssl_cert_reqs=<VerifyMode.CERT_NONE: 0>` -> {"host": None, "port": 8000}."""
    out = {}
    for item in _top_level_items(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            continue
        try:
            out[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):  # a class, an enum, a function
            continue
    return out


def _top_level_items(text: str) -> list[str]:
    """Split on the commas outside brackets and quotes."""
    items, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote and text[index - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    return [*items, text[start:]]


def recognise(lines: list[LogLine], formats: Formats | None) -> tuple[list[LogLine], set[int]]:
    """Each line without a settling prefix whose message renders a format string of the release: its
    number, and the line with the level the release logs it at where the paste lost it."""
    if formats is None:
        return lines, set()
    version = _engine_version(lines)
    out, numbers = [], set()
    for index, line in enumerate(lines):
        message = line.message.strip()
        if line.prefix in _SETTLED_PREFIXES or not message or line.is_frame or is_code_line(lines, index):
            out.append(line)
            continue
        found = formats.recognise(message, version)
        if found is not None:
            numbers.add(line.number)
            if line.level is None and found.level is not None:
                line = replace(line, level=found.level)
        out.append(line)
    return out, numbers


def _engine_version(lines: list[LogLine]) -> str | None:
    """The release the log names, for picking its format strings (None: every known release's)."""
    engine_patterns = [regex for name, regex, _, _ in PATTERNS if name == "engine_version"]
    for line in lines:
        if "version" in line.message or "LLM engine" in line.message:
            for regex in engine_patterns:
                if m := regex.search(line.message):
                    return m.group(1)
    return None


def parse_log(text: str, formats: Formats | None = None) -> ParsedLog:
    """The log read. FORMATS (the release's format strings) recognise the lines pasted without vLLM's
    prefix and give them the level the release logs them at; without FORMATS such lines are still
    read, but only the accounting patterns recognise them and they keep no level."""
    lines, recognised = recognise(read_lines(text), formats)
    observed, sources, read = extract(lines)
    unprefixed = {line.number for line in lines if line.prefix not in _SETTLED_PREFIXES}
    template_lines = tuple(sorted(recognised | (read & unprefixed)))
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
    shutdown = shutdown_index(lines)
    live, after = errors_in(lines[:shutdown]), errors_in(lines[shutdown:])
    settings, settings_from = settings_in(lines)
    processes = tuple(dict.fromkeys(key for line in lines if (key := line.process_key)))
    return ParsedLog(
        **values,
        errors=_texts(live),
        errors_after_shutdown=_texts(after),
        per_rank=per_rank,
        sources=sources,
        settings=settings,
        settings_from=settings_from,
        processes=processes,
        template_lines=template_lines,
        lines=tuple(lines),
        log_errors=tuple(live),
        log_errors_after_shutdown=tuple(after),
    )


def _texts(errors: list[LogError]) -> tuple[str, ...]:
    """The last distinct error texts, in order: what `apron log parse` prints."""
    found: list[str] = []
    for error in errors:
        text = error.text[:2000]
        if text in found:
            found.remove(text)
        found.append(text)
    return tuple(found[-MAX_ERRORS:])


def parse_file(path: str | Path, formats: Formats | None = None) -> ParsedLog:
    with open(path, "rb") as handle:
        return parse_log(handle.read().decode("utf-8", errors="replace"), formats)
