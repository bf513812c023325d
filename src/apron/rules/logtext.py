"""Read an engine log as a person would: strip colour and prefixes, stop at shutdown, find the errors.

vLLM prints every line through several layers: a process prefix (`(EngineCore pid=12)`, one per
rank), its logger prefix (`ERROR 11-30 08:02:38 [core.py:1510] `), then the text; tracebacks that
reach stderr come without either. The same exception is usually printed twice (once by the engine
core's logger, once on stderr) and once per rank. Everything after the first `[shutdown]` line is the
engine tearing itself down, whose errors are consequences, never causes.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PROCESS = re.compile(r"^\((?P<proc>[^()]*?)\s*pid=(?P<pid>\d+)\)\s?")
_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]:\s?")
_VLLM_LOGGER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?"
    r"\s+\[[^\]]*\]\s?"
)
_GLOG = re.compile(r"^(?P<level>[IWEF])\d{4}\s+\d\d:\d\d:\d\d\.\d+\s+\d+\s+[^\]\s]+\]\s?")
_UVICORN = re.compile(r"^(?P<level>INFO|WARNING|ERROR|CRITICAL|DEBUG):\s+")
_TIMESTAMP = re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+")
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
QUIET_LEVELS = ("DEBUG", "INFO", "WARNING", "WARN")

# `ValueError: msg`, `torch.OutOfMemoryError: msg`, `ValueError (file.py:12 fn): msg` (a summary),
# `ValidationError for ModelConfig: msg` (pydantic, summarised), `DOWNLOAD_INCOMPLETE: msg` (a harness code)
_EXCEPTION = re.compile(
    r"^(?P<exc>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault)|[A-Z][A-Z0-9]*_[A-Z0-9_]+))"
    r"(?:\s+for\s+\w+)?(?:\s*\((?P<where>[^)]*)\))?:\s+(?P<msg>\S.*)$"
)
_PYDANTIC_HEADER = re.compile(r"^\d+ validation errors? for \w+$")
_PYDANTIC_ITEM = re.compile(r"^\s*(?P<kind>Value|Assertion|Type|Key|Runtime) error, (?P<msg>.+)$")
_PYDANTIC_TAIL = re.compile(r"\s*\[type=\w+,.*\]\s*$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TRACEBACK_START = (
    "Traceback (most recent call last):",
    "The above exception was the direct cause",
    "During handling of the above exception",
)
_VERSION = re.compile(r"(?:vLLM(?: API server)? version|█\s+version)\s+v?(?P<version>\d+\.\d+\.\d+)")
_NON_DEFAULT_ARGS = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")


@dataclass(frozen=True)
class LogLine:
    number: int  # 1-based, as an editor shows it
    process: str | None  # "EngineCore", "Worker_TP1", None for bare stderr
    level: str | None  # the logger's level; None for bare lines (tracebacks on stderr)
    text: str


@dataclass(frozen=True)
class ErrorLine:
    """One `SomeError: message` the log printed, with the traceback frames that led to it."""

    line: LogLine
    exception: str
    message: str
    where: str | None = None  # "file.py:12 function" from a summarised error
    frames: tuple[str, ...] = ()  # "vllm/v1/worker/gpu_worker.py:load_model", outermost first


def clean_line(number: int, raw: str) -> LogLine:
    text = _ANSI.sub("", raw).rstrip("\r\n")
    process, level = None, None
    for _ in range(4):  # prefixes nest in a few known orders; four passes cover them
        text, process, level, changed = _strip_one(text, process, level)
        if not changed:
            break
    return LogLine(number, process, level, text)


def _strip_one(text: str, process: str | None, level: str | None) -> tuple[str, str | None, str | None, bool]:
    if m := _TIMESTAMP.match(text):
        return text[m.end() :], process, level, True
    if m := _PROCESS.match(text):
        return text[m.end() :], m.group("proc").strip() or "process", level, True
    if m := _RANK.match(text):
        return text[m.end() :], process or f"rank{m.group('rank')}", level, True
    if level is None and (m := _VLLM_LOGGER.match(text)):
        return text[m.end() :], process, {"WARN": "WARNING"}.get(m.group("level"), m.group("level")), True
    if level is None and (m := _GLOG.match(text)):
        return text[m.end() :], process, _GLOG_LEVELS[m.group("level")], True
    if level is None and (m := _UVICORN.match(text)):
        return text[m.end() :], process, m.group("level"), True
    return text, process, level, False


def read_lines(log_text: str) -> list[LogLine]:
    return [clean_line(i, raw) for i, raw in enumerate(log_text.splitlines(), start=1)]


def before_shutdown(lines: list[LogLine]) -> list[LogLine]:
    """The lines before the first `[shutdown]` line: what follows is teardown noise."""
    for index, line in enumerate(lines):
        if line.text.lstrip().startswith("[shutdown]"):
            return lines[:index]
    return lines


def error_lines(lines: list[LogLine]) -> list[ErrorLine]:
    """Every exception line, in log order (a pydantic ValidationError as the error it wraps)."""
    found = []
    for index, line in enumerate(lines):
        if line.level in QUIET_LEVELS:
            continue
        error = _exception(line)
        if error is None:
            continue
        exception, message, where = error
        if _PYDANTIC_HEADER.match(message):
            inner = _pydantic_item(lines, index, line.process)
            if inner is not None:
                exception, message = inner
        found.append(ErrorLine(line, exception, message, where, _frames(lines, index, line.process)))
    return found


def _exception(line: LogLine) -> tuple[str, str, str | None] | None:
    text = line.text.strip().lstrip("| ").strip()
    m = _EXCEPTION.match(text)
    if m is None or m.group("exc") in ("INFO", "WARNING", "ERROR", "DEBUG", "CRITICAL", "NOTE", "HINT"):
        return None
    message = _PYDANTIC_TAIL.sub("", m.group("msg")).strip()
    exception = m.group("exc")
    item = _PYDANTIC_ITEM.match(message)
    if item:  # "ValidationError for ModelConfig: Value error, ..." as a summary writes it
        exception, message = item.group("kind") + "Error", _PYDANTIC_TAIL.sub("", item.group("msg")).strip()
    return exception, message, m.group("where")


def _pydantic_item(lines: list[LogLine], index: int, process: str | None) -> tuple[str, str] | None:
    for line in lines[index + 1 : index + 6]:
        if line.process != process:
            continue
        m = _PYDANTIC_ITEM.match(line.text)
        if m:
            return m.group("kind") + "Error", _PYDANTIC_TAIL.sub("", m.group("msg")).strip()
    return None


def _frames(lines: list[LogLine], index: int, process: str | None) -> tuple[str, ...]:
    """The traceback frames printed just above lines[index] by the same process, outermost first."""
    frames: list[str] = []
    for line in reversed(lines[max(0, index - 400) : index]):
        if line.process != process:
            continue
        text = line.text.strip()
        if text.startswith(_TRACEBACK_START) or (_EXCEPTION.match(text) and frames):
            break
        m = _FRAME.match(line.text)
        if m:
            frames.append(f"{_short_path(m.group('file'))}:{m.group('func')}")
    return tuple(reversed(frames))


def _short_path(path: str) -> str:
    """site-packages/vllm/v1/worker/x.py -> vllm/v1/worker/x.py: the install location is noise."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.rsplit("/", 3)[-1] if path.count("/") > 3 else path


def engine_version_in(lines: list[LogLine]) -> str | None:
    """The version vLLM's start-up banner prints."""
    for line in lines[:400]:
        m = _VERSION.search(line.text)
        if m:
            return m.group("version")
    return None


def non_default_args(lines: list[LogLine]) -> dict | None:
    """The `non-default args: {...}` line vLLM logs at start-up: the flags the boot really used."""
    for line in lines[:400]:
        m = _NON_DEFAULT_ARGS.search(line.text)
        if m:
            try:
                value = ast.literal_eval(m.group("args"))
            except (ValueError, SyntaxError):
                return None
            return value if isinstance(value, dict) else None
    return None
