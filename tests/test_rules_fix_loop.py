"""The `apron boot --fix` loop of apron.rules' docstring, run over real CPU-engine boots.

The lab booted each failing command and its correction; here a stand-in `boot` returns the lab log of
the boot with that model and those settings, so the loop runs without an engine. apron.boot.fix runs
the same loop over real boots and records (tests/test_boot_fix.py).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from apron.measure.logparse import parse_log
from apron.rules import StatusStore, diagnose, fingerprint, promote, settings_from_args
from rules_text import log_index, log_text


def lab_boots() -> dict:
    boots = {}
    for name in log_index():
        args = parse_log(log_text(name)).settings
        boots.setdefault((args["model"], _paired(settings_from_args(args))), name)
    return boots


def _paired(settings):
    """Some healthy lab boots also ran the one-process executor: the runner's choice, not a setting a
    rule corrects, so a failed boot and its corrected twin pair up without it."""
    return replace(settings, extra_flags=tuple(f for f in settings.extra_flags if "executor" not in f))


def boot(model: str, settings) -> str:
    return lab_boots()[(model, _paired(settings))]


@pytest.mark.parametrize(
    "failed,rule,healthy",
    [
        ("c_auto_kv_util_004_refused", "raise_gpu_memory_utilization", "c_auto_kv_util_005"),
        ("g_gemma2_float16", "dtype_bfloat16", "g_gemma2_bfloat16_healthy"),
    ],
)
def test_fix_loop_proves_the_rule_on_its_release(tmp_path, failed, rule, healthy):
    store = StatusStore(tmp_path)
    text = log_text(failed)
    model = parse_log(text).settings["model"]
    diagnosis = diagnose(text, store=store)
    candidate = diagnosis.applicable[0]
    assert candidate.match.rule_id == rule and candidate.status.status == "untested"
    store.note_hypothesis(rule, diagnosis.engine_version, failed)
    assert store.status(rule, "0.32.0").status == "hypothesis"

    second = boot(model, candidate.corrected)
    assert second == healthy
    assert fingerprint(log_text(second)) is None and log_index()[second]["outcome"] == "healthy"
    promote(rule, diagnosis.engine_version, failed, second, store=store)

    assert store.status(rule, "0.32.0").is_proven
    assert store.status(rule, "0.33.0").status == "untested"  # proof does not carry across releases
    assert diagnose(text, store=store).applicable[0].status.is_proven
