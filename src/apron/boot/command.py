"""The exact `vllm serve` command a boot runs: the plan's command, pointed at the weights on the target,
plus host/port/served-model-name, the engine profile and the user's extra arguments - in that
order, so a later flag wins where vLLM takes the last occurrence. The record keeps argv and env."""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from apron.errors import BadInput
from apron.frozen import field, frozen
from apron.units import shorten

LOG_LEVELS = ("INFO", "DEBUG")
# Engine profiles: flags and environment added to the plan's command for a kind of machine.
# "cpu": the vLLM CPU build on a small machine (tests, demos): a small explicit KV cache instead of
# 0.92 x RAM (unless the plan sizes it), one process (no executor or engine-core subprocesses), as in
# tests/engine_env.py. A plan for the CPU platform (--gpu cpu) boots with it unless --profile says otherwise.
PROFILES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "gpu": ((), {}),
    "cpu": (
        ("--kv-cache-memory-bytes", str(64 * 2**20), "--distributed-executor-backend", "uni"),
        {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
    ),
}
# Always set: no telemetry, weights are already on disk (downloaded by Apron, timed separately).
BASE_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@frozen
class ServeCommand:
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    profile: str = "gpu"
    extra_args: tuple[str, ...] = ()

    def shell(self) -> str:
        """One line a person can paste: env assignments, then the command."""
        assignments = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join(assignments + [shlex.quote(a) for a in self.argv])

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "env": dict(sorted(self.env.items())),
            "shell": self.shell(),
            "profile": self.profile,
            "extra_args": list(self.extra_args),
        }


def parse_extra_args(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise BadInput(f"--extra-args: {exc}") from None


def build_command(
    plan_command: str,
    *,
    vllm: str,
    model_path: str,
    port: int,
    served_model_name: str,
    profile: str = "gpu",
    extra_args: tuple[str, ...] = (),
    log_level: str = "INFO",
    run_dir: str = ".",
    tmp_dir: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> ServeCommand:
    if profile not in PROFILES:
        raise BadInput(f"--profile '{profile}' is not one of {', '.join(PROFILES)}")
    if log_level.upper() not in LOG_LEVELS:
        raise BadInput(f"--log-level '{log_level}' must be INFO or DEBUG (the accounting lines are INFO)")
    words = shlex.split(plan_command)
    plan_env = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):  # VAR=value before `vllm serve`
        name, _, value = words.pop(0).partition("=")
        plan_env[name] = value
    if words[:2] != ["vllm", "serve"] or len(words) < 3:
        raise BadInput(f"the plan's command does not start with 'vllm serve MODEL': {shorten(plan_command, 80)}")
    flags = _drop_revision(words[3:])  # the weights are a local folder now; the revision was fetched
    profile_flags, profile_env = PROFILES[profile]
    if "--kv-cache-memory-bytes" in flags:  # the plan sizes the KV cache itself: the profile's default gives way
        at = profile_flags.index("--kv-cache-memory-bytes") if "--kv-cache-memory-bytes" in profile_flags else -1
        profile_flags = profile_flags[:at] + profile_flags[at + 2 :] if at >= 0 else profile_flags
    argv = (
        vllm,
        "serve",
        model_path,
        *flags,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        served_model_name,
        *profile_flags,
        *extra_args,
    )
    env = {
        **BASE_ENV,
        "VLLM_LOGGING_LEVEL": log_level.upper(),
        "TMPDIR": tmp_dir or f"{run_dir}/tmp",
        # A fresh cache per run: every boot measures a cold start. APRON_VLLM_CACHE_ROOT shares one
        # between boots (faster: vLLM inspects the model once; compiled graphs are reused).
        "VLLM_CACHE_ROOT": os.environ.get("APRON_VLLM_CACHE_ROOT") or f"{run_dir}/cache",
        **profile_env,
        **plan_env,  # the plan's command sets them (a rule's NCCL_NVLS_ENABLE=0, a --from file's variables)
        **(extra_env or {}),
    }
    return ServeCommand(tuple(argv), env, profile, tuple(extra_args))


def _drop_revision(flags: list[str]) -> list[str]:
    out, skip = [], False
    for word in flags:
        if skip:
            skip = False
            continue
        if word == "--revision":
            skip = True
            continue
        if word.startswith("--revision="):
            continue
        out.append(word)
    return out
