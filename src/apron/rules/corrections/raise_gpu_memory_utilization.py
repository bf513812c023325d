"""Too little memory left for the KV cache: raise --gpu-memory-utilization by the deficit.

Families: "No available memory for the cache blocks", "Cannot auto-fit max_model_len", the CPU
engine's negative KV share ("requested memory for kv (-0.1/0.44 GiB)"), and "KV cache too small"
when the engine found no length that fits (no estimate to lower max_model_len to).

The new fraction covers the deficit the engine printed (or logged as "Available KV cache memory"),
rounded up to the next hundredth; without a number it steps by 0.05. The fraction the boot ran with
comes from the log's non-default args, else the plan, else the release's default (engine facts). Above 0.98 the rule does not
match: the memory is not there, and raising the fraction would only move the failure.
"""

from __future__ import annotations

import re

from apron.frozen import replace
from apron.rules.corrections._context import (
    Fields,
    Fingerprint,
    Plan,
    UserSettings,
    ceil_hundredth,
    engine_default,
    ran_with,
    total_bytes_per_gpu,
)

FAMILIES = ("no_kv_cache_memory", "auto_fit_no_memory", "cpu_kv_allocation", "kv_cache_too_small")
SUMMARY = "raise --gpu-memory-utilization to cover the KV-cache deficit"
PRIORITY = 30
MAX_UTILIZATION = 0.98
STEP = 0.05
GIB = 2**30
_AVAILABLE_KV = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB")


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    fields = fingerprint.fields
    if fingerprint.family == "kv_cache_too_small" and fields.get("estimated_max_model_len"):
        return None  # a shorter max_model_len fits: kv_cache_max_model_len answers that
    current = _current(fields, log_text, plan) or engine_default("gpu_memory_utilization", fingerprint.engine_version)
    if current is None:
        return None
    wanted = _wanted(fingerprint, log_text, plan, current)
    if wanted is None or wanted > MAX_UTILIZATION:
        return None
    return {"gpu_memory_utilization": wanted, "previous_gpu_memory_utilization": current}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, gpu_memory_utilization=fields["gpu_memory_utilization"])


def _current(fields: Fields, log_text: str, plan: Plan | None) -> float | None:
    value = fields.get("gpu_memory_utilization") or ran_with("gpu_memory_utilization", log_text, plan)
    return float(value) if value else None


def _wanted(fingerprint: Fingerprint, log_text: str, plan: Plan | None, current: float) -> float | None:
    fields = fingerprint.fields
    if fingerprint.family == "cpu_kv_allocation":
        # The request (util x node total) minus the non-KV use left this KV share; cover it.
        kv, requested, total = fields.get("kv_gib"), fields.get("requested_gib"), fields.get("total_gib")
        if kv is None or requested is None or total is None or total <= 0 or kv >= 0:
            return None
        return max(ceil_hundredth((requested - kv) / total), ceil_hundredth(current + 0.01))
    deficit_bytes = _deficit_bytes(fingerprint, log_text)
    total = total_bytes_per_gpu(plan)
    if deficit_bytes is not None and total:
        return ceil_hundredth(current + deficit_bytes / total + 0.01)
    return round(current + STEP, 2)


def _deficit_bytes(fingerprint: Fingerprint, log_text: str) -> float | None:
    fields = fingerprint.fields
    if fingerprint.family == "kv_cache_too_small":
        needed, available = fields.get("needed_gib"), fields.get("available_gib")
        if needed is not None and available is not None:
            return max(float(needed) - float(available), 0.0) * GIB
    found = _AVAILABLE_KV.findall(log_text)
    if found and float(found[-1]) <= 0:
        return -float(found[-1]) * GIB
    return None
