"""Deployments proposed by other tools, read as candidates for Apron to check (`--from FILE`).

A candidate is a `vllm serve` command line (a text file or `-` for stdin), a recipe YAML, a SkyPilot
task YAML or Kubernetes manifests. Apron extracts the model, revision, GPU type and count, the engine
release and every flag it understands; the flags it does not understand are listed with the plan,
never dropped silently, and the plan names the file and its sha256.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apron.checkpoint import Checkpoint, load_checkpoint
from apron.engine.facts import known_versions
from apron.errors import BadInput
from apron.hardware import Gpu, resolve_gpu
from apron.plan.calibration import Calibration
from apron.plan.candidates.formats import Found, read_kubernetes, read_recipe, read_skypilot, serve_argv
from apron.plan.candidates.serve_args import ServeArgs, parse_serve_args
from apron.plan.planner import plan_checkpoint
from apron.plan.result import Plan
from apron.plan.settings import UserSettings

__all__ = ["Candidate", "CandidatePlan", "candidate_settings", "plan_candidate", "read_candidate"]


@dataclass(frozen=True)
class Candidate:
    file: str
    sha256: str
    kind: str  # vllm-command | recipe | skypilot | kubernetes
    model: str
    revision: str | None
    gpu: str | None  # as the file names it
    gpu_count: int | None
    engine: str | None  # the vLLM release the file pins, as written
    args: ServeArgs
    notes: tuple[str, ...] = ()
    gpu_name: str | None = field(default=None)  # the catalog entry for `gpu`, where it has one

    def resolve_gpu(self, override: str | None) -> Gpu:
        """The GPU to plan on: --gpu wins; else the file's."""
        if override:
            return resolve_gpu(override)
        if self.gpu is None:
            raise BadInput(f"{self.file} names no GPU type ({self.kind}); give --gpu")
        try:
            return resolve_gpu(self.gpu_name or self.gpu)
        except BadInput:
            raise BadInput(f"{self.file}: GPU {self.gpu!r} is not in Apron's GPU catalog; give --gpu") from None

    def to_json(self, verdict: str | None = None) -> dict[str, Any]:
        agrees = None if verdict in (None, "unknown") else verdict == "fits"
        return {
            "file": self.file,
            "sha256": self.sha256,
            "format": self.kind,
            "model": self.model,
            "revision": self.revision,
            "gpu": self.gpu,
            "gpu_count": self.gpu_count,
            "engine": self.engine,
            "flags": {
                "planned": list(self.args.understood),
                "carried": list(self.args.carried),
                "no_memory_effect": list(self.args.no_memory_effect),
                "not_understood": list(self.args.not_understood),
            },
            "apron_agrees_it_fits": agrees,
            "notes": list(self.notes),
        }


def read_candidate(path: str) -> Candidate:
    raw = sys.stdin.buffer.read() if path == "-" else _read(path)
    name = "stdin" if path == "-" else path
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(
            f"--from {name}: not UTF-8 text; give a command line, a recipe, SkyPilot or Kubernetes YAML"
        ) from None
    found = _found(text, name)
    args = parse_serve_args(found.argv, name)
    args.not_understood[:0] = found.not_understood
    model = args.model or found.model
    if not model:
        raise BadInput(f"{name}: names no model")
    if model.startswith("$"):
        raise BadInput(f"{name}: the model is the unset variable {model}; set it in the file's env")
    notes = list(found.notes)
    if found.gpu_count and args.settings.get("tensor_parallel_size", 1) < found.gpu_count:
        notes.append(
            f"the file rents {found.gpu_count} GPUs and vLLM runs tensor parallel "
            f"{args.settings.get('tensor_parallel_size', 1)}: the plan is for the GPUs vLLM uses"
        )
    return Candidate(
        file=name,
        sha256=hashlib.sha256(raw).hexdigest(),
        kind=found.kind,
        model=model,
        revision=args.revision or found.revision,
        gpu=found.gpu,
        gpu_count=found.gpu_count,
        engine=found.engine,
        args=args,
        notes=tuple(notes),
        gpu_name=found.gpu_name,
    )


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"--from {path}: cannot read it ({exc.strerror})") from exc


