"""`apron records import` (published boots as records beside their plans), `apron calibrate` (only the
observed terms, per release and GPU class, leave-one-out before and after) and `apron plan
--calibration FILE` (applied only when asked, only to its own release and GPU class), through the CLI
on the training boots (tests/fixtures/boots-training.json), planned from the checkpoint snapshots."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apron.plan.calibration import is_observed
from apron.records.documents import BootRecord, PlanRecord
from apron.records.store import RecordStore
from conftest import FIXTURES, SNAPSHOTS

TRAINING = FIXTURES / "boots-training.json"
GIB = 2**30
RTX_4090 = ("0.29.0", "NVIDIA GeForce RTX 4090")


def apron(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "APRON_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, Path, list[dict]]:
    tmp = tmp_path_factory.mktemp("calibrate")
    records = tmp / "records"
    done = apron(
        "records", "import", str(TRAINING), "--snapshots", str(SNAPSHOTS), "--records", str(records), "--json", home=tmp
    )
    assert done.returncode == 0, done.stderr
    return records, tmp, json.loads(done.stdout)


def test_import_keeps_every_published_boot_beside_the_plan_made_for_it(imported):
    records, home, rows = imported
    published = json.loads(TRAINING.read_text())["boots"]
    assert len(rows) == len(published)
    store = RecordStore(records)
    for index, (row, boot) in enumerate(zip(rows, published, strict=True)):
        record = store.get_as(row["id"], BootRecord).document
        plan = store.get_as(record.plan_id, PlanRecord).document.plan
        assert record.source is not None and record.source["index"] == index
        assert plan.engine_version == record.engine.version == boot["vllm_version"].lstrip("v")
        assert record.log is None and record.target == "imported"
        if boot["boot_outcome"] != "healthy":
            assert record.outcome in ("failed", "harness_fault") and not record.measured
            continue
        measured = boot["measured"]
        assert record.measured["non_torch_bytes"].value == measured["non_torch_increase_bytes"]
        assert record.measured["available_kv_bytes"].value == measured["available_kv_cache_bytes"]
        assert "boots-training.json" in record.measured["available_kv_bytes"].basis
    # content-addressed: importing the same file again adds nothing
    before = set(store.ids())
    again = apron(
        "records", "import", str(TRAINING), "--snapshots", str(SNAPSHOTS), "--records", str(records), home=home
    )
    assert again.returncode == 0 and set(store.ids()) == before
    shown = apron("records", "show", rows[0]["id"][:12], "--log", "--records", str(records), home=home)
    assert shown.returncode == 2 and "keeps no log" in shown.stderr


def group_samples(store: RecordStore) -> list[tuple[float, float, float]]:
    """(observed non-torch, derived non-torch, measured non-torch) of the 4090 0.29 boots whose plan
    describes them, read straight from the records: an independent check of the fit."""
    out = []
    for stored in store.find(BootRecord):
        boot = stored.document
        if boot.outcome != "healthy" or (boot.engine.version, boot.hardware.gpu_name) != RTX_4090:
            continue
        plan = store.get_as(boot.plan_id, PlanRecord).document.plan
        if abs(plan.quantities["weights_bytes_per_gpu"].value / boot.measured["weights_bytes_per_gpu"].value - 1) > 0.1:
            continue  # the float32 mamba boot, published as bfloat16
        observed = sum(c["num_bytes"] for c in plan.details["non_torch"] if is_observed(c))
        derived = plan.quantities["non_torch_bytes"].value - observed
        out.append((observed, derived, boot.measured["non_torch_bytes"].value))
    return out


@pytest.fixture(scope="module")
def calibrated(imported) -> tuple[dict, Path]:
    records, home, _ = imported
    out = home / "calibration.json"
    done = apron("calibrate", "--records", str(records), "--out", str(out), "--json", home=home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def test_calibrate_fits_the_observed_non_torch_term_and_reports_leave_one_out(imported, calibrated):
    records, _, _ = imported
    report, out = calibrated
    groups = {(g["engine"], g["gpu"]): g for g in report["groups"]}
    group = groups[RTX_4090]
    samples = group_samples(RecordStore(records))
    assert group["fitted"] and group["num_boots"] == len(samples) == 12
    factor = sum(o * (m - d) for o, d, m in samples) / sum(o * o for o, _, _ in samples)
    assert math.isclose(group["factors"]["non_torch_bytes"], factor, rel_tol=1e-5)
    assert group["components"]["non_torch_bytes"] == ["kernels, handles, small buffers"]
    loo = group["loo_error_bytes"]
    before = sum(abs(o + d - m) for o, d, m in samples) / len(samples)
    assert abs(loo["non_torch_bytes"]["before"] - before) <= 1
    # every kept factor lowers its own leave-one-out error; one that would raise it is dropped, said so
    assert all(loo[q]["after"] < loo[q]["before"] for q in group["factors"])
    for note in group["dropped"]:
        quantity = note.split(" on ")[1].split()[0]
        assert quantity not in group["factors"] and "would go from" in note
    assert set(loo) == {"non_torch_bytes", "cudagraph_bytes", "available_kv_bytes"}
    # fewer than 3 boots: said, nothing fitted
    assert groups[("0.29.0", "NVIDIA L4")] == {**groups[("0.29.0", "NVIDIA L4")], "fitted": False}
    assert "fewer than 3" in groups[("0.29.0", "NVIDIA L4")]["reason"]
    assert any("does not describe this boot" in s["reason"] for s in report["skipped_boots"])
    written = json.loads(out.read_text())
    assert written["schema"] == "apron.calibration/1" and [g["gpu"] for g in written["groups"]] == [RTX_4090[1]]


def plan_args(*extra: str) -> tuple[str, ...]:
    snapshot = str(SNAPSHOTS / "Qwen--Qwen3-8B.json.gz")
    return ("plan", snapshot, "--gpu", "4090", "--engine", "vllm==0.29.0", "--max-model-len", "640", "--json", *extra)


def test_plan_applies_a_calibration_only_when_asked_and_only_to_its_group(imported, calibrated):
    _, home, _ = imported
    report, out = calibrated
    plain = json.loads(apron(*plan_args(), home=home).stdout)
    done = apron(*plan_args("--calibration", str(out)), home=home)
    assert done.returncode == 0, done.stderr
    calibrated_plan = json.loads(done.stdout)
    factor = json.loads(out.read_text())["groups"][0]["factors"]["non_torch_bytes"]
    base = next(c for c in plain["details"]["non_torch"] if c["name"] == "kernels, handles, small buffers")
    scaled = next(c for c in calibrated_plan["details"]["non_torch"] if c["name"] == base["name"])
    assert scaled["num_bytes"] == round(base["num_bytes"] * factor) and scaled["label"] == "predicted"
    assert "calibrated on 12 boots (leave-one-out error" in scaled["basis"]
    q, p = calibrated_plan["quantities"], plain["quantities"]
    delta = scaled["num_bytes"] - base["num_bytes"]
    assert q["non_torch_bytes"]["value"] - p["non_torch_bytes"]["value"] == delta
    assert p["available_kv_bytes"]["value"] - q["available_kv_bytes"]["value"] == delta
    assert q["non_torch_bytes"]["label"] == "predicted" and "calibrated on 12 boots" in q["non_torch_bytes"]["basis"]
    assert "calibration" not in plain["details"]  # nothing is calibrated by default
    # another release or GPU class: refused in one line
    other = apron(
        "plan", str(SNAPSHOTS / "Qwen--Qwen3-8B.json.gz"), "--gpu", "H100", "--calibration", str(out), home=home
    )
    assert other.returncode == 2 and "made for vllm 0.29.0 on NVIDIA GeForce RTX 4090" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"schema": "apron.plan/1"}', "not apron.calibration/1"),
        ("not json", "not a readable JSON file"),
        (
            '{"schema": "apron.calibration/1", "groups": [{"engine": "0.29.0", "gpu": "NVIDIA GeForce RTX 4090", '
            '"num_boots": 3, "factors": {"non_torch_bytes": NaN}, "components": {"non_torch_bytes": []}}]}',
            "not a positive finite number",
        ),
    ],
)
def test_bad_calibration_files_are_one_line_and_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    done = apron(*plan_args("--calibration", str(bad)), home=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_calibrate_with_nothing_to_fit(tmp_path):
    empty = apron("calibrate", "--records", str(tmp_path / "none"), home=tmp_path)
    assert empty.returncode == 1 and "no boot records" in empty.stderr
    two = tmp_path / "two.json"
    boots = [b for b in json.loads(TRAINING.read_text())["boots"] if b["gpu"] == "NVIDIA L4"]
    two.write_text(json.dumps({"about": "two L4 boots", "boots": boots}))
    records = tmp_path / "records"
    assert (
        apron(
            "records", "import", str(two), "--snapshots", str(SNAPSHOTS), "--records", str(records), home=tmp_path
        ).returncode
        == 0
    )
    out = tmp_path / "cal.json"
    done = apron("calibrate", "--records", str(records), "--out", str(out), home=tmp_path)
    assert done.returncode == 1 and "2 boots: fewer than 3, nothing fitted" in done.stdout and not out.exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"about": "x"}', 'no "boots" list'),
        (
            '{"boots": [{"model_id": "Qwen/Qwen3-8B", "gpu": "L4", "vllm_version": "0.29.0"}]}',
            "boots[0] lacks boot_outcome",
        ),
    ],
)
def test_bad_published_files_are_one_line_and_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    done = apron("records", "import", str(bad), "--records", str(tmp_path / "r"), home=tmp_path)
    assert done.returncode == 2 and message in done.stderr and not (tmp_path / "r").exists()
