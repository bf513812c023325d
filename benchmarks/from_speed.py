#!/usr/bin/env python3
"""How fast is `--from FILE`? Prints figures; targets live here, not in the tests.

For every deployment file in tests/fixtures/candidates (each format of
research/deployment-formats.md): reading it (apron.deploy.read_deployments) and reading plus
planning every deployment in it (apron.plan.candidate.plan_deployments), in one warm process,
median of N runs. Then the whole process, `apron plan --from FILE --json`, for the slowest file:
wall time and CPU time (the CPU time is what a loaded machine does not inflate).
Target: under 0.5 s per file, whole process included.

    python benchmarks/from_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ROOT / "tests" / "fixtures" / "candidates"
# Files without a GPU type or model of their own: what a user would add on the command line.
GIVEN = {
    "serve-llama-3.1-8b.sh": ["--gpu", "4090"],
    "shell-variables.sh": ["--gpu", "H100"],
    "shell-comment-in-continuation.sh": ["--gpu", "L4"],
    "shell-api-server.sh": ["--gpu", "L4"],
    "docker-run.sh": ["--gpu", "H100"],
    "podman-run.sh": ["--gpu", "H100"],
    "shell-two-servers.sh": ["--gpu", "L4"],
    "shell-unresolved.sh": ["Qwen/Qwen3-8B", "--gpu", "L4"],
    "shell-env.sh": ["--gpu", "H100"],
    "compose-vllm.yaml": ["--gpu", "L4"],
    "compose.yaml": ["--gpu", "H100"],
    "vllm-config.yaml": ["Qwen/Qwen3-8B", "--gpu", "L4"],
    "helm-production-stack.yaml": ["--gpu", "H100"],
}
REFUSED = {"modal-app.py", "helm-template.yaml"}


def median_seconds(work, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def in_process(path: Path, runs: int) -> tuple[float, float]:
    from apron.deploy import read_deployments
    from apron.plan.candidate import GpuRequest, plan_deployments

    args = GIVEN.get(path.name, [])
    gpu = args[args.index("--gpu") + 1] if "--gpu" in args else None
    source = args[0] if args and not args[0].startswith("-") else None
    if path.name in REFUSED:
        return median_seconds(lambda: _refused(read_deployments, path), runs), float("nan")
    read = median_seconds(lambda: read_deployments(str(path)), runs)
    plan = median_seconds(lambda: plan_deployments(str(path), source=source, gpu=GpuRequest(gpu)), runs)
    return read, plan


def _refused(read, path: Path) -> None:
    from apron.errors import BadInput

    try:
        read(str(path))
    except BadInput:
        return
    raise AssertionError(f"{path} was read")


def whole_process(path: Path, runs: int, home: str) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system) of the whole process. The CPU time
    does not grow with the machine's load; the wall time does (a shared 2-core machine)."""
    command = [sys.executable, "-m", "apron.cli", "plan", "--from", str(path), *GIVEN.get(path.name, []), "--json"]
    env = {**os.environ, "APRON_HOME": home}
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, env=env, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        os.environ["APRON_HOME"] = home
        files = sorted(p for p in FILES.rglob("*") if p.is_file() and p.name != ".env")
        in_process(files[0], 1)  # imports and the option table, once
        rows = []
        for path in files:
            read, plan = in_process(path, runs)
            rows.append((plan if plan == plan else read, path))
            shown = "refused" if plan != plan else f"{plan * 1000:7.1f} ms"
            print(f"{path.relative_to(FILES)!s:40}  read {read * 1000:6.1f} ms   read + plan {shown}")
        slowest = max(rows)[1]
        wall, cpu = whole_process(slowest, runs, home)
        print(
            f"\nwhole process, slowest file ({slowest.name}): median {wall:.2f} s wall, {cpu:.2f} s CPU "
            f"(target < 0.5 s; load average {os.getloadavg()[0]:.1f})"
        )


if __name__ == "__main__":
    main()
