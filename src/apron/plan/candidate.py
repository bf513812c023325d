"""Plan a deployment someone else wrote (`--from FILE`, read by apron.deploy) and say how far Apron's
answer covers it.

The settings are the file's, with the ones typed on Apron's command line winning. The plan's command
is the file's own: every flag it gives, in its order (a value typed here replaces the file's in
place), then the flags Apron adds (parsers, a hybrid's --max-num-seqs), each marked. A flag the
release's parser does not have is a proven refusal (`vllm serve` stops: unrecognized arguments).
"Apron agrees it fits" covers what was planned; what was not (pipeline parallelism, --hf-overrides,
an unresolved $TP, several nodes, ...) is listed beside it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from apron.checkpoint import Checkpoint, load_checkpoint
from apron.deploy import Candidate
from apron.deploy.env import EnvVar, cpu_kv_cache_bytes
from apron.deploy.options import release_options
from apron.deploy.serve_args import PLANNED, REACH, Flag
from apron.engine.facts import known_versions
from apron.errors import BadInput
from apron.frozen import field, frozen, replace
from apron.hardware import Gpu, resolve_gpu
from apron.plan.calibration import Calibration
from apron.plan.planner import plan_checkpoint
from apron.plan.quantity import Problem
from apron.plan.result import Plan
from apron.plan.settings import UserSettings, user_flags

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CandidatePlan", "candidate_engine", "candidate_gpu", "candidate_settings", "plan_candidate"]


@frozen
class GpuRequest:
    """--gpu, --gpu-memory-bytes and --gpu-capability as typed (each may be None)."""

    name: str | None = None
    memory_bytes: int | None = None
    capability: str | None = None


def candidate_gpu(candidate: Candidate, request: GpuRequest | None = None) -> Gpu:
    """The GPU to plan on: --gpu wins; else the file's, with --gpu-memory-bytes/--gpu-capability for
    one Apron's catalog does not hold."""
    request = request or GpuRequest()
    if request.name:
        return resolve_gpu(request.name, memory_bytes=request.memory_bytes, capability=request.capability)
    if candidate.gpu is None:
        raise BadInput(f"{candidate.file} names no GPU type ({candidate.format_title}); give --gpu")
    try:
        name = candidate.gpu_name or str(candidate.gpu.value)
        return resolve_gpu(name, memory_bytes=request.memory_bytes, capability=request.capability)
    except BadInput:
        missing = [flag for flag, value in (("--gpu-memory-bytes", request.memory_bytes),
                                            ("--gpu-capability", request.capability)) if value is None]  # fmt: skip
        raise BadInput(
            f"{candidate.file}: GPU {candidate.gpu.value!r} ({candidate.gpu.where}) is not in Apron's GPU catalog; "
            f"give --gpu, or {' and '.join(missing)} for it"
        ) from None


def candidate_settings(
    candidate: Candidate, overrides: dict[str, Any] | None = None, gpu: Gpu | None = None
) -> UserSettings:
    """The settings the deployment runs with; explicit command-line settings win."""
    values = {**candidate.settings, **_cpu_env(candidate, gpu), **(overrides or {})}
    carried = tuple(f.shell for f in candidate.args.flags if f.use == "carried")
    try:
        return UserSettings(**values, extra_flags=carried)
    except BadInput as exc:
        raise BadInput(f"{candidate.file}: {exc.message}") from None


def _cpu_env(candidate: Candidate, gpu: Gpu | None) -> dict[str, Any]:
    """VLLM_CPU_KVCACHE_SPACE sizes the KV cache on vLLM's CPU platform, over --kv-cache-memory-bytes
    (platforms/cpu.py check_and_update_config, 0.29-0.33)."""
    size = cpu_kv_cache_bytes(candidate.env) if gpu is not None and gpu.is_cpu else None
    return {} if size is None else {"kv_cache_memory_bytes": size}


def candidate_engine(candidate: Candidate, requested: str | None) -> tuple[str | None, str | None]:
    """--engine wins; else the release the file pins, where Apron has its facts."""
    if requested or not candidate.engine:
        return requested, None
    pinned = str(candidate.engine.value)
    if pinned in known_versions():
        return pinned, None
    return None, (
        f"the file pins vLLM {pinned} ({candidate.engine.where}), for which Apron has no engine facts "
        f"(`apron engine sync vllm=={pinned}` adds them): planned on the default release instead"
    )


