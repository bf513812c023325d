"""A hybrid's max_num_seqs exceeds its state blocks: lower --max-num-seqs to the block count.

config/compilation.py resolve_cudagraph_mode_and_sizes refuses FULL graph capture when more
sequences may run than there are Mamba/state blocks (one per running sequence) and prints both.
"""

from __future__ import annotations

from apron.frozen import replace
from apron.rules.corrections._context import Fields, Fingerprint, Plan, UserSettings

FAMILIES = ("mamba_blocks_below_max_num_seqs",)
SUMMARY = "lower --max-num-seqs to the hybrid's state-block count"
PRIORITY = 10


def match(fingerprint: Fingerprint, log_text: str, plan: Plan | None) -> Fields | None:
    seqs, blocks = fingerprint.fields.get("max_num_seqs"), fingerprint.fields.get("num_blocks")
    if not isinstance(blocks, int) or blocks < 1:
        return None  # no block at all: fewer sequences cannot help
    if isinstance(seqs, int) and blocks >= seqs:
        return None
    return {"max_num_seqs": blocks, "previous_max_num_seqs": seqs}


def correction(settings: UserSettings, fields: Fields) -> UserSettings:
    return replace(settings, max_num_seqs=fields["max_num_seqs"])
