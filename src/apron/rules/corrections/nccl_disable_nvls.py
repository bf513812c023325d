"""NCCL failed: retry with NVLink SHARP off (NCCL_NVLS_ENABLE=0), on the host-fault retry.

NCCL start-up failures are the host's (a fabric manager or multicast support missing on one machine),
so the boot retries on another machine; NVLS is the NCCL feature that most often fails there, and
turning it off costs little at the tensor-parallel sizes Apron boots. The rule only sets the
environment for that retry; it never blames the model.
"""

from __future__ import annotations

from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, with_env

FAMILIES = ("nccl_error",)
SUMMARY = "retry with NCCL_NVLS_ENABLE=0 (NVLink SHARP off)"
NAME, VALUE = "NCCL_NVLS_ENABLE", "0"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    env = dict(plan.settings.env) if plan is not None else {}
    if env.get(NAME) == VALUE:
        return None
    return {"env": {NAME: VALUE}, "nccl_error": fingerprint.fields.get("nccl_error")}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    for name, value in fields["env"].items():
        settings = with_env(settings, name, value)
    return settings