@frozen
class CommandFlag:
    text: str  # shell words
    origin: str  # file | set_here | changed_by_apron | added_by_apron
    use: str  # as the deployment's flag is sorted (planned, not_planned, refused, ...), or "planned" for Apron's
    where: str | None = None
    was: str | None = None  # the file's flag this one replaces

    def to_json(self) -> dict[str, Any]:
        return {"flag": self.text, "origin": self.origin, "use": self.use, "where": self.where, "was": self.was}


@frozen
class CandidatePlan:
    plan: Plan
    candidate: Candidate
    engine_note: str | None
    checkpoint: Checkpoint
    gpu: Gpu
    user: UserSettings
    overrides: dict[str, Any] = field(default_factory=dict)
    command_flags: tuple[CommandFlag, ...] = ()
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The apron.plan/1 document with a `candidate` section: where it came from and whether Apron agrees."""
        section = self.candidate.to_json(self.plan.verdict)
        section["notes"] += [n for n in (self.engine_note, *self.notes) if n]
        if self.overrides:
            given = ", ".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
            section["notes"].append(f"set on the command line over the file: {given}")
        section["command"] = {
            "flags": [f.to_json() for f in self.command_flags],
            "added_by_apron": [f.text for f in self.command_flags if f.origin == "added_by_apron"],
            "changed_by_apron": [f"{f.was} -> {f.text}" for f in self.command_flags if f.origin == "changed_by_apron"],
            "not_planned": [f.text for f in self.command_flags if f.use in ("not_planned", "refused")],
        }
        return {**self.plan.to_json(), "candidate": section}

    def boot_plan(self) -> Plan:
        """The plan a boot runs: the file's flags, less how the server is reached (a boot sets its own
        host, port and served name, boot/command.py) and the environment prefix (passed apart)."""
        flags = [f.text for f in self.command_flags if _dest(f.text, self.plan.engine_version) not in REACH]
        model = shlex.quote(self.checkpoint.repo_id or self.checkpoint.source)
        revision = (
            ["--revision", self.checkpoint.revision] if self.checkpoint.repo_id and self.checkpoint.revision else []
        )
        words = ["vllm", "serve", model, *revision]
        kept = [f for f in flags if _dest(f, self.plan.engine_version) != "revision"]
        return replace(self.plan, command=" ".join(words + kept))

    @property
    def engine_env(self) -> dict[str, str]:
        """The file's variables for the engine process (what the printed command puts before it)."""
        return {v.name: v.value for v in self.candidate.env if _for_engine(v)}


def plan_candidate(
    candidate: Candidate,
    gpu: GpuRequest | str | None = None,
    overrides: dict[str, Any] | None = None,
    engine_version: str | None = None,
    use_catalog: bool = True,
    calibration: Calibration | None = None,
    source: str | None = None,
) -> CandidatePlan:
    """SOURCE may name the model when the file names none (a `--config` file) or leaves it to a
    variable set elsewhere; a SOURCE that differs from the file's model is a conflict."""
    request = gpu if isinstance(gpu, GpuRequest) else GpuRequest(gpu)
    model, notes = _model(candidate, source)
    candidate_settings(candidate, overrides)  # the file's own settings are checked before anything else
    version, engine_note = candidate_engine(candidate, engine_version)
    target = candidate_gpu(candidate, request)
    checkpoint = load_checkpoint(
        model, candidate.revision.value if candidate.revision else None, use_catalog=use_catalog
    )
    if version is not None and version != candidate.release_read:
        candidate = candidate.for_release(version)
    user = candidate_settings(candidate, overrides, target)
    plan = plan_checkpoint(checkpoint, target, user, version, calibration)
    if plan.engine_version != candidate.release_read:
        candidate = candidate.for_release(plan.engine_version)
        again = candidate_settings(candidate, overrides, target)
        if again != user:
            user, plan = again, plan_checkpoint(checkpoint, target, again, plan.engine_version, calibration)
    candidate = replace(candidate, env=_env_on(candidate.env, target))
    if version is not None and engine_version is None and candidate.engine is not None:
        plan = replace(plan, notes=tuple(_pinned_by_file(n, candidate) for n in plan.notes))
    notes += _shape_notes(candidate, user)
    if candidate.release_read != plan.engine_version:
        notes.append(
            f"flags read with vllm serve {candidate.release_read}'s options (Apron has no option table for "
            f"{plan.engine_version}): one it does not know is listed, not counted as a refusal"
        )
    plan = _with_refusals(plan, candidate)
    flags = command_flags(candidate, plan, user, dict(overrides or {}))
    env = {v.name: v.value for v in candidate.env if _for_engine(v)}
    plan = replace(plan, command=_command(checkpoint, flags, env))
    return CandidatePlan(
        plan, candidate, engine_note, checkpoint, target, user, dict(overrides or {}), flags, tuple(notes)
    )


