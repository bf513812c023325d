"""Out of memory warming up the sampler (or pooler) over max_num_seqs rows: halve --max-num-seqs.

v1/worker/gpu_model_runner.py _dummy_sampler_run: "CUDA out of memory occurred when warming up
sampler with N dummy requests. Please try lowering `max_num_seqs` ...". N is max_num_seqs.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("sampler_warmup_oom", "pooler_warmup_oom")
SUMMARY = "halve --max-num-seqs for an out-of-memory warming up the sampler"


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    rows = fingerprint.fields.get("num_reqs")
    if not isinstance(rows, int) or rows < 2:
        return None
    return {"max_num_seqs": rows // 2, "previous_max_num_seqs": rows}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, max_num_seqs=fields["max_num_seqs"])
