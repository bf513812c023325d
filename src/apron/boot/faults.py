"""Whose failure was it: the host's, the harness's, or the model's on this engine?

A host fault (the machine never started, NCCL or NVSwitch failing at the first collective, ECC/Xid
errors, no CUDA device, a full disk, a lost connection) says nothing about the model: the boot is
retried on another machine and never recorded against the model. A harness fault (an incomplete
download, Apron's own tooling) says nothing about the model either, but another machine will not
help. Everything else the engine said before it exited is the model's failure on this release.

The patterns are matched against real error text (tests/test_faults.py): the engine's error lines,
the last lines of its log, and the harness's own message for the stage that failed.
"""

from __future__ import annotations

import re
from typing import Final

from apron.records.documents import Fault

HOST: Final = "host"
HARNESS: Final = "harness"
MODEL: Final = "model"

# (reason, pattern). Order matters only between kinds: host patterns are tried first because an
# NCCL or ECC failure surfaces as an engine exception too.
HOST_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (reason, re.compile(rx, re.I))
    for reason, rx in (
        (
            "machine never started",
            r"no longer any instances available|ResourcesUnavailableError|"
            r"InsufficientInstanceCapacity|Failed to provision|no (?:GPU )?capacity|"
            r"instance (?:failed to start|was preempted|terminated)",
        ),
        (
            "NCCL/NVSwitch failure at first collective",
            r"NCCL error|nccl(?:System|Internal|UnhandledCuda|Remote)Error|"
            r"NCCL WARN|NVSwitch|fabric ?manager|"
            r"CUDA error: system not yet initialized|"
            r"unhandled system error.*nccl|ProcessGroupNCCL.*(?:timeout|Timeout|abort)",
        ),
        (
            "ECC/Xid GPU error",
            r"uncorrectable ECC|ECC error|\bXid\b|fallen off the bus|GPU is lost|"
            r"CUDA error: unspecified launch failure|row remapp",
        ),
        (
            "no CUDA device",
            r"No CUDA GPUs are available|CUDA driver initialization failed|no NVIDIA driver|"
            r"NVIDIA-SMI has failed|cudaErrorNoDevice|CUDA error: no CUDA-capable device|"
            r"Failed to infer device type",
        ),
        ("disk full", r"No space left on device|ENOSPC|\[Errno 28\]|Disk quota exceeded"),
    )
)
# Matched in the harness's own message only: an engine log mentions "Connection reset" in passing.
CONNECTION_LOST = re.compile(
    r"Connection (?:reset|closed|timed out|refused)|Broken pipe|No route to host|"
    r"kex_exchange_identification|client_loop: send disconnect|ssh: connect to host|"
    r"Could not resolve hostname|lost connection",
    re.I,
)
HARNESS_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (reason, re.compile(rx, re.I))
    for reason, rx in (
        (
            "download incomplete",
            r"DOWNLOAD_INCOMPLETE|IncompleteRead|Consistency check failed|"
            r"file should be of size|ChunkedEncodingError|download (?:failed|incomplete)",
        ),
        (
            "engine not installed on the target",
            r"vllm: (?:command )?not found|no vllm executable|"
            r"No module named 'vllm'",
        ),
        ("port already in use", r"Address already in use|\[Errno 98\]"),
    )
)
# Stages run by Apron itself: a failure there with no host evidence is the harness's.
HARNESS_STAGES = ("connect", "prepare", "identity", "copy", "download", "launch", "after_healthy", "teardown")


def classify(
    stage: str,
    message: str = "",
    errors: tuple[str, ...] | list[str] = (),
    log_tail: str = "",
    ssh_exit_code: int | None = None,
) -> Fault:
    """Classify one failure from everything known about it.

    stage: where it failed ("connect", "download", "launch", "start" = engine start-up, "health" =
    not healthy in time, "after_healthy", ...); message: the harness's own description; errors: the
    engine's error lines (apron.measure.logparse); log_tail: the end of the engine log, where NCCL
    and driver messages that are not Python exceptions appear.
    """
    texts = [message, *errors, log_tail]
    for reason, pattern in HOST_PATTERNS:
        hit = _first_match(pattern, texts)
        if hit:
            return Fault(HOST, reason, hit, stage)
    hit = _first_match(CONNECTION_LOST, [message])
    if hit or ssh_exit_code == 255:
        reason = "machine unreachable" if stage == "connect" else "lost connection"
        return Fault(HOST, reason, hit or message or "ssh exited with status 255", stage)
    for reason, pattern in HARNESS_PATTERNS:
        hit = _first_match(pattern, texts)
        if hit:
            return Fault(HARNESS, reason, hit, stage)
    if stage in HARNESS_STAGES:
        return Fault(HARNESS, f"{stage} failed", message or "(no message)", stage)
    root = root_error(errors) or message or "engine exited without an error line"
    return Fault(
        MODEL, "engine refused or failed" if stage != "health" else "engine did not become healthy", root, stage
    )


def root_error(errors) -> str | None:
    """The engine's root cause: the first exception line, not the 'initialization failed' wrapper."""
    wrappers = re.compile(
        r"Engine core initialization failed|WorkerProc initialization failed|"
        r"EngineCore failed to start|WorkerProc failed to start|EngineDeadError"
    )
    for line in errors:
        if not wrappers.search(line):
            return line
    return errors[-1] if errors else None


def _first_match(pattern: re.Pattern, texts) -> str | None:
    for text in texts:
        if not text:
            continue
        for line in str(text).splitlines():
            if pattern.search(line):
                return line.strip()
    return None
