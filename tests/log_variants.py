"""The same real log as people paste it: what docker compose, Ray, kubectl, a terminal with colour, a
Windows editor or an issue thread (logger prefix stripped) make of vLLM's lines. Rendered with plain
regexes over the fixtures' known format, independently of the reader under test."""

from __future__ import annotations

import re
from collections.abc import Callable

# The fixtures' two prefixes: vLLM's process tag and its 0.8+ logger prefix.
TAG = re.compile(r"^\((?P<name>[^()]*?) pid=(?P<pid>\d+)\) ")
LOGGER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<time>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<where>[^\]]+)\] "
)
COLOURS = {"DEBUG": "37", "INFO": "32", "WARNING": "33", "ERROR": "31", "CRITICAL": "35"}


def _split(line: str) -> tuple[str, str, str]:
    """(process tag, logger prefix, message) of one fixture line."""
    tag = TAG.match(line)
    rest = line[tag.end() :] if tag else line
    logger = LOGGER.match(rest)
    return (tag.group(0) if tag else ""), (logger.group(0) if logger else ""), rest[logger.end() :] if logger else rest


def _each(text: str, change: Callable[[str, str, str], str]) -> str:
    return "\n".join(change(*_split(line)) for line in text.split("\n"))


def stripped(text: str) -> str:
    """An issue thread: every prefix gone, the messages alone."""
    return _each(text, lambda tag, logger, message: message)


def tag_kept(text: str) -> str:
    """A log shipper that keeps vLLM's process tag and drops the logger prefix."""
    return _each(text, lambda tag, logger, message: tag + message)


def level_kept(text: str) -> str:
    """An issue thread that keeps the process tag and the level: `(EngineCore_DP0 pid=258) INFO ...`."""
    return _each(text, lambda tag, logger, message: tag + (logger.split(" ", 1)[0] + " " if logger else "") + message)


def one_line(tag: str, logger: str, message: str, form: str) -> str:
    """One line in one of the forms a paste leaves it in."""
    level, _, rest = logger.partition(" ")
    where = LOGGER.match(logger)
    return {
        "prefixed": tag + logger + message,
        "stripped": message,
        "tag_kept": tag + message,
        "level_kept": tag + (level + " " if logger else "") + message,
        "level_and_file_kept": tag + (f"{level} [{where['where']}] " if where else "") + message,
    }[form]


FORMS = ("prefixed", "stripped", "tag_kept", "level_kept", "level_and_file_kept")


def mixed(text: str, forms: list[str]) -> str:
    """Line i in forms[i % len(forms)]: a paste stripped in some places and not in others."""
    lines = text.split("\n")
    return "\n".join(one_line(*_split(line), forms[i % len(forms)]) for i, line in enumerate(lines))


def ray(text: str) -> str:
    """Workers under Ray: `(RayWorkerWrapper pid=N, ip=...)`, and Ray's deduplication suffix on the
    lines it folded (every INFO line of the engine core here)."""

    def change(tag: str, logger: str, message: str) -> str:
        if not tag or "APIServer" in tag:
            return tag + logger + message
        pid = TAG.match(tag)["pid"]  # type: ignore[index]
        repeated = " [repeated 2x across cluster]" if logger.startswith("INFO") and message.strip() else ""
        return f"(RayWorkerWrapper pid={pid}, ip=10.0.4.17) {logger}{message}{repeated}"

    return _each(text, change)


def container(text: str) -> str:
    """`docker compose logs -t`: the service, then Docker's timestamp, then vLLM's line."""
    return _each(text, lambda tag, logger, message: f"vllm-1  | 2025-11-30T08:01:57.123456789Z {tag}{logger}{message}")


def coloured_crlf(text: str) -> str:
    """A terminal capture saved on Windows: vLLM's ColoredFormatter codes and CRLF line ends."""

    def change(tag: str, logger: str, message: str) -> str:
        if logger:
            m = LOGGER.match(logger)
            assert m is not None
            logger = (
                f"\x1b[{COLOURS[m['level']]}m{m['level']}\x1b[0m \x1b[90m{m['time']}\x1b[0m "
                f"\x1b[90m[{m['where']}]\x1b[0m "
            )
        if tag:
            tag = f"\x1b[0;36m{tag.rstrip()}\x1b[0;0m "
        return f"{tag}{logger}{message}"

    return _each(text, change).replace("\n", "\r\n")


def v0_logger(text: str) -> str:
    """The logger prefix of 0.6-0.7 (`file.py:12]`, no opening bracket) and a VLLM_LOGGING_PREFIX."""

    def change(tag: str, logger: str, message: str) -> str:
        if logger:
            m = LOGGER.match(logger)
            assert m is not None
            logger = f"[node-3] {m['level']} {m['time']} {m['where']}] "
        return f"{tag}{logger}{message}"

    return _each(text, change)


VARIANTS: dict[str, Callable[[str], str]] = {
    "stripped": stripped,
    "tag_kept": tag_kept,
    "level_kept": level_kept,
    "ray": ray,
    "container": container,
    "coloured_crlf": coloured_crlf,
    "v0_logger": v0_logger,
}
