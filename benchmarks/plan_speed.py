#!/usr/bin/env python3
"""How fast is a plan? Prints figures; targets live here, not in the tests.

1. Start-up against the interpreter's own: `apron plan` on a catalog model, `apron --help` and
   `apron fit` over the whole GPU catalog, each timed in turn with `python -c pass` from the same
   venv (A B A B ...), as the median of the pairs' ratios. Targets: plan <= 5x, --help <= 3.5x, fit
   <= 20x (plan, fit and --help import no click: cli/fast.py, cli/help.py). `python -c 'import click'`
   and the standard library a plan needs are timed the same way, without a target: what a click
   command pays before its own code, and the floor under a plan.
2. Whole-process `apron plan FOLDER --gpu H100 --json` on a local checkpoint (materialized
   Qwen3-8B, 5 shards): median of N runs. Target: median <= 0.3 s.
3. 1,000 plans in one process (checkpoint read once; settings varied). Target: <= 2 s.
4. Whether torch / transformers / vllm got imported on the planning path (must be no).

The installed package's bytecode is compiled first: a clean clone (or PYTHONDONTWRITEBYTECODE) would
otherwise time the compiler. The machine may be shared: the ratios pair each run with a baseline run
next to it, so a drift in the machine's speed moves both.

    python benchmarks/plan_speed.py [--runs 15] [--pairs 21]
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

BASELINE = [sys.executable, "-c", "pass"]
# What a command would pay for click alone (only commands other than plan, fit and --help import it).
CLICK = [sys.executable, "-c", "import click"]
# The standard library a plan imports (re with enum and functools; json, zlib, shlex, ...): the floor
# under `apron plan`, whatever Apron's own modules cost. A plan imports no typing, dataclasses, inspect,
# pathlib, gzip, hashlib or datetime (apron/frozen.py, apron/lite_typing.py, tests/test_layout.py).
STDLIB = [sys.executable, "-c", "import re, json, zlib, enum, functools, math, struct, bisect, shlex"]
# (name, arguments after `apron`, target ratio, exit codes that count as a run)
PAIRED = [
    ("apron plan Qwen/Qwen3-8B --gpu H100", ["plan", "Qwen/Qwen3-8B", "--gpu", "H100"], 5.0, (0,)),
    ("apron --help", ["--help"], 3.5, (0,)),
    (
        "apron fit Qwen/Qwen3-8B --context 32768 --users 32 (whole catalog)",
        ["fit", "Qwen/Qwen3-8B", "--context", "32768", "--users", "32"],
        20.0,
        (0, 1),
    ),
]


def apron_argv() -> list[str]:
    """The console script users run, from this venv; `python -m apron.cli` where there is none."""
    script = Path(sys.executable).with_name("apron")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "apron.cli"]


def compile_package() -> None:
    import apron

    compileall.compile_dir(str(Path(apron.__file__).parent), quiet=1)


def timed(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole process; the CPU time from the kernel's own accounting
    of that child (wait4), finer than the clock ticks os.times() counts in."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode not in ok:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} exited {process.returncode}: {err.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def paired_ratios(pairs: int) -> None:
    apron = apron_argv()
    commands = [
        ("`python -c 'import click'` (no target: what a click command pays before its own code)", CLICK, 0.0, (0,)),
        ("the standard library a plan imports (no target: the floor under `apron plan`)", STDLIB, 0.0, (0,)),
    ]
    commands += [(name, apron + args, target, ok) for name, args, target, ok in PAIRED]
    for _, argv, _, ok in commands:  # warm-up: the OS's file cache, the bytecode
        timed(BASELINE)
        timed(argv, ok)
    walls: dict[str, list[float]] = {name: [] for name, *_ in commands}
    cpus: dict[str, list[float]] = {name: [] for name, *_ in commands}
    seconds: dict[str, list[float]] = {name: [] for name, *_ in commands}
    base_seconds: list[float] = []
    for _ in range(pairs):
        for name, argv, _, ok in commands:
            base_wall, base_cpu = timed(BASELINE)
            wall, cpu = timed(argv, ok)
            walls[name].append(wall / base_wall)
            cpus[name].append(cpu / base_cpu if base_cpu > 0 else float("nan"))
            seconds[name].append(wall)
            base_seconds.append(base_wall)
    print(
        f"start-up against `python -c pass` ({statistics.median(base_seconds) * 1000:.1f} ms median wall), "
        f"{pairs} interleaved pairs each, median of the pairs' ratios:"
    )
    for name, _, target, _ in commands:
        ratio = statistics.median(walls[name])
        cpu = [r for r in cpus[name] if r == r]
        cpu_text = f"{statistics.median(cpu):.1f}x" if cpu else "n/a"
        verdict = "" if not target else f" - {'meets' if ratio <= target else 'MISSES'} the {target:g}x target"
        print(
            f"  {name}: {ratio:.1f}x wall (cpu {cpu_text}; median {statistics.median(seconds[name]) * 1000:.0f} ms)"
            + verdict
        )


def materialized(tmp: Path) -> Path:
    import materialize

    doc = json.loads(gzip.decompress((ROOT / "tests/fixtures/checkpoints/Qwen--Qwen3-8B.json.gz").read_bytes()))
    materialize.materialize(doc, str(tmp / "qwen3-8b"))
    return tmp / "qwen3-8b"


def whole_process(folder: Path, runs: int) -> list[float]:
    argv = apron_argv() + ["plan", str(folder), "--gpu", "H100", "--json"]
    return [timed(argv)[0] for _ in range(runs)]


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
    parser.add_argument("--pairs", type=int, default=21)
    args = parser.parse_args()
    compile_package()
    paired_ratios(args.pairs)
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
