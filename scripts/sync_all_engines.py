#!/usr/bin/env python3
"""Regenerate the shipped engine facts (src/apron/engine/data/vllm-<version>.json.gz) for every vLLM
release from 0.29.0 to the newest on the package index, with the same extractor `apron engine sync`
uses.

    python scripts/sync_all_engines.py                       # ask pip which releases exist, download
    python scripts/sync_all_engines.py --wheel-dir DIR       # use wheels already downloaded there
    python scripts/sync_all_engines.py --versions 0.33.0     # just these

Wheels are fetched with `pip download --no-deps` into Apron's cache (about 300 MB each) unless
`--wheel-dir` already holds `vllm-<version>-*.whl`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "src" / "apron" / "engine" / "data"
FIRST = (0, 29, 0)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def index_versions() -> list[str]:
    """Final releases >= 0.29.0 that `pip index versions vllm` lists."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "vllm"], capture_output=True, text=True, check=True
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("Available versions:"))
    versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return sorted((v for v in versions if re.fullmatch(r"\d+\.\d+\.\d+", v) and _key(v) >= FIRST), key=_key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="*", help="versions to sync (default: every release >= 0.29.0)")
    parser.add_argument("--wheel-dir", type=Path, help="folder holding already downloaded vLLM wheels")
    parser.add_argument("--out-dir", type=Path, default=DATA)
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "src"))
    from apron.engine.sync import sync
    from apron.errors import ApronError

    versions = args.versions or index_versions()
    for version in versions:
        wheels = sorted(args.wheel_dir.glob(f"vllm-{version}-*.whl")) if args.wheel_dir else []
        spec = str(wheels[0]) if wheels else f"vllm=={version}"
        try:
            result = sync(spec, args.out_dir, say=lambda m: print(f"  {m}", file=sys.stderr), jobs=args.jobs)
        except ApronError as exc:
            print(f"vllm {version}: {exc.message}", file=sys.stderr)
            return exc.exit_code
        counts = result.facts["counts"]
        print(
            f"vllm {version}: {counts['architectures']} architectures, "
            f"{len(result.facts['parsers']['reasoning'] or {})} reasoning / "
            f"{len(result.facts['parsers']['tool'] or {})} tool parsers, {counts['log_formats']} log formats, "
            f"{counts['refusals']} refusals, {len(result.facts['gaps'])} gaps, "
            f"{result.path.stat().st_size / 1e6:.2f} MB, {result.extract_seconds:.1f} s -> {result.path}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
