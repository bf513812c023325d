"""A release Apron has not validated says so: its plans carry an engine_changed problem naming the
mirrored engine functions whose source differs from every release the tests cover (the shipped facts),
and `apron engine diff` lists them. Versions are ordered by PEP 440.

The newer releases here are the shipped vLLM 0.33.0 facts under another version number, synced into an
empty Apron home, with one mirrored function's source hash changed (or none)."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from apron.cli import main
from apron.engine import facts as facts_module
from apron.engine.facts import DATA_DIR, engine_change, load_facts, version_key
from apron.engine.sync import write_facts
from apron.errors import BadInput
from apron.hardware import resolve_gpu
from apron.paths import engine_facts_dir
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import snapshot_path

KEY = "v1/worker/gpu_worker.py:Worker.determine_available_memory"


def synced_release(version: str, digest: str | None = None) -> None:
    """vLLM 0.33.0's facts as release VERSION, with the hash of KEY set to DIGEST (None: unchanged)."""
    facts = json.loads(gzip.decompress(Path(DATA_DIR, "vllm-0.33.0.json.gz").read_bytes()))
    facts = copy.deepcopy(facts) | {"version": version}
    assert KEY in facts["mirrored_functions"]
    if digest is not None:
        facts["mirrored_functions"][KEY] = digest
    write_facts(facts, engine_facts_dir())
    facts_module._load.cache_clear()


def plan_on(version: str):
    from apron.checkpoint.snapshot import load_snapshot

    return plan_checkpoint(load_snapshot(snapshot_path("Qwen/Qwen3-8B")), resolve_gpu("H100"), UserSettings(), version)


def test_a_changed_mirrored_function_is_a_problem_of_the_plan(apron_home_with_facts, capsys):
    synced_release("0.34.0", "0" * 64)
    plan = plan_on("0.34.0")
    (problem,) = [p for p in plan.problems if p.kind == "engine_changed"]
    assert problem.label == "predicted"
    assert "Worker.determine_available_memory" in problem.message
    assert "0.29.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0" in problem.message
    assert "apron engine diff 0.33.0 0.34.0" in problem.message
    assert plan.verdict == plan_on("0.33.0").verdict  # a prediction, not a refusal
    assert not any(p.kind == "engine_changed" for p in plan_on("0.33.0").problems)  # validated
    assert main(["engine", "diff", "0.33.0", "0.34.0"]) == 0
    out = capsys.readouterr().out
    assert "mirrored functions changed" in out and "Worker.determine_available_memory" in out


def test_a_release_with_the_validated_source_is_quiet(apron_home_with_facts):
    synced_release("0.33.1")
    assert engine_change(load_facts("0.33.1")) is None
    assert not any(p.kind == "engine_changed" for p in plan_on("0.33.1").problems)


def test_a_release_candidate_comes_before_its_release(apron_home_with_facts):
    synced_release("0.34.0rc1", "1" * 64)
    synced_release("0.34.0", "2" * 64)
    assert facts_module.known_versions()[-2:] == ["0.34.0rc1", "0.34.0"]
    assert load_facts("0.34.0").at_least("0.34.0rc1") and not load_facts("0.34.0rc1").at_least("0.34.0")
    assert engine_change(load_facts("0.34.0rc1")).nearest == "0.33.0"
    assert sorted(["0.10.0", "0.9.1"], key=version_key) == ["0.9.1", "0.10.0"]
    with pytest.raises(BadInput, match="not a release number"):
        version_key("latest")
