"""Deployments as people publish them, read as candidates for Apron to check (`--from FILE`).

A file is claimed by exactly one format module (deploy/formats: shell scripts and `docker run`,
Compose, SkyPilot, Kubernetes and KServe manifests, Helm values of vLLM production-stack and llm-d,
vLLM's `--config` YAML and recipes, Apron's own recipe form; Python apps and unrendered templates
are recognised and refused in one line). The reader returns every deployment in the file; each
becomes a typed Candidate: the model, the release the file pins, the GPU type and count, the nodes,
every flag and environment variable sorted by what it does to the plan, and where in the file each
field came from. This room parses files; it plans nothing (plan/candidate.py does).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from apron.deploy.candidate import Candidate, Found, Sourced
from apron.deploy.formats import format_for
from apron.deploy.formats.base import Document, name_of, with_config_file
from apron.errors import BadInput

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Candidate", "Found", "Sourced", "pick", "read_deployments"]

_KNOWN = (
    "a shell script or command line starting vLLM (vllm serve, docker/podman run vllm/vllm-openai), "
    "Docker Compose, a SkyPilot task, Kubernetes or KServe manifests, Helm values (vLLM production-stack, "
    "llm-d), vLLM --config YAML or a vLLM recipe"
)


def read_deployments(path: str) -> tuple[Candidate, ...]:
    """Every deployment in the file (`-`: stdin), in file order."""
    raw = sys.stdin.buffer.read() if path == "-" else _read(path)
    name = "stdin" if path == "-" else path
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(f"--from {name}: not UTF-8 text; give {_KNOWN}") from None
    document = Document(name, text, None if path == "-" else Path(path))
    reader = format_for(document)
    if reader is None:
        raise BadInput(f"{name}: not a deployment Apron reads; give {_KNOWN}")
    founds = [with_config_file(f, document) for f in _read_with(reader, document)]
    names = _names(founds)
    sha256 = hashlib.sha256(raw).hexdigest()
    return tuple(Candidate.build(f, name, sha256, reader, names) for f in founds)


def _read_with(reader: Any, document: Document) -> list[Found]:
    """The reader's deployments; every refusal names the file, and a field of a shape the reader did not
    expect is bad input too (never a traceback)."""
    try:
        return list(reader.read(document))
    except BadInput as exc:
        if exc.message.startswith(document.name):
            raise
        raise BadInput(f"{document.name}: {exc.message}") from None
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as exc:
        raise BadInput(
            f"{document.name}: a {reader.TITLE} with a field of a shape Apron does not read "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
        ) from None


def pick(candidates: tuple[Candidate, ...], name: str | None) -> tuple[Candidate, ...]:
    """The deployment `--name` names (without one: every deployment the file runs by default)."""
    if name is None:
        return tuple(c for c in candidates if c.is_default)
    chosen = tuple(c for c in candidates if c.name == name)
    if not chosen:
        names = ", ".join(repr(c.name) for c in candidates)
        raise BadInput(f"--name {name!r}: {candidates[0].file} holds no deployment of that name (it has {names})")
    return chosen


def _names(founds: list[Found]) -> tuple[str, ...]:
    names: list[str] = []
    for index, found in enumerate(founds):
        base = name_of(found, index)
        unique, n = base, 2
        while unique in names:
            unique, n = f"{base} ({n})", n + 1
        found.name = unique
        names.append(unique)
    return tuple(names)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"--from {path}: cannot read it ({exc.strerror})") from exc
