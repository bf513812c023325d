"""The SkyPilot target builds its task with SkyPilot's own Task/Resources API (nothing is launched).

SkyPilot is an optional extra (`pip install 'apron[sky]'`): it is not in the test extra because it
pulls ~100 packages (~460 MB, a few minutes to install), so without it the API test skips and says
why; the mapping and sizing tests run everywhere.
"""

from __future__ import annotations

import json

import pytest

from apron.boot.sky import ACCELERATORS, SkyCluster, accelerator_for, disk_gib_for
from apron.errors import BadInput
from apron.hardware import all_gpus
from conftest import FIXTURES

PLAN = {
    "schema": "apron.plan/1",
    "engine": {"version": "0.33.0"},
    "hardware": {"gpu": "NVIDIA H100 80GB HBM3", "count": 2, "total_bytes_per_gpu": 85017493504},
    "details": {"weights": {"checkpoint_bytes": 65_524_328_560}},
    "command": "vllm serve Qwen/Qwen3-32B",
    "model": {"repo_id": "Qwen/Qwen3-32B", "source": "Qwen/Qwen3-32B", "source_kind": "hub"},
}


def test_every_catalog_gpu_has_a_skypilot_name():
    assert {g.name for g in all_gpus()} <= set(ACCELERATORS)
    assert accelerator_for("NVIDIA H100 80GB HBM3") == "H100"
    with pytest.raises(BadInput):
        accelerator_for("Imaginary GPU 9000")


def test_disk_is_sized_from_the_checkpoint():
    assert disk_gib_for(PLAN) == 154  # 61.0 GiB x 1.2 -> 74 + 80 for the venv and caches
    assert disk_gib_for({"details": {}}) == 100


def test_setup_installs_the_pinned_vllm():
    setup = SkyCluster.for_plan(PLAN).setup_script()
    assert "vllm==0.33.0" in setup


def test_task_with_skypilots_own_api():
    sky = pytest.importorskip(
        "sky",
        reason="SkyPilot is not installed (optional extra apron[sky]; not in the test "
        "extra because it pulls ~100 packages): pip install 'apron[sky]'",
    )
    cluster = SkyCluster.for_plan(PLAN, cloud="aws")
    task = cluster.task(sky)
    assert isinstance(task, sky.Task)
    (resources,) = list(task.resources)
    assert resources.accelerators == {"H100": 2}
    assert resources.disk_size == 154
    assert "vllm==0.33.0" in task.setup
    config = task.to_yaml_config()
    assert config["resources"]["accelerators"] == {"H100": 2}
    plan = json.loads((FIXTURES / "plans" / "tiny-gemma2-L4-vllm-0.32.0.json").read_text())
    (tiny,) = list(SkyCluster.for_plan(plan).task(sky).resources)
    assert tiny.accelerators == {"L4": 1} and tiny.disk_size == 100