def _model(candidate: Candidate, source: str | None) -> tuple[str, list[str]]:
    written = None if candidate.model is None else str(candidate.model.value)
    where = candidate.model.where if candidate.model else ""
    if written and not candidate.model_is_unresolved:
        if source and source != written and _is_path(written):
            return source, [f"the model is SOURCE {source}: the file names the path {written} ({where}) on its machine"]
        if source and source != written:
            raise BadInput(f"SOURCE {source} differs from the model {written} in {candidate.file} ({where}); give one")
        if _is_path(written) and not Path(written).expanduser().exists():
            raise BadInput(
                f"{candidate.file}: the model is the path {written} ({where}) on the machine the file runs on; "
                "give the model as SOURCE (a Hub id, or a local copy)"
            )
        return written, []
    if source:
        note = f"the model is SOURCE {source}" + (
            f" (the file leaves it to {written}, set outside it)" if written else " (the file names none)"
        )
        return source, [note]
    if written:
        raise BadInput(
            f"{candidate.file}: the model is {written} ({candidate.model.where if candidate.model else ''}), "
            "set outside the file; give it as SOURCE"
        )
    raise BadInput(f"{candidate.file} names no model ({candidate.format_title}); give it as SOURCE")


def _is_path(model: str) -> bool:
    """/models/llama, ./weights, ~/ckpt: a folder on some machine, not a Hub id (ORG/NAME)."""
    return model.startswith(("/", "./", "../", "~")) or model.count("/") > 1


def _pinned_by_file(note: str, candidate: Candidate) -> str:
    """The planner says a release came from --engine; here the file pinned it."""
    if not note.startswith("engine pinned with --engine") or candidate.engine is None:
        return note
    return f"engine pinned by the file: vllm=={candidate.engine.value} ({candidate.engine.where})"


def _env_on(env: tuple[EnvVar, ...], gpu: Gpu) -> tuple[EnvVar, ...]:
    """VLLM_CPU_KVCACHE_SPACE is read by vLLM's CPU platform only."""
    if gpu.is_cpu:
        return env
    return tuple(
        replace(v, use="no_memory_effect", why="read by vLLM's CPU platform only")
        if v.name == "VLLM_CPU_KVCACHE_SPACE"
        else v
        for v in env
    )


def _shape_notes(candidate: Candidate, user: UserSettings) -> list[str]:
    notes: list[str] = []
    if candidate.gpu_count is None:
        return notes
    count, where = candidate.gpu_count.value, candidate.gpu_count.where
    tp = user.tensor_parallel_size
    if count == "all":
        notes.append(f"the file gives the container every GPU of the host ({where}): vLLM uses {tp}")
    elif isinstance(count, int) and tp < count:
        notes.append(
            f"the file rents {count} GPUs and vLLM runs tensor parallel {tp}: the plan is for the GPUs vLLM uses"
        )
    elif isinstance(count, int) and tp > count:
        notes.append(
            f"tensor parallel {tp} needs {tp} GPUs and the file gives {count}: vLLM would not start on one node"
        )
    return notes


def _with_refusals(plan: Plan, candidate: Candidate) -> Plan:
    """Flags the release's own parser refuses: a proven constraint (the boot stops before loading)."""
    refused = [f for f in candidate.args.flags if f.use == "refused"]
    if not refused or candidate.release_read != plan.engine_version:
        return plan
    problems = tuple(Problem("unrecognized_argument", f"{f.text}: {f.why}", "proven_constraint") for f in refused)
    verdict = plan.verdict if plan.verdict == "unsupported" else "does_not_fit"
    return replace(plan, problems=plan.problems + problems, verdict=verdict)


