"""Predicted weights vs the weights vLLM measured in real boots (tests/fixtures/boots-training.json)."""
from __future__ import annotations

import json

import pytest

from apron.checkpoint import load_checkpoint
from apron.hardware import resolve_gpu
from apron.plan.model_config import ModelConfig
from apron.plan.weights import WeightSettings, estimate_weights
from conftest import FIXTURES, snapshot_path

BOOTS = [b for b in json.loads((FIXTURES / "boots-training.json").read_text())["boots"]
         if b["boot_outcome"] == "healthy"]
# The fixture's dtype_note says one mamba-2.8b boot ran float32 (weights stored float32); its serve
# flags do not record it, so the boot is identified by its record here.
FLOAT32_BOOTS = {("state-spaces/mamba-2.8b-hf", 11070278205)}


def runtime_dtype(boot: dict, config: ModelConfig) -> str:
    if (boot["model_id"], boot["measured"]["weights_bytes_per_gpu"]) in FLOAT32_BOOTS:
        return "float32"
    if config.config_dtype == "float16":
        return "float16"  # --dtype auto keeps an fp16 checkpoint in fp16 (AWQ/GPTQ exports)
    return boot["serve_flags"].get("dtype") or "bfloat16"


def predicted(boot: dict) -> int:
    checkpoint = load_checkpoint(str(snapshot_path(boot["model_id"])))
    config = ModelConfig.from_config(checkpoint.config)
    gpu = resolve_gpu(boot["gpu"])
    settings = WeightSettings(boot["serve_flags"].get("tensor_parallel_size") or 1,
                              runtime_dtype(boot, config), gpu.compute_capability)
    return estimate_weights(checkpoint, config, settings).bytes_per_gpu


def test_weights_within_one_percent_of_measured(capsys):
    rows, failures = [], []
    for boot in BOOTS:
        measured = boot["measured"]["weights_bytes_per_gpu"]
        error = predicted(boot) / measured - 1
        rows.append(f"{boot['model_id']:<44} {boot['gpu']:<24} {measured / 2**30:7.2f} GiB {error:+7.2%}")
        if abs(error) > 0.01:
            failures.append(rows[-1])
    with capsys.disabled():
        print("\nweights: predicted vs measured\n" + "\n".join(rows))
    assert not failures, "beyond 1%:\n" + "\n".join(failures)
