#!/usr/bin/env python3
"""Time `apron engine sync vllm==X`: the pip download, then the extraction (target: under 10 s).

    python benchmarks/engine_sync.py                    # vllm==0.33.0 from PyPI, into a temp Apron home
    python benchmarks/engine_sync.py --spec vllm==0.32.0 --repeat 3
    python benchmarks/engine_sync.py --spec path/to/vllm-0.33.0-...whl   # skip the download

Prints one JSON object: download and extraction wall seconds (each repeat), the CPU seconds the
extraction used (this process and its parser workers), the CPU count and load average (the figure
depends on both: the parse is spread over all CPUs), and the facts file size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="vllm==0.33.0")
    parser.add_argument("--repeat", type=int, default=1, help="extractions after the download")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--home", type=Path, default=None, help="Apron home (default: a temp folder)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="apron-bench-"))
    os.environ["APRON_HOME"] = str(home)

    from apron.engine.extract import extract_facts
    from apron.engine.sync import facts_bytes, resolve_source, sync
    from apron.paths import cache_dir

    started = time.perf_counter()
    source, version = resolve_source(args.spec, cache_dir() / "wheels", say=lambda m: print(m, file=sys.stderr))
    download_seconds = time.perf_counter() - started
    runs, cpu = [], []
    for _ in range(max(1, args.repeat)):
        cpu_before, wall_before = cpu_seconds(), time.perf_counter()
        facts = extract_facts(source, expected_version=version, jobs=args.jobs)
        size_bytes = len(facts_bytes(facts))
        runs.append(round(time.perf_counter() - wall_before, 2))
        cpu.append(round(cpu_seconds() - cpu_before, 2))
    result = sync(str(source.root), home / "facts", jobs=args.jobs)  # the command's own path, end to end
    print(
        json.dumps(
            {
                "spec": args.spec,
                "version": facts["version"],
                "wheel": source.root.name,
                "wheel_bytes": source.root.stat().st_size,
                "download_seconds": round(download_seconds, 2),
                "extract_seconds": runs,
                "extract_cpu_seconds": cpu,
                "sync_command_extract_seconds": round(result.extract_seconds, 2),
                "facts_file_bytes": size_bytes,
                "py_files": facts["counts"]["py_files"],
                "cpus": os.cpu_count(),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "target_seconds": 10,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
