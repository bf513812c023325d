"""Fingerprint a failed boot's log: the decisive error, a stable id, its family and typed fields.

The decisive error is the earliest error of a known family printed before the engine started shutting
down; the wrappers that follow it ("Engine core initialization failed", EngineDeadError, a worker that
"died unexpectedly") only point back at it. The id hashes the family and the message with every
value masked (numbers, paths, addresses, pids, hex), so the same failure of another model, size or
machine gets the same id.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from apron.rules import logtext
from apron.rules.classify import Classification, classify
from apron.rules.families import OBSERVED, family_blame, is_wrapper
from apron.rules.pattern import split

PHASES = ("config", "distributed_init", "weights_loading", "profiling", "kv_cache", "graph_capture", "serving")

# Function names on the way to the error, by start-up phase. Precedence matters: graph capture calls
# the dummy run that profiling also uses, and both run inside the KV-cache initialisation.
_PHASE_FRAMES = (
    ("graph_capture", ("capture_model", "_capture_cudagraphs", "capture_graphs", "_warmup_and_capture")),
    (
        "profiling",
        (
            "profile_run",
            "_dummy_run",
            "_dummy_sampler_run",
            "_dummy_pooler_run",
            "determine_available_memory",
            "determine_num_available_blocks",
        ),
    ),
    (
        "weights_loading",
        (
            "load_model",
            "load_weights",
            "create_weights",
            "_load_weights",
            "initialize_model",
            "process_weights_after_loading",
            "get_model",
        ),
    ),
    (
        "kv_cache",
        (
            "get_kv_cache_configs",
            "_check_enough_kv_cache_memory",
            "initialize_kv_cache_tensors",
            "_allocate_kv_cache_tensors",
            "initialize_from_config",
            "resolve_cudagraph_mode_and_sizes",
        ),
    ),
    (
        "distributed_init",
        (
            "init_distributed_environment",
            "init_worker_distributed_environment",
            "ensure_model_parallel_initialized",
            "initialize_model_parallel",
            "init_device",
        ),
    ),
    (
        "config",
        (
            "create_engine_config",
            "create_model_config",
            "_get_and_verify_max_len",
            "__post_init__",
            "_check_valid_dtype",
            "check_if_supports_dtype",
        ),
    ),
)
# Without a traceback (a summary, a bare line), the words say where it happened.
_PHASE_WORDS = (
    ("graph_capture", r"graph captur|capturing cuda graph"),
    ("weights_loading", r"loading weights|load_weights|weight load|create_weights"),
    ("profiling", r"profil|dummy run|warming up"),
)
_MASKS = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b(?:tcp|http|https|file)://\S+"), "<addr>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<addr>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.+@~-]+){2,}/?"), "<path>"),
    (re.compile(r"\bpid[= ]\d+", re.I), "pid=<n>"),
    (re.compile(r"\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"-?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?"), "<n>"),
)


@dataclass(frozen=True)
class Fingerprint:
    id: str  # "fp-" + 12 hex of family + exception + normalized message
    family: str
    blame: str  # model, host, harness, input, unknown (a hint; the boot's fault classifier decides)
    exception: str | None
    message: str
    normalized: str
    fields: dict = field(compare=False)
    phase: str | None = None
    line_number: int | None = None
    process: str | None = None
    occurrences: int = 1  # the same error printed again (stderr copy, other ranks)
    processes: tuple[str, ...] = ()
    source: str = "observed"
    template: str | None = None
    engine_version: str | None = None
    frames: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "family": self.family,
            "blame": self.blame,
            "exception": self.exception,
            "message": self.message,
            "normalized": self.normalized,
            "fields": self.fields,
            "phase": self.phase,
            "line_number": self.line_number,
            "process": self.process,
            "occurrences": self.occurrences,
            "processes": list(self.processes),
            "source": self.source,
            "template": self.template,
            "engine_version": self.engine_version,
            "frames": list(self.frames[-8:]),
        }


def fingerprint(log_text: str, *, engine_version: str | None = None) -> Fingerprint | None:
    """The decisive error of a failed boot's log, or None when the log shows no error."""
    lines = logtext.read_lines(log_text)
    version = engine_version or logtext.engine_version_in(lines)
    live = logtext.before_shutdown(lines)
    errors = logtext.error_lines(live)
    decisive = _decisive(errors, live, version) if errors else None
    if decisive is None or is_wrapper(decisive.family):
        # Only a wrapper: the cause may still be named on a line that is no `Error:` line (an NCCL
        # warning, a summary such as "root cause earlier in log: CUDA OOM while loading weights").
        return _from_bare_lines(live, version) or decisive
    return decisive


