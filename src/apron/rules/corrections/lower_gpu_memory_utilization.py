"""Less free memory at start-up than requested: lower --gpu-memory-utilization to what is free.

v1/worker/utils.py request_memory (GPU) and the CPU worker refuse to start when the memory free at
start-up is below utilization x total; they print free and total. The new fraction is the free share
rounded down to a hundredth, minus one hundredth for what moves while the engine starts. On a GPU
this usually means another process holds memory: a host fault, for the retry on another machine.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, floor_hundredth

FAMILIES = ("gpu_startup_free_memory", "cpu_startup_memory")
SUMMARY = "lower --gpu-memory-utilization to the share of memory that is free"
MIN_UTILIZATION = 0.05


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    free, total = fingerprint.fields.get("free_gib"), fingerprint.fields.get("total_gib")
    if not isinstance(free, (int, float)) or not isinstance(total, (int, float)) or total <= 0:
        return None
    wanted = round(floor_hundredth(free / total) - 0.01, 2)
    previous = fingerprint.fields.get("gpu_memory_utilization")
    if wanted < MIN_UTILIZATION or isinstance(previous, (int, float)) and wanted >= previous:
        return None
    return {"gpu_memory_utilization": wanted, "previous_gpu_memory_utilization": previous}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, gpu_memory_utilization=fields["gpu_memory_utilization"])