def command_flags(
    candidate: Candidate, plan: Plan, user: UserSettings, overrides: dict[str, Any]
) -> tuple[CommandFlag, ...]:
    """The file's flags in its order (the model aside), a value typed here or changed by the plan in
    place of the file's, then the flags the plan adds."""
    version = plan.engine_version
    mine = _by_dest(plan.flags, version)  # what the plan runs with
    asked = _by_dest(user_flags(user), version)  # what the settings alone print as
    out: list[CommandFlag] = []
    seen: set[str] = set()
    for flag in candidate.args.flags:
        if flag.dest == "model":
            continue
        seen.add(flag.dest or "")
        name = _field(flag.dest or "")
        if flag.use == "planned" and name in overrides and candidate.args.settings.get(name) != overrides[name]:
            text = mine.get(flag.dest or "") or _spelled(flag, overrides[name])
            out.append(CommandFlag(text, "set_here", "planned", flag.where, flag.shell))
        elif flag.use == "planned" and flag.dest in mine and mine[flag.dest] != asked.get(flag.dest):
            out.append(CommandFlag(mine[flag.dest], "changed_by_apron", "planned", flag.where, flag.shell))
        else:
            out.append(CommandFlag(flag.shell, "file", flag.use, flag.where))
    for dest, text in mine.items():
        if dest not in seen:
            origin = "set_here" if _field(dest) in overrides else "added_by_apron"
            out.append(CommandFlag(text, origin, "planned"))
    return tuple(out)


def _by_dest(flags: Any, version: str) -> dict[str, str]:
    out = {}
    for text in flags:
        dest = _dest(text, version)
        if dest:
            out[dest] = text
    return out


def _spelled(flag: Flag, value: Any) -> str:
    """A setting typed here that the plan's flags leave at the engine default (--tp 1, no eager)."""
    option = flag.option or flag.words[0]
    if isinstance(value, bool):
        return option if value else "--no-" + option.removeprefix("--")
    return f"{option} {shlex.quote(str(value))}"


def _field(dest: str) -> str | None:
    return PLANNED[dest][0] if dest in PLANNED else None


def file_command(candidate: Candidate, checkpoint: Checkpoint, plan: Plan, user: UserSettings) -> str:
    """The file's command for another plan of it (a row of `apron fit --from`): the settings that
    plan changed in place of the file's, its additions after."""
    overrides = {}
    for name, _ in PLANNED.values():
        value = getattr(user, name)
        if value != candidate.settings.get(name, getattr(UserSettings(), name)):
            overrides[name] = value
    flags = command_flags(candidate, plan, user, overrides)
    return _command(checkpoint, flags, {v.name: v.value for v in candidate.env if _for_engine(v)})


def _dest(flag: str, version: str) -> str | None:
    words = shlex.split(flag) if flag else []
    if not words:
        return None
    option = release_options(version).find(words[0].partition("=")[0])
    return None if option is None else option.dest


def _for_engine(var: EnvVar) -> bool:
    """The variables the printed command sets before `vllm serve`: the engine's own, never a secret."""
    engine = var.name.startswith(("VLLM_", "PYTORCH_", "NCCL_", "CUDA_", "TORCH_", "OMP_"))
    return engine and not var.is_secret and not var.value.startswith("$")


def _command(checkpoint: Checkpoint, flags: tuple[CommandFlag, ...], env: dict[str, str]) -> str:
    model = checkpoint.repo_id or checkpoint.source
    parts = [f"{name}={shlex.quote(value)}" for name, value in env.items()]
    parts += ["vllm", "serve", shlex.quote(model)]
    return " ".join(parts + [f.text for f in flags])


SET_SCHEMA = "apron.plan-set/1"


def plan_deployments(
    path: str,
    name: str | None = None,
    source: str | None = None,
    gpu: GpuRequest | None = None,
    overrides: dict[str, Any] | None = None,
    engine_version: str | None = None,
    use_catalog: bool = True,
    calibration: Calibration | None = None,
) -> tuple[CandidatePlan, ...]:
    """Plan each deployment in the file, or the one `name` picks."""
    from apron.deploy import pick, read_deployments

    chosen = pick(read_deployments(path), name)
    return tuple(plan_candidate(c, gpu, overrides, engine_version, use_catalog, calibration, source) for c in chosen)


def deployments_json(plans: tuple[CandidatePlan, ...]) -> dict[str, Any]:
    """One deployment: its apron.plan/1 document. Several: an apron.plan-set/1 document holding one
    apron.plan/1 document per deployment, in file order."""
    if len(plans) == 1:
        return plans[0].to_json()
    first = plans[0].candidate
    return {
        "schema": SET_SCHEMA,
        "file": first.file,
        "sha256": first.sha256,
        "format": first.format,
        "deployments": list(first.names),
        "verdicts": {p.candidate.name: p.plan.verdict for p in plans},
        "plans": [p.to_json() for p in plans],
    }


def one_deployment(plans: tuple[CandidatePlan, ...], what: str) -> CandidatePlan:
    if len(plans) == 1:
        return plans[0]
    names = ", ".join(repr(p.candidate.name) for p in plans)
    raise BadInput(f"{plans[0].candidate.file} holds {len(plans)} deployments ({names}): {what} one, named with --name")
