"""SkyPilot task files as `--from` candidates against SkyPilot's own parser: run with the python of a
virtual environment that holds SkyPilot (scripts/test.sh makes one under .cache/sky-venv) and Apron's
source on PYTHONPATH; tests/test_sky_candidates.py runs it. Prints one line per file checked; any
disagreement is an AssertionError (exit 1).

    python tests/sky_candidates_check.py FILE.yaml [FILE.yaml ...]
"""

from __future__ import annotations

import sys
from typing import Any

import sky

from apron.deploy import read_deployments
from apron.deploy.gpus import SKYPILOT
from apron.hardware import resolve_gpu


def accelerators(task: Any) -> list[dict[str, Any]]:
    return [dict(r.accelerators or {}) for r in task.resources]


def check(path: str) -> None:
    task = sky.Task.from_yaml(path)
    (candidate,) = read_deployments(path)
    assert candidate.format == "skypilot", candidate.format
    gpu, count = candidate.gpu.value, candidate.gpu_count.value  # type: ignore[union-attr]
    # Apron plans on one of the machines SkyPilot may launch; the first where SkyPilot has an order.
    assert {gpu: count} in accelerators(task), (gpu, count, accelerators(task))
    if isinstance(task.resources, list):
        assert accelerators(task)[0] == {gpu: count}, (gpu, count, accelerators(task))
    else:
        assert len(task.resources) == 1 or any("no order" in n for n in candidate.notes), candidate.notes
    assert resolve_gpu(SKYPILOT[gpu]).name == SKYPILOT[gpu]
    assert (candidate.num_nodes.value if candidate.num_nodes else 1) == task.num_nodes
    # The model is SkyPilot's env value (or written in run), substituted the way the shell will.
    model = candidate.model.value  # type: ignore[union-attr]
    assert model in task.envs.values() or model in (task.run or ""), (model, task.envs)
    tp = candidate.settings.get("tensor_parallel_size")
    if "SKYPILOT_NUM_GPUS_PER_NODE" in (task.run or ""):
        assert tp == count, (tp, count)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        check(name)
        print(f"ok {name}")
