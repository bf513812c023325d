"""The errors a vLLM log printed, each with its context: the process, the traceback frames that led
to it, where a summary says it was raised. What they mean is the classifier's business
(apron.rules.families); this module only reads them.

The same exception is usually printed twice (once by the engine core's logger, once on stderr) and
once per rank; every occurrence is kept, in log order.
"""

from __future__ import annotations

import re

from apron.frozen import frozen
from apron.measure.loglines import QUIET_LEVELS, LogLine

# `ValueError: msg`, `torch.OutOfMemoryError: msg`, `Exception: msg`, `ValueError (file.py:12 fn): msg`
# (a summary), `ValidationError for ModelConfig: msg` (pydantic, summarised), `DOWNLOAD_INCOMPLETE: msg`
# (a harness code).
EXCEPTION = re.compile(
    r"^(?P<exc>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault)|Exception|"
    r"[A-Z][A-Z0-9]*_[A-Z0-9_]+))"
    r"(?:\s+for\s+\w+)?(?:\s*\((?P<where>[^)]*)\))?:\s+(?P<msg>\S.*)$"
)
_NOT_EXCEPTIONS = {"INFO", "WARNING", "ERROR", "DEBUG", "CRITICAL", "NOTE", "HINT"}
# A summary that puts where it was raised after the message: "... (config/compilation.py:1535 fn)".
_WHERE_SUFFIX = re.compile(r"\s+\((?P<where>[\w./-]+\.py:\d+(?:\s+[\w.<>]+)?)\)\s*$")
_PYDANTIC_HEADER = re.compile(r"^\d+ validation errors? for \w+$")
_PYDANTIC_ITEM = re.compile(r"^\s*(?:Value|Assertion|Type|Key|Runtime) error, .+$")
_PYDANTIC_TAIL = re.compile(r"\s*\[type=\w+,.*\]\s*$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TRACEBACK_START = (
    "Traceback (most recent call last):",
    "The above exception was the direct cause",
    "During handling of the above exception",
)
# Lines that name a failure without an exception: an ERROR line of the engine, a driver's or NCCL's.
ERROR_WORDS = re.compile(
    r"CUDA out of memory|out of memory|NCCL error|NCCL WARN|\bXid\b|uncorrectable ECC|No space left on device|"
    r"No CUDA GPUs are available|CUDA driver initialization failed|"
    r"Engine core initialization failed|failed to start|initialization failed|died unexpectedly|"
    r"hit an exception|encountered a fatal error",
    re.I,
)


@frozen
class LogError:
    """One error the log printed: `SomeError: message`, or a line that names a failure."""

    line: LogLine
    exception: str | None  # "ValueError"; None for a line that is no `SomeError: ...` line
    message: str
    where: str | None = None  # "config/compilation.py:1535 resolve_cudagraph_mode_and_sizes"
    frames: tuple[str, ...] = ()  # "vllm/v1/worker/gpu_worker.py:load_model", outermost first

    @property
    def text(self) -> str:
        return f"{self.exception}: {self.message}" if self.exception else self.message


def errors_in(lines: list[LogLine]) -> list[LogError]:
    """Every error line, in log order."""
    found: list[LogError] = []
    for index, line in enumerate(lines):
        if is_code_line(lines, index) or line.is_frame or line.level in QUIET_LEVELS:
            continue
        error = exception_of(line) or _worded(line)
        if error is None:
            continue
        if error.exception and _PYDANTIC_HEADER.match(error.message):
            error = _with_pydantic_item(error, lines, index)
        if error.exception:
            error = LogError(line, error.exception, error.message, error.where, _frames(lines, index, line))
        found.append(error)
    return found


def is_code_line(lines: list[LogLine], index: int) -> bool:
    """The source line Python prints under a frame: the line after a `File "..."` line of the
    same process (ranks interleave their tracebacks)."""
    if not lines[index].message[:1].isspace():
        return False
    process = lines[index].process_key
    for before in reversed(lines[max(0, index - 8) : index]):
        if before.process_key == process:
            return bool(_FRAME.match(before.message))
    return False


def exception_of(line: LogLine) -> LogError | None:
    text = line.message.strip().lstrip("| ").strip()
    m = EXCEPTION.match(text)
    if m is None or m["exc"] in _NOT_EXCEPTIONS:
        return None
    message, where = _PYDANTIC_TAIL.sub("", m["msg"]).strip(), m["where"]
    if where is None and (suffix := _WHERE_SUFFIX.search(message)):
        message, where = message[: suffix.start()].rstrip(), suffix["where"]
    return LogError(line, m["exc"], message, where)


def _worded(line: LogLine) -> LogError | None:
    text = line.message.strip()
    if not text or not ERROR_WORDS.search(text):
        return None
    if line.level is None and re.search(r"warning", text, re.I) and "NCCL WARN" not in text:
        return None  # a library's warning about memory, printed on stderr
    return LogError(line, None, text[:2000])


def _with_pydantic_item(error: LogError, lines: list[LogLine], index: int) -> LogError:
    """pydantic prints the reason on the next line: "  Value error, User-specified max_model_len ..."."""
    for line in lines[index + 1 : index + 6]:
        if line.process != error.line.process:
            continue
        if _PYDANTIC_ITEM.match(line.message):
            item = _PYDANTIC_TAIL.sub("", line.message).strip()
            return LogError(error.line, error.exception, f"{error.message}: {item}", error.where)
    return error


def _frames(lines: list[LogLine], index: int, error_line: LogLine) -> tuple[str, ...]:
    """The traceback frames printed just above lines[index] by the same process, outermost first."""
    frames: list[str] = []
    for line in reversed(lines[max(0, index - 400) : index]):
        if line.process != error_line.process:
            continue
        text = line.message.strip()
        if text.startswith(_TRACEBACK_START) or (EXCEPTION.match(text) and frames):
            break
        if m := _FRAME.match(line.message):
            frames.append(f"{short_path(m['file'])}:{m['func']}")
    return tuple(reversed(frames))


def short_path(path: str) -> str:
    """site-packages/vllm/v1/worker/x.py -> vllm/v1/worker/x.py: the install location is noise."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.rsplit("/", 3)[-1] if path.count("/") > 3 else path
