"""The SkyPilot target: the task, resources and teardown Apron builds, checked with SkyPilot's own classes.

SkyPilot is an optional extra (`pip install 'apron[sky]'`, ~100 packages), so it lives in its own
virtual environment: scripts/test.sh installs it from its hashed lock (scripts/sky-lock.txt) under
.cache/sky-venv and points APRON_SKY_VENV at it; tests/sky_check.py runs there. Where that venv is
missing the SkyPilot test skips and says why, except under scripts/test.sh (APRON_REQUIRE_SKY=1),
where a missing SkyPilot fails. The mapping and sizing tests run everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from apron.boot.sky import ACCELERATORS, SkyCluster, accelerator_for, disk_gib_for
from apron.errors import BadInput
from apron.hardware import all_gpus
from plan_helpers import base_plan

ROOT = Path(__file__).resolve().parent.parent
# Qwen3-32B on two H100s, pinned to 0.33.0: 61 GiB of checkpoint.
PLAN = replace(
    base_plan(),
    engine_version="0.33.0",
    gpu_name="NVIDIA H100 80GB HBM3",
    gpu_count=2,
    details={"weights": {"checkpoint_bytes": 65_524_328_560}},
)


def test_every_catalog_gpu_has_a_skypilot_name():
    assert {g.name for g in all_gpus()} <= set(ACCELERATORS)
    assert accelerator_for("NVIDIA H100 80GB HBM3") == "H100"
    with pytest.raises(BadInput):
        accelerator_for("Imaginary GPU 9000")


def test_disk_is_sized_from_the_checkpoint():
    assert disk_gib_for(PLAN) == 154  # 61.0 GiB x 1.2 -> 74 + 80 for the venv and caches
    assert disk_gib_for(replace(PLAN, details={})) == 100


def test_setup_installs_the_pinned_vllm():
    setup = SkyCluster.for_plan(PLAN).setup_script()
    assert "vllm==0.33.0" in setup


def sky_python() -> Path | None:
    venv = os.environ.get("APRON_SKY_VENV") or str(ROOT / ".cache" / "sky-venv")
    python = Path(venv) / "bin" / "python"
    return python if python.is_file() else None


def test_task_launch_and_teardown_with_skypilots_own_api(tmp_path):
    python = sky_python()
    if python is None:
        message = "no SkyPilot venv (scripts/test.sh makes .cache/sky-venv; or set APRON_SKY_VENV)"
        if os.environ.get("APRON_REQUIRE_SKY") == "1":
            pytest.fail(message)
        pytest.skip(message)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(PLAN.to_json()))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
        "APRON_HOME": str(tmp_path / "home"),
    }
    done = subprocess.run(
        [str(python), str(ROOT / "tests" / "sky_check.py"), str(plan_file), str(tmp_path / "records")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)

    task = result["task"]
    assert task["is_task"] and task["cloud"] == "AWS"
    assert task["accelerators"] == {"H100": 2} and task["disk_size"] == 154
    assert task["config"]["resources"] == {"infra": "aws", "accelerators": {"H100": 2}, "disk_size": 154}
    assert "vllm==0.33.0" in task["setup"]

    launch = result["launch"]
    name = launch["cluster"]
    assert launch["host"] == f"ssh://{name}"  # SkyPilot's `Host <cluster>` entry in ~/.ssh/config
    assert [c["function"] for c in launch["calls"]] == ["launch", "stream_and_get", "down", "stream_and_get"]
    launched = launch["calls"][0]["arguments"]
    assert launched == {"task": {"task": name}, "cluster_name": name, "idle_minutes_to_autostop": 30, "down": True}
    assert launch["calls"][2]["arguments"] == {"cluster_name": name}

    failed = result["failed_launch"]
    assert "ResourcesUnavailableError: no H100 capacity" in failed["host_fault"]
    assert [c["function"] for c in failed["calls"]] == ["launch", "down", "stream_and_get"]  # still torn down

    booted = result["boot"]  # the whole runner: the rented machine never answers ssh
    assert booted["outcome"] == "host_fault" and booted["fault"]["kind"] == "host"
    assert booted["calls"][-2:] == ["down", "stream_and_get"]
