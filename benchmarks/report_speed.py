#!/usr/bin/env python3
"""How long `apron report` takes on a store of 200 records (target: under 3 s, the whole process).

The store is built first and not timed: plan records of the bundled catalog models on catalog GPUs at
several context lengths (real plans, made here), plus the boot and fix records of another store when
--boots-from names one (e.g. a store the test suite's CPU-engine boots wrote). Then `apron report` runs
as a user runs it, in a fresh process, three times; the figure is the median wall time.

    python benchmarks/report_speed.py [--records 200] [--boots-from STORE]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from apron.checkpoint import load_checkpoint
from apron.checkpoint.catalog import catalog_index
from apron.errors import ApronError
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from apron.records.documents import PlanRecord
from apron.records.store import RecordStore

GPUS = ("H100", "4090", "L4", "A100", "H200", "A6000", "L40S", "B200")
CONTEXTS = (4096, 8192, 32768, None)


def build_store(root: Path, num_records: int, boots_from: Path | None) -> RecordStore:
    store = RecordStore(root)
    if boots_from:
        for record in RecordStore(boots_from).all():
            store.put(record.document)
    checkpoints = {model: load_checkpoint(model) for model in catalog_index()}
    for model, gpu, context in itertools.product(checkpoints, GPUS, CONTEXTS):
        if len(store.ids()) >= num_records:
            break
        try:
            plan = plan_checkpoint(checkpoints[model], resolve_gpu(gpu), UserSettings(max_model_len=context))
        except ApronError:
            continue  # a context above the model's limit: not a plan
        store.put(PlanRecord(plan))
    return store


def time_report(store: RecordStore, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "apron.cli", "report", "--records", str(store.root), "--out", str(out)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--boots-from", type=Path, help="A record store whose boots and fixes to include.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = build_store(Path(tmp) / "store", args.records, args.boots_from)
        kinds = [r.kind for r in store.all()]
        times = [time_report(store, Path(tmp) / f"out{i}") for i in range(3)]
        print(
            f"apron report: {len(kinds)} records ({kinds.count('boot')} boots, {kinds.count('plan')} plans, "
            f"{kinds.count('fix')} fixes): median {statistics.median(times):.2f} s wall "
            f"(runs {', '.join(f'{t:.2f}' for t in times)} s; target under 3 s)"
        )


if __name__ == "__main__":
    main()
