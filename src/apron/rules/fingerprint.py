"""Fingerprint a failed boot's log: the decisive error, a stable id, its family and typed fields.

The log is read once, by apron.measure.logparse; this module only decides. The decisive error is the
earliest error of a known family printed before the engine started shutting down: an exception line,
or a line that names a failure without one (an NCCL warning, a driver's Xid), whichever comes first.
The wrappers that follow it ("Engine core initialization failed", EngineDeadError, a worker that
"died unexpectedly") only point back at it; a log holding nothing but wrappers lost its cause
(family "cause_not_in_log", blame unknown: no rule can say what to change). The id hashes the family
and the message with every value masked (numbers, paths, addresses, pids, hex), so the same failure
of another model, size or machine gets the same id.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from apron.frozen import field, frozen, replace
from apron.measure.logerrors import LogError, is_code_line
from apron.measure.loglines import QUIET_LEVELS, LogLine
from apron.measure.logparse import ParsedLog, parse_log
from apron.rules.classify import Classification, classify
from apron.rules.families import (
    CAUSE_NOT_IN_LOG,
    OBSERVED,
    PROCESS_EXIT,
    Fields,
    family_blame,
    family_check,
    is_wrapper,
)
from apron.rules.formats import FORMATS
from apron.rules.pattern import template_parts

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
# Loading the tokenizer: vllm/tokenizers/*.py (0.29-0.33), transformers' tokenization_*.py.
_TOKENIZER_FRAME = re.compile(r"(?:^|/)(?:tokenization_\w+|vllm/tokenizers/\w+)\.py:")
# Reading config.json: transformers' configuration_utils.py, vllm/transformers_utils/config.py.
_CONFIG_FRAME = re.compile(r"(?:^|/)(?:transformers/configuration_utils|vllm/transformers_utils/config)\.py:")
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


@frozen
class Fingerprint:
    id: str  # "fp-" + 12 hex of family + exception + normalized message
    family: str
    blame: str  # host, harness, model, unknown (apron.rules.families.BLAMES)
    exception: str | None
    message: str
    normalized: str
    fields: Fields = field(compare=False)
    phase: str | None = None
    line_number: int | None = None
    process: str | None = None
    occurrences: int = 1  # the same error printed again (stderr copy, other ranks)
    processes: tuple[str, ...] = ()
    source: str = "observed"
    template: str | None = None
    engine_version: str | None = None
    frames: tuple[str, ...] = ()
    # what decided the family (Classification.matched)
    matched: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def check(self) -> str | None:
        """What to look at when no flag change fixes it (the checkpoint's files, access, the network)."""
        return family_check(self.family)

    def to_json(self) -> dict[str, Any]:
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
            "matched": self.matched,
            "check": self.check,
        }

    def decisive_json(self) -> dict[str, Any]:
        """The decisive error alone: what `apron log parse` prints beside the accounting."""
        error = f"{self.exception}: {self.message}" if self.exception else self.message
        keys = ("line_number", "process", "family", "blame")
        return {"error": error, **{key: getattr(self, key) for key in keys}}


def fingerprint(log: str | ParsedLog, *, engine_version: str | None = None) -> Fingerprint | None:
    """The decisive error of a failed boot's log, or None when the log shows no error."""
    parsed = parse_log(log, FORMATS) if isinstance(log, str) else log
    version = engine_version or parsed.engine_version
    live = list(parsed.live_lines)
    candidates = _candidates(parsed, live, version)
    if not candidates:
        return _stall(live, version)
    groups: dict[tuple[str | None, str], list[tuple[LogError, Classification]]] = {}
    for error, found in candidates:
        groups.setdefault((error.exception, _strip_rank_words(error.message)), []).append((error, found))
    best = min(groups.values(), key=lambda same: (_rank(same[0][1]), same[0][0].line.number))
    error, found = best[0]
    if is_wrapper(found.family):
        found = replace(found, family=CAUSE_NOT_IN_LOG, blame="unknown", fields={"wrapper": found.family})
    frames = max((e.frames for e, _ in best), key=len) or _where_frame(error.where)
    return _build(found, error, frames, [e for e, _ in best], live, version)