def _decisive(errors: list[logtext.ErrorLine], lines: list[logtext.LogLine], version: str | None) -> Fingerprint:
    groups: dict[tuple[str, str], list[logtext.ErrorLine]] = {}
    for error in errors:
        groups.setdefault((error.exception, _strip_rank_words(error.message)), []).append(error)
    best: tuple[list[logtext.ErrorLine], Classification] | None = None
    for same in groups.values():  # in log order: the first error of a known family ends the search
        found = classify(same[0].exception, same[0].message, version)
        if best is None or _rank(found) < _rank(best[1]):
            best = (same, found)
        if _rank(found) == 0:
            break
    if best is None:
        raise ValueError("_decisive needs at least one error line")
    same, found = best
    first = min(same, key=lambda e: e.line.number)
    frames = max((e.frames for e in same), key=len) or _where_frame(first.where)
    return _build(found, first.exception, first.message, first.line, frames, same, lines, version)


def _where_frame(where: str | None) -> tuple[str, ...]:
    """A summary's "(v1/core/kv_cache_utils.py:879 _check_enough_kv_cache_memory)" as one frame."""
    m = re.fullmatch(r"\s*(\S+?)(?::\d+)?\s+(\w+)\s*", where or "")
    return (f"{m.group(1)}:{m.group(2)}",) if m else ()


def _rank(found: Classification) -> int:
    if is_wrapper(found.family):
        return 2
    return 1 if found.family == "unclassified" else 0


def _strip_rank_words(message: str) -> str:
    """Ranks print the same error with their own device or rank number; count them as one."""
    return re.sub(r"\b(?:rank|device|GPU|cuda:)\s*\d+", "<rank>", message)


def _from_bare_lines(lines: list[logtext.LogLine], version: str | None) -> Fingerprint | None:
    """No `SomeError: ...` line: an NCCL warning, a summary, or a start-up that stalls."""
    for line in lines:
        if line.level in logtext.QUIET_LEVELS or not line.text.strip():
            continue
        for observed in OBSERVED:
            if observed.regex.search(line.text):
                found = classify(None, line.text.strip(), version, wrappers=False)
                return _build(found, None, line.text.strip(), line, (), [], lines, version)
    tail = [line for line in lines if line.text.strip()][-3:]
    stall = next(o for o in OBSERVED if o.name == "engine_startup_stall")
    if tail and all(stall.regex.search(line.text) for line in tail):
        found = Classification(stall.name, stall.blame, {}, "observed")
        return _build(found, None, tail[-1].text.strip(), tail[0], (), [], lines, version)
    return None


def _build(
    found: Classification,
    exception: str | None,
    message: str,
    line: logtext.LogLine,
    frames: tuple[str, ...],
    same: list,
    lines: list[logtext.LogLine],
    version: str | None,
) -> Fingerprint:
    phase = phase_of(frames, message, lines, line.number)
    if phase == "graph_capture" and found.family in ("cuda_error", "unclassified"):
        # A CUDA error raised while capturing is a capture failure, whatever its words.
        found = Classification("cudagraph_capture_failed", "model", dict(found.fields), found.source)
    normalized = normalize(_skeleton(found.template) if found.template else message)
    digest = hashlib.sha1(f"{found.family}\n{exception}\n{normalized}".encode()).hexdigest()[:12]
    processes = tuple(sorted({e.line.process for e in same if e.line.process}))
    return Fingerprint(
        id=f"fp-{digest}",
        family=found.family,
        blame=found.blame or family_blame(found.family),
        exception=exception,
        message=message,
        normalized=normalized,
        fields=dict(found.fields),
        phase=phase,
        line_number=line.number,
        process=line.process,
        occurrences=max(1, len(same)),
        processes=processes,
        source=found.source,
        template=found.template,
        engine_version=version,
        frames=frames,
    )


def _skeleton(template: str) -> str:
    return "".join(p if isinstance(p, str) else "<field>" for p in split(template))


def normalize(text: str) -> str:
    """Mask every value so the same failure elsewhere reads the same."""
    for regex, mask in _MASKS:
        text = regex.sub(mask, text)
    return " ".join(text.split())


def phase_of(frames: tuple[str, ...], message: str, lines: list[logtext.LogLine], line_number: int) -> str | None:
    functions = {f.rsplit(":", 1)[-1] for f in frames}
    for phase, names in _PHASE_FRAMES:
        if functions & set(names):
            return phase
    for phase, words in _PHASE_WORDS:
        if re.search(words, message, re.I):
            return phase
    return _phase_from_progress(lines, line_number)


def _phase_from_progress(lines: list[logtext.LogLine], line_number: int) -> str | None:
    """The start-up progress lines vLLM logs before the error."""
    phase = None
    for line in lines:
        if line.number >= line_number:
            break
        text = line.text
        if "Starting to load model" in text or "Loading model" in text:
            phase = "weights_loading"
        elif "Model loading took" in text or "Loading weights took" in text:
            phase = "profiling"
        elif "Available KV cache memory" in text or "KV cache size" in text:
            phase = "kv_cache"
        elif "Capturing CUDA graph" in text:
            phase = "graph_capture"
        elif "Graph capturing finished" in text or "Application startup complete" in text:
            phase = "serving"
    return phase
