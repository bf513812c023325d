"""Whose failure was a boot's: the host's, the harness's, or the model's on this engine. The one
classifier (apron.rules.families, through the fingerprint) decides; apron.boot asks here and never
re-classifies.

A host fault (the machine never started, NCCL or NVSwitch failing, ECC/Xid errors, no CUDA device, a
full disk, a lost connection) says nothing about the model: the boot is retried on another machine
and never recorded against it. A harness fault (an incomplete download, the engine missing on the
target, Apron's own tooling) says nothing about the model either, but another machine will not help.
Everything else the engine said before it exited is the model's failure on this release (a failure
of unknown blame, whose cause is not in the log, included: nothing says another machine would help).
"""

from __future__ import annotations

from apron.measure.logparse import ParsedLog
from apron.records.documents import Fault, FaultKind
from apron.rules.classify import Classification, classify
from apron.rules.families import CONNECTION_LOST, family_summary
from apron.rules.fingerprint import Fingerprint, fingerprint

# Stages Apron runs itself: a failure there with no host evidence is the harness's.
HARNESS_STAGES = ("connect", "prepare", "identity", "copy", "download", "launch", "after_healthy", "teardown")
SSH_CONNECTION_FAILED = 255  # ssh's own exit status when it could not connect or lost the connection


def classify_failure(
    stage: str, message: str = "", log: ParsedLog | None = None, *, ssh_exit_code: int | None = None
) -> Fault:
    """stage: where it failed ("connect", "download", "launch", "start" = engine start-up, "health" =
    not healthy in time, "after_healthy", ...); message: the harness's own description; log: the
    engine's log, read by apron.measure.logparse."""
    found = fingerprint(log) if log is not None else None
    said, said_line = _harness_said(message)
    for kind in ("host", "harness"):
        if found is not None and found.blame == kind:
            return Fault(kind, family_summary(found.family), _evidence(found), stage)
        if said is not None and said.blame == kind:
            return Fault(kind, family_summary(said.family), said_line, stage)
        if kind == "host" and (CONNECTION_LOST.regex.search(message) or ssh_exit_code == SSH_CONNECTION_FAILED):
            reason = "machine unreachable" if stage == "connect" else "lost connection"
            lost = [line.strip() for line in message.splitlines() if CONNECTION_LOST.regex.search(line)]
            return Fault("host", reason, (lost or [message.strip() or "ssh exited with status 255"])[0], stage)
    if stage in HARNESS_STAGES:
        return Fault("harness", f"{stage} failed", message.strip() or "(no message)", stage)
    return _models(stage, message, found)


def _harness_said(message: str) -> tuple[Classification | None, str]:
    """The family of the harness's own message, and its line, when it names a host's or harness's failure."""
    for line in message.splitlines():
        found = classify(None, line.strip(), wrappers=False) if line.strip() else None
        if found is not None and found.blame in ("host", "harness"):
            return found, line.strip()
    return None, ""


def _models(stage: str, message: str, found: Fingerprint | None) -> Fault:
    kind: FaultKind = "model"
    if found is not None:
        return Fault(kind, family_summary(found.family), _evidence(found), stage)
    if stage == "health":
        return Fault(kind, "engine did not become healthy", message.strip() or "(no message)", stage)
    return Fault(kind, "engine exited without an error line", message.strip() or "(no message)", stage)


def _evidence(found: Fingerprint) -> str:
    return f"{found.exception}: {found.message}" if found.exception else found.message
