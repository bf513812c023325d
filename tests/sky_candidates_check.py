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

from apron.hardware import resolve_gpu
from apron.plan.candidates import read_candidate
from apron.plan.candidates.formats import SKY_NAMES


def accelerators(task: Any) -> list[dict[str, Any]]:
    return [dict(r.accelerators or {}) for r in task.resources]


def check(path: str) -> None:
    task = sky.Task.from_yaml(path)
    candidate = read_candidate(path)
    assert candidate.kind == "skypilot", candidate.kind
    # Apron plans on one of the machines SkyPilot may launch (the first where the order is given).
    assert {candidate.gpu: candidate.gpu_count} in accelerators(task), (candidate.gpu, accelerators(task))
    if isinstance(task.resources, list):
        assert accelerators(task)[0] == {candidate.gpu: candidate.gpu_count}
    assert resolve_gpu(SKY_NAMES[candidate.gpu]).name == SKY_NAMES[candidate.gpu]
    # The model is SkyPilot's env value, substituted into the run script the way the shell will.
    assert candidate.model in task.envs.values(), (candidate.model, task.envs)
    assert "vllm" in task.run and candidate.args.model == candidate.model
    tp = candidate.args.settings.get("tensor_parallel_size")
    assert tp in (None, candidate.gpu_count), tp


if __name__ == "__main__":
    for name in sys.argv[1:]:
        check(name)
        print(f"ok {name}")
