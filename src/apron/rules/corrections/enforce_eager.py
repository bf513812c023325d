"""CUDA-graph capture failed: boot with --enforce-eager (no graphs).

Capture failures (a CUDA error or an out-of-memory while capturing, "operation not permitted when
stream is capturing") come from the graphs, not the model: eager mode skips capture at some cost in
decode speed. The rule does not match a boot that already ran eager.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings, ran_with

FAMILIES = ("cudagraph_capture_failed", "cuda_oom", "cuda_illegal_memory_access", "cuda_error")
SUMMARY = "boot with --enforce-eager (no CUDA-graph capture)"
PRIORITY = 20


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    if fingerprint.family != "cudagraph_capture_failed" and fingerprint.phase != "graph_capture":
        return None
    if ran_with("enforce_eager", log_text, plan):
        return None
    return {"enforce_eager": True, "phase": fingerprint.phase}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, enforce_eager=True)