def _candidates(parsed: ParsedLog, live: list[LogLine], version: str | None) -> list[tuple[LogError, Classification]]:
    """Every error before shutdown, classified, and every other line that names an observed failure
    (an NCCL warning, a driver message), in log order."""
    found = [(e, classify(e.exception, e.message, version)) for e in parsed.log_errors]
    seen = {e.line.number for e, _ in found}
    for index, line in enumerate(live):
        text = line.message.strip()
        if line.number in seen or line.is_frame or line.level in QUIET_LEVELS or not text:
            continue
        if is_code_line(live, index):
            continue
        if any(observed.regex.search(text) for observed in OBSERVED):
            error = LogError(line, None, text[:2000])
            found.append((error, classify(None, text, version, wrappers=False)))
    return sorted(found, key=lambda pair: pair[0].line.number)


def _stall(lines: list[LogLine], version: str | None) -> Fingerprint | None:
    """No error at all, and the last lines are the engine waiting for its core: a start-up stall."""
    tail = [line for line in lines if line.message.strip()][-3:]
    stall = next(o for o in OBSERVED if o.name == "engine_startup_stall")
    if tail and all(stall.regex.search(line.message) for line in tail):
        found = Classification(stall.name, stall.blame, {}, "observed", observed=stall.name)
        error = LogError(tail[0], None, tail[-1].message.strip())
        return _build(found, error, (), [], lines, version)
    return None


def _where_frame(where: str | None) -> tuple[str, ...]:
    """A summary's "(v1/core/kv_cache_utils.py:879 _check_enough_kv_cache_memory)" as one frame."""
    m = re.fullmatch(r"\s*(\S+?)(?::\d+)?\s+(\w+)\s*", where or "")
    return (f"{m.group(1)}:{m.group(2)}",) if m else ()


def _rank(found: Classification) -> int:
    """Known families first, then what no pattern knows, then a process that stopped, then wrappers."""
    if is_wrapper(found.family):
        return 3
    if found.family == PROCESS_EXIT.name:
        return 2
    return 1 if found.family == "unclassified" else 0


def _strip_rank_words(message: str) -> str:
    """Ranks print the same error with their own device or rank number; count them as one."""
    return re.sub(r"\b(?:rank|device|GPU|cuda:)\s*\d+", "<rank>", message)


def _build(
    found: Classification,
    error: LogError,
    frames: tuple[str, ...],
    same: list[LogError],
    lines: list[LogLine],
    version: str | None,
) -> Fingerprint:
    line = error.line
    exception, message = found.inner or (error.exception, error.message)
    phase = phase_of(frames, message, lines, line.number)
    if phase == "graph_capture" and found.family in ("cuda_error", "unclassified"):
        # A CUDA error raised while capturing is a capture failure, whatever its words.
        found = replace(found, family="cudagraph_capture_failed", blame="model")
    found = _by_loader(found, frames)
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
        occurrences=max(1, sum(e.line.repeated for e in same)),
        processes=processes,
        source=found.source,
        template=found.template,
        engine_version=version,
        frames=frames,
        matched=found.matched,
    )


def _by_loader(found: Classification, frames: tuple[str, ...]) -> Classification:
    """An error raised while the tokenizer loads (a tokenizer.json cut short: a bare JSONDecodeError)
    is the tokenizer files'; a JSON error raised reading the model's config is the config's."""
    if found.family in ("unclassified", "checkpoint_json_invalid") and any(map(_TOKENIZER_FRAME.search, frames)):
        return replace(found, family="tokenizer_files_invalid", blame="model")
    if found.family == "checkpoint_json_invalid" and any(map(_CONFIG_FRAME.search, frames)):
        return replace(found, family="config_invalid_json", blame="model")
    return found


def _skeleton(template: str) -> str:
    return "".join(p if isinstance(p, str) else "<field>" for p in template_parts(template))


def normalize(text: str) -> str:
    """Mask every value so the same failure elsewhere reads the same."""
    for regex, mask in _MASKS:
        text = regex.sub(mask, text)
    return " ".join(text.split())


def phase_of(frames: tuple[str, ...], message: str, lines: list[LogLine], line_number: int) -> str | None:
    functions = {f.rsplit(":", 1)[-1] for f in frames}
    for phase, names in _PHASE_FRAMES:
        if functions & set(names):
            return phase
    for phase, words in _PHASE_WORDS:
        if re.search(words, message, re.I):
            return phase
    return _phase_from_progress(lines, line_number)


def _phase_from_progress(lines: list[LogLine], line_number: int) -> str | None:
    """The start-up progress lines vLLM logs before the error."""
    phase = None
    for line in lines:
        if line.number >= line_number:
            break
        text = line.message
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
