"""One failed log, diagnosed: fingerprint, the rules that apply with the corrected settings, each
rule's status on this release, and whether the plan could have known."""

from __future__ import annotations

import gzip
import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

from apron.errors import BadInput
from apron.frozen import field, frozen
from apron.measure.logparse import ParsedLog, parse_log
from apron.plan.result import Plan
from apron.plan.settings import UserSettings, user_flags
from apron.rules.fingerprint import Fingerprint
from apron.rules.fingerprint import fingerprint as make_fingerprint
from apron.rules.formats import FORMATS
from apron.rules.known import KnownReport, could_have_known
from apron.rules.registry import RuleError, RuleFailed, RuleMatch, run_rules
from apron.rules.status import RuleStatus, StatusStore

# vLLM argument names (its `non-default args` line) -> UserSettings fields
_ARG_FIELDS = (
    "tensor_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_dtype",
    "dtype",
    "enforce_eager",
    "language_model_only",
    "kv_cache_memory_bytes",
    "mm_encoder_tp_mode",
)
# Arguments that are not settings of the deployment: the model (shown on its own), and the address
# the runner served it on.
_NOT_SETTINGS = {"model", "model_tag", "host", "port"}
_FLAG_FIELDS = {
    "--tensor-parallel-size": ("tensor_parallel_size", int),
    "--max-model-len": ("max_model_len", int),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float),
    "--max-num-seqs": ("max_num_seqs", int),
    "--max-num-batched-tokens": ("max_num_batched_tokens", int),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--dtype": ("dtype", str),
    "--kv-cache-memory-bytes": ("kv_cache_memory_bytes", int),
}


@frozen
class Candidate:
    """A rule that matched, what it makes of the settings, and what is known of it on this release."""

    match: RuleMatch
    status: RuleStatus | None
    corrected: UserSettings | None = None
    error: str | None = None  # the correction raised or changed nothing

    def changes(self, before: UserSettings) -> list[str]:
        if self.corrected is None:
            return []
        old, new = _by_option(settings_flags(before)), _by_option(settings_flags(self.corrected))
        changed = [
            flag if key not in old else f"{flag} (was {_value_of(old[key])})"
            for key, flag in new.items()
            if old.get(key) != flag
        ]
        return changed + [f"without {flag}" for key, flag in old.items() if key not in new]

    def to_json(self, before: UserSettings) -> dict[str, Any]:
        return {
            **self.match.to_json(),
            "status": self.status.to_json() if self.status else None,
            "evidence": self.status.evidence() if self.status else None,
            "corrected_flags": settings_flags(self.corrected) if self.corrected else None,
            "changes": self.changes(before),
            "error": self.error,
        }


@frozen
class Diagnosis:
    fingerprint: Fingerprint | None
    log_id: str  # sha256 of the log text: the motivating id when no boot record exists
    engine_version: str | None
    settings: UserSettings  # what the failed boot ran (from the plan, else the log's non-default args)
    settings_source: str
    candidates: tuple[Candidate, ...] = ()
    known: KnownReport | None = None
    rule_errors: tuple[RuleError, ...] = field(default=())

    @property
    def applicable(self) -> tuple[Candidate, ...]:
        """Candidates whose correction produced new settings, in the order to try them."""
        return tuple(c for c in self.candidates if c.corrected is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "apron.diagnosis/1",
            "log_id": self.log_id,
            "engine_version": self.engine_version,
            "fingerprint": self.fingerprint.to_json() if self.fingerprint else None,
            "settings": {"source": self.settings_source, "flags": settings_flags(self.settings)},
            "rules": [c.to_json(self.settings) for c in self.candidates],
            "could_have_known": self.known.to_json() if self.known else None,
            "rule_errors": [{"rule": e.rule_id, "error": e.error} for e in self.rule_errors],
        }


