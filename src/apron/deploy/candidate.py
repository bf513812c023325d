"""What a deployment file says, typed: the model, the release it pins, the GPU type and count, the
nodes, every flag and variable, and for each field where in the file it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from apron.deploy.env import EnvVar, classify, planned_settings
from apron.deploy.options import release_options
from apron.deploy.serve_args import Arg, ServeArgs, parse_serve_args
from apron.frozen import frozen, replace

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any


@frozen
class Sourced:
    """A value and where in the file it came from ("line 7", "resources.accelerators")."""

    value: Any
    where: str


@dataclass
class Found:
    """One deployment as a format reader finds it, before the flags are sorted."""

    argv: list[Arg]  # the `vllm serve` arguments (the model may be the first)
    where: str  # where the command is
    entry: str = "vllm serve"  # how the file starts vLLM
    name: str | None = None  # the file's name for this deployment (a service, a role, a model entry)
    model: Sourced | None = None  # a model the file names outside the arguments
    gpu: Sourced | None = None  # the GPU type as the file names it
    gpu_name: str | None = None  # Apron's catalog name for it, where the file's naming is another's
    gpu_count: Sourced | None = None
    engine: Sourced | None = None  # the vLLM release the file pins
    num_nodes: Sourced | None = None
    env: list[tuple[str, str, str, bool]] = field(default_factory=list)  # name, value, where, is_unresolved
    not_planned: list[str] = field(default_factory=list)  # file-level settings the plan does not cover
    notes: list[str] = field(default_factory=list)
    is_default: bool = True  # planned without --name (a recipe's non-default variants are not)


@frozen
class Candidate:
    file: str
    sha256: str
    format: str  # the reader's NAME
    format_title: str
    name: str | None
    names: tuple[str, ...]  # every deployment in the file, in order
    model: Sourced | None
    revision: Sourced | None
    engine: Sourced | None
    gpu: Sourced | None
    gpu_name: str | None
    gpu_count: Sourced | None
    num_nodes: Sourced | None
    entry: str
    where: str
    args: ServeArgs
    env: tuple[EnvVar, ...]
    file_not_planned: tuple[str, ...]
    notes: tuple[str, ...]
    is_default: bool
    found: Found = field(repr=False, compare=False)

    @classmethod
    def build(cls, found: Found, file: str, sha256: str, reader: Any, names: tuple[str, ...]) -> Candidate:
        pinned = found.engine.value if found.engine else None
        candidate = cls(
            file, sha256, reader.NAME, reader.TITLE, found.name, names, None, None, found.engine, found.gpu,
            found.gpu_name, found.gpu_count, found.num_nodes, found.entry, found.where,
            ServeArgs(None, None, ()), (), tuple(found.not_planned), tuple(found.notes), found.is_default, found,
        )  # fmt: skip
        return candidate.for_release(pinned)

    def for_release(self, version: str | None) -> Candidate:
        """The flags and variables sorted by that release's parser (the newest table for None)."""
        options = release_options(version)
        args = parse_serve_args(self.found.argv, options)
        model = self.found.model
        if args.model is not None:
            model = Sourced(args.model.text, args.model.where)
        revision = Sourced(args.revision.text, args.revision.where) if args.revision else None
        env = tuple(classify(n, v, w, options, u) for n, v, w, u in self.found.env)
        return replace(self, args=args, model=model, revision=revision, env=env)

    @property
    def release_read(self) -> str:
        return self.args.release

    @property
    def settings(self) -> dict[str, Any]:
        return {**self.args.settings, **planned_settings(self.env)}

    @property
    def model_is_unresolved(self) -> bool:
        """A `$MODEL` (or `$(...)`) the file leaves to its caller: a repo id never holds a `$`."""
        return self.model is not None and "$" in str(self.model.value)

    def not_planned(self) -> list[str]:
        """What a plan of this deployment does not account for: the agreement covers the rest."""
        items = list(self.file_not_planned)
        items += [f.text for f in self.args.flags if f.use in ("not_planned", "refused")]
        items += [v.shown for v in self.env if v.use == "not_planned"]
        return items

    def provenance(self) -> dict[str, str]:
        out = {}
        for key, sourced in (
            ("model", self.model),
            ("revision", self.revision),
            ("engine", self.engine),
            ("gpu", self.gpu),
            ("gpu_count", self.gpu_count),
            ("num_nodes", self.num_nodes),
        ):
            if sourced is not None:
                out[key] = sourced.where
        for flag in self.args.flags:
            if flag.use == "planned" and flag.dest:
                out[flag.dest] = flag.where
        out["command"] = self.where
        return out

    def to_json(self, verdict: str | None = None) -> dict[str, Any]:
        agrees = None if verdict in (None, "unknown") else verdict == "fits"
        missing = self.not_planned()
        return {
            "file": self.file,
            "sha256": self.sha256,
            "format": self.format,
            "format_title": self.format_title,
            "name": self.name,
            "deployments": list(self.names),
            "entry": self.entry,
            "model": None if self.model is None else self.model.value,
            "revision": None if self.revision is None else self.revision.value,
            "gpu": None if self.gpu is None else self.gpu.value,
            "gpu_count": None if self.gpu_count is None else self.gpu_count.value,
            "num_nodes": 1 if self.num_nodes is None else self.num_nodes.value,
            "engine": None if self.engine is None else self.engine.value,
            "parser_release": self.release_read,
            "flags": {
                "planned": self.args.of("planned"),
                "carried": self.args.of("carried"),
                "no_memory_effect": self.args.of("no_memory_effect"),
                "not_understood": self.args.of("not_planned"),
                "refused": self.args.of("refused"),
            },
            "flag_details": [f.to_json() for f in self.args.flags],
            "env": [v.to_json() for v in self.env],
            "provenance": self.provenance(),
            "apron_agrees_it_fits": agrees,
            "agreement_covers_everything": not missing,
            "not_planned": missing,
            "notes": list(self.notes),
        }
