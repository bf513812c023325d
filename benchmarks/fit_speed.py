#!/usr/bin/env python3
"""How fast is `apron fit`? Prints figures; the target lives here, not in the tests.

Whole-process `apron fit MODEL --context C --users N --json` over the full catalog (every GPU x
1/2/4/8) for three models from the bundled catalog: median of N runs each, and the plans made.
Target: each whole process under 2 s on a quiet machine.

    python benchmarks/fit_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CASES = [
    ("Qwen/Qwen3-8B", 32768, 32),
    ("openai/gpt-oss-120b", 65536, 64),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", 16384, 16),
]
TARGET_SECONDS = 2.0


def one_run(model: str, context: int, users: int) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", "fit", model, "--context", str(context), "--users", str(users), "--json"],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"apron fit {model} failed: {done.stderr.strip()}")
    return seconds, json.loads(done.stdout)


def count_plans(model: str, context: int, users: int) -> int:
    """The plans one sweep makes (in this process, counting the planner's calls)."""
    from apron.plan import fit

    calls = 0
    original = fit.plan_checkpoint

    def counted(*args, **kwargs):
        nonlocal calls
        calls += 1
        return original(*args, **kwargs)

    fit.plan_checkpoint = counted
    try:
        fit.run_fit(fit.FitQuery(model, users, context))
    finally:
        fit.plan_checkpoint = original
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    worst = 0.0
    for model, context, users in CASES:
        times, doc = [], {}
        for _ in range(args.runs):
            seconds, doc = one_run(model, context, users)
            times.append(seconds)
        median = statistics.median(times)
        worst = max(worst, median)
        rows = doc["configurations"]
        print(
            f"{model:<36} {len(rows):>3} configurations ({count_plans(model, context, users)} plans), "
            f"{doc['num_feasible']:>3} feasible: "
            f"median {median:.2f} s (min {min(times):.2f}, max {max(times):.2f}) over {args.runs} runs"
        )
    verdict = "meets" if worst < TARGET_SECONDS else "MISSES"
    print(f"slowest median {worst:.2f} s: {verdict} the {TARGET_SECONDS:.0f} s target for a whole `apron fit` process")


if __name__ == "__main__":
    main()