def read_log(path: str) -> str:
    """The text of a failed boot's log file (gzip too)."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"log file {path} does not exist") from None
    except OSError as exc:
        raise BadInput(f"log file {path}: unreadable ({exc.strerror})") from None
    if path.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise BadInput(f"log file {path}: not gzip ({exc})") from None
    return raw.decode("utf-8", "replace")


def diagnose(
    log_text: str,
    *,
    plan: Plan | None = None,
    user_settings: UserSettings | None = None,
    engine_version: str | None = None,
    store: StatusStore | None = None,
) -> Diagnosis:
    parsed = parse_log(log_text, FORMATS)
    version = engine_version or (plan.engine_version if plan else None) or parsed.engine_version
    settings, source = _settings(user_settings, plan, parsed)
    log_id = "sha256:" + hashlib.sha256(log_text.encode("utf-8", "replace")).hexdigest()
    found = make_fingerprint(parsed, engine_version=version)
    if found is None:
        return Diagnosis(None, log_id, version, settings, source)
    matches, errors = run_rules(found, log_text, plan)
    store = store or StatusStore()
    candidates = tuple(_candidate(m, settings, store, version) for m in matches)
    known = could_have_known(plan, found, parsed.non_default_settings, parsed.engine_version)
    return Diagnosis(found, log_id, version, settings, source, candidates, known, tuple(errors))


def _candidate(match: RuleMatch, settings: UserSettings, store: StatusStore, version: str | None) -> Candidate:
    status = store.status(match.rule_id, version) if version else None
    try:
        return Candidate(match, status, match.correction(settings))
    except RuleFailed as exc:
        return Candidate(match, status, None, exc.message)


def _settings(given: UserSettings | None, plan: Plan | None, parsed: ParsedLog) -> tuple[UserSettings, str]:
    if given is not None:
        return given, "given"
    if plan is not None:
        return settings_from_plan(plan), "plan"
    if parsed.settings is not None:
        return settings_from_args(parsed.settings), f"log ({parsed.settings_from})"
    return UserSettings(), "engine defaults (the log names no settings)"


def settings_from_args(args: dict[str, Any]) -> UserSettings:
    """The UserSettings of vLLM's `non-default args` line, every setting it prints: the ones Apron
    models in their fields, the rest (and values a field cannot hold, such as an "auto" length) as
    the `vllm serve` arguments they were, so a corrected command keeps them."""
    values: dict[str, Any] = {}
    extra: list[str] = []
    for name, value in args.items():
        if name in _NOT_SETTINGS or value is None:
            continue
        held = _field_value(name, value)
        if held is not None:
            values[name] = held
        else:
            extra.append(serve_argument(name, value))
    return UserSettings(**values, extra_flags=tuple(extra))


def _field_value(name: str, value: Any) -> Any:
    if name == "limit_mm_per_prompt" and isinstance(value, dict):
        value = tuple(sorted((str(k), v) for k, v in value.items() if isinstance(v, int)))
    elif name not in _ARG_FIELDS:
        return None
    try:
        UserSettings(**{name: value})
    except (BadInput, TypeError, ValueError):
        return None
    return value


def serve_argument(name: str, value: Any) -> str:
    """A `non-default args` entry as the `vllm serve` argument that sets it: True as the bare flag, False
    as its --no- form (vLLM's BooleanOptionalAction), lists as repeated values, dicts as JSON."""
    flag = "--" + name.replace("_", "-")
    if value is True:
        return flag
    if value is False:
        return "--no-" + flag[2:]
    if isinstance(value, list | tuple):
        return " ".join([flag, *(shlex.quote(str(v)) for v in value)])
    if isinstance(value, dict):
        return f"{flag} {shlex.quote(json.dumps(value))}"
    return f"{flag} {shlex.quote(str(value))}"


def settings_from_plan(plan: Plan) -> UserSettings:
    """The UserSettings a plan was made from: its flags beyond defaults, its extra flags and env.
    Flags the plan derives itself (parsers, a hybrid's --max-num-seqs) come back when it is re-made."""
    values: dict[str, Any] = {}
    for flag in plan.flags:
        words = flag.split()
        if words[0] in _FLAG_FIELDS and len(words) == 2:
            name, kind = _FLAG_FIELDS[words[0]]
            values[name] = kind(words[1])
    if "--enforce-eager" in plan.flags:
        values["enforce_eager"] = True
    if "--language-model-only" in plan.flags:
        values["language_model_only"] = True
    values["tensor_parallel_size"] = plan.settings.tensor_parallel_size
    if plan.has_problem("max_num_seqs_exceeds_state_blocks"):
        values.pop("max_num_seqs", None)
    return UserSettings(**values, extra_flags=plan.settings.extra_flags, env=tuple(sorted(plan.settings.env)))


def _by_option(flags: list[str]) -> dict[str, str]:
    """`--max-model-len 512` under `--max-model-len`, `NCCL_NVLS_ENABLE=0` under `NCCL_NVLS_ENABLE`."""
    return {flag.split()[0].split("=")[0]: flag for flag in flags}


def _value_of(flag: str) -> str:
    words = flag.replace("=", " ").split()
    return " ".join(words[1:]) or "set"


def settings_flags(settings: UserSettings) -> list[str]:
    """`vllm serve` flags and environment assignments for these settings."""
    return [f"{k}={v}" for k, v in settings.env] + user_flags(settings)
