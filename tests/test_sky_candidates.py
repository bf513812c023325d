"""SkyPilot task files as `--from` candidates, checked against SkyPilot's own parser.

Needs SkyPilot (`pip install 'apron[sky]'`, ~100 packages): skips without it. CI runs it in the
dedicated SkyPilot venv beside tests/test_sky.py; the PyYAML reading of the same files is tested
everywhere in tests/test_candidates.py.
"""

from __future__ import annotations

import pytest

from apron.hardware import resolve_gpu
from apron.plan.candidates import read_candidate
from apron.plan.candidates.formats import SKY_NAMES
from conftest import FIXTURES

sky = pytest.importorskip("sky", reason="SkyPilot is not installed (optional extra apron[sky])")

SKY_FILES = sorted((FIXTURES / "candidates").glob("sky-*.yaml"))


def accelerators(task) -> list[dict]:
    return [dict(r.accelerators or {}) for r in task.resources]


@pytest.mark.parametrize("path", SKY_FILES, ids=[p.stem for p in SKY_FILES])
def test_apron_reads_what_skypilot_reads(path):
    task = sky.Task.from_yaml(str(path))
    candidate = read_candidate(str(path))
    assert candidate.kind == "skypilot"
    # Apron plans on one of the machines SkyPilot may launch (the first where the order is given).
    assert {candidate.gpu: candidate.gpu_count} in accelerators(task)
    if isinstance(task.resources, list):
        assert accelerators(task)[0] == {candidate.gpu: candidate.gpu_count}
    assert resolve_gpu(SKY_NAMES[candidate.gpu]).name == SKY_NAMES[candidate.gpu]
    # The model is SkyPilot's env value, substituted into the run script the way the shell will.
    assert candidate.model in task.envs.values()
    assert "vllm" in task.run and candidate.args.model == candidate.model
    tp = candidate.args.settings.get("tensor_parallel_size")
    assert tp in (None, candidate.gpu_count)