def _found(text: str, name: str) -> Found:
    docs = _yaml_mappings(text, name)
    if docs and all("apiVersion" in d and "kind" in d for d in docs):
        return read_kubernetes(docs, name)
    if docs and len(docs) == 1 and isinstance(docs[0].get("run"), str):
        return read_skypilot(docs[0], name)
    if docs and len(docs) == 1 and ("model" in docs[0] or "command" in docs[0]):
        return read_recipe(docs[0], name)
    if "vllm" in text:
        argv, _ = serve_argv(text, name)
        return Found("vllm-command", argv)
    raise BadInput(
        f"{name}: neither a vllm serve command line, a recipe (model, args), a SkyPilot task (run, "
        "resources) nor Kubernetes manifests (apiVersion, kind)"
    )


def _yaml_mappings(text: str, name: str) -> list[dict[str, Any]] | None:
    """The YAML mappings in the file; None for anything else (a command line reads as a YAML string)."""
    try:
        import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs; types-PyYAML is not a dependency
    except ImportError:
        if "vllm serve" in text or "api_server" in text:
            return None
        raise BadInput(f"{name}: reading YAML needs PyYAML: pip install 'apron[candidates]'") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        if name.endswith((".yaml", ".yml")):
            raise BadInput(f"{name}: not valid YAML ({' '.join(str(exc).split())[:200]})") from exc
        return None
    return docs if docs and all(isinstance(d, dict) for d in docs) else None


def candidate_settings(candidate: Candidate, overrides: dict[str, Any] | None = None) -> UserSettings:
    """The settings the candidate runs with; explicit command-line settings win."""
    values = {**candidate.args.settings, **(overrides or {})}
    try:
        return UserSettings(**values, extra_flags=tuple(candidate.args.carried))
    except BadInput as exc:
        raise BadInput(f"{candidate.file}: {exc.message}") from None


@dataclass(frozen=True)
class CandidatePlan:
    plan: Plan
    candidate: Candidate
    engine_note: str | None
    checkpoint: Checkpoint
    gpu: Gpu
    user: UserSettings
    overrides: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The apron.plan/1 document with a `candidate` section: where it came from and whether Apron agrees."""
        section = self.candidate.to_json(self.plan.verdict)
        if self.engine_note:
            section["notes"].append(self.engine_note)
        if self.overrides:
            given = ", ".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
            section["notes"].append(f"set on the command line over the file: {given}")
        return {**self.plan.to_json(), "candidate": section}


def candidate_engine(candidate: Candidate, requested: str | None) -> tuple[str | None, str | None]:
    """--engine wins; else the release the file pins, where Apron has its facts."""
    if requested or not candidate.engine:
        return requested, None
    if candidate.engine in known_versions():
        return candidate.engine, None
    return None, (
        f"the file pins vLLM {candidate.engine}, for which Apron has no engine facts (`apron engine sync "
        f"vllm=={candidate.engine}` adds them): planned on the default release instead"
    )


def plan_candidate(
    candidate: Candidate,
    gpu: str | None = None,
    overrides: dict[str, Any] | None = None,
    engine_version: str | None = None,
    use_catalog: bool = True,
    calibration: Calibration | None = None,
) -> CandidatePlan:
    version, note = candidate_engine(candidate, engine_version)
    user = candidate_settings(candidate, overrides)
    target = candidate.resolve_gpu(gpu)
    checkpoint = load_checkpoint(candidate.model, candidate.revision, use_catalog=use_catalog)
    plan = plan_checkpoint(checkpoint, target, user, version, calibration)
    return CandidatePlan(plan, candidate, note, checkpoint, target, user, dict(overrides or {}))
