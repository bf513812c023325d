"""The one place Apron's errors live.

Every error a user can cause or meet carries a one-line message that names the file, field, flag or
repo at fault and what to do. The CLI prints the message and exits with the error's code; it shows a
traceback only with APRON_DEBUG=1.
"""

from __future__ import annotations


class ApronError(Exception):
    """Base of Apron's errors: a one-line message and the process exit code."""

    exit_code = 1

    def __init__(self, message: str, *, quiet: bool = False):
        # Keep the message to one line: a newline in an error is a formatting bug, not content.
        super().__init__(" ".join(str(message).split()))
        # quiet: the output already says it all (a plan's verdict); only the exit code carries it
        self.quiet = quiet

    @property
    def message(self) -> str:
        return str(self)


class BadInput(ApronError):
    """The user's input is wrong (file, field, flag, repo id): exit 2, nothing written."""

    exit_code = 2


class Failed(ApronError):
    """Something outside the input failed after retries (network, engine, host): exit 1."""

    exit_code = 1


class HostFault(Failed):
    """The machine, not the model, failed (never started, NCCL, ECC, disk full, lost connection)."""


class HarnessFault(Failed):
    """Apron's own harness failed around a boot (download, tooling), not the model."""
