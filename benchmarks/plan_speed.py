#!/usr/bin/env python3
"""How fast is a plan? Prints figures; targets live here, not in the tests.

1. Whole-process `apron plan FOLDER --gpu H100 --json` on a local checkpoint (materialized
   Qwen3-8B, 5 shards): median of N runs. Target: median <= 0.3 s.
2. 1,000 plans in one process (checkpoint read once; settings varied). Target: <= 2 s.
3. Whether torch / transformers / vllm got imported on the planning path (must be no).

    python benchmarks/plan_speed.py [--runs 15]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))


def materialized(tmp: Path) -> Path:
    import materialize

    doc = json.loads(gzip.decompress((ROOT / "tests/fixtures/checkpoints/Qwen--Qwen3-8B.json.gz").read_bytes()))
    materialize.materialize(doc, str(tmp / "qwen3-8b"))
    return tmp / "qwen3-8b"


def whole_process(folder: Path, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "apron.cli", "plan", str(folder), "--gpu", "H100", "--json"],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - start)
    return times


def in_process(folder: Path, count: int) -> float:
    from apron.checkpoint import load_checkpoint
    from apron.hardware import resolve_gpu
    from apron.plan.planner import plan_checkpoint
    from apron.plan.settings import UserSettings

    checkpoint = load_checkpoint(str(folder))
    gpus = [resolve_gpu(name) for name in ("H100", "4090", "L4", "A100", "H200", "B200")]
    start = time.perf_counter()
    for i in range(count):
        plan_checkpoint(checkpoint, gpus[i % len(gpus)], UserSettings(max_model_len=1024 + 64 * (i % 50)))
    return time.perf_counter() - start


def heavy_imports(folder: Path) -> list[str]:
    code = (
        "import sys, apron.cli; apron.cli.main(['plan', sys.argv[1], '--gpu', 'H100', '--json']); "
        "print([m for m in ('torch', 'transformers', 'vllm') if m in sys.modules], file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True)
    return eval(out.stderr.strip().splitlines()[-1])  # noqa: S307 - our own list literal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = materialized(Path(tmp))
        times = whole_process(folder, args.runs)
        print(
            f"whole-process apron plan: median {statistics.median(times):.3f} s, min {min(times):.3f} s, "
            f"max {max(times):.3f} s over {args.runs} runs (target: median <= 0.3 s)"
        )
        elapsed = in_process(folder, 1000)
        print(f"1,000 in-process plans: {elapsed:.2f} s, {elapsed:.2f} ms per plan (target: <= 2 s)")
        print(f"heavy modules imported on the planning path: {heavy_imports(folder) or 'none'}")


if __name__ == "__main__":
    main()
