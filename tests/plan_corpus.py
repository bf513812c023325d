"""The plans the `apron.plan/1` contract test compares: every bundled-catalog model and every checkpoint
snapshot in tests/fixtures/checkpoints, each under a few settings, as `apron plan --json` prints them.

    python tests/plan_corpus.py OUT.json.gz     # write the corpus (the "before" side of the test)

The stored corpus (tests/fixtures/plans/contract-corpus.json.gz) was first written by the code of commit
16f0303, before the plan became a typed document end to end. A change to the numbers themselves (a new
budget term, a KV layout) changes it on purpose: write it again with the command above and say so in
the commit.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "fixtures" / "checkpoints"
CORPUS = ROOT / "tests" / "fixtures" / "plans" / "contract-corpus.json.gz"
# (name, gpu, user settings, pinned engine): defaults on the two GPU sizes people plan for most, and
# one variant that moves every setting away from its default on an older release.
VARIANTS: tuple[tuple[str, str, dict, str | None], ...] = (
    ("h100", "H100", {}, None),
    ("4090", "4090", {}, None),
    (
        "h100x2-0.30.0",
        "H100",
        {
            "tensor_parallel_size": 2,
            "max_model_len": 8192,
            "kv_cache_dtype": "fp8",
            "enforce_eager": True,
            "max_num_seqs": 64,
            "gpu_memory_utilization": 0.85,
        },
        "0.30.0",
    ),
)


def sources() -> list[str]:
    """Catalog repo ids (read through the bundled catalog) and snapshot files (read as files)."""
    from apron.checkpoint.catalog import catalog_index

    return sorted(catalog_index()) + [str(p) for p in sorted(SNAPSHOTS.glob("*.json.gz"))]


def _key(source: str, variant: str) -> str:
    name = Path(source).name if source.endswith(".json.gz") else source
    return f"{name} {variant}"


def plan_texts() -> dict[str, str]:
    """{"<source> <variant>": the JSON text `apron plan --json` prints} for the whole corpus."""
    from apron.checkpoint import load_checkpoint
    from apron.hardware import resolve_gpu
    from apron.plan.planner import plan_checkpoint
    from apron.plan.settings import UserSettings

    out = {}
    for source in sources():
        checkpoint = load_checkpoint(source)
        for variant, gpu, user, engine in VARIANTS:
            plan = plan_checkpoint(checkpoint, resolve_gpu(gpu), UserSettings(**user), engine)
            text = json.dumps(plan.to_json(), indent=2)  # as `apron plan --json` prints
            # A snapshot's source is its absolute path; the corpus must not depend on where the clone lives.
            out[_key(source, variant)] = text.replace(str(ROOT) + "/", "<repo>/")
    return out


def write(path: Path) -> None:
    data = json.dumps(plan_texts(), indent=0, sort_keys=True).encode()
    path.write_bytes(gzip.compress(data, mtime=0))


def read(path: Path = CORPUS) -> dict[str, str]:
    return json.loads(gzip.decompress(path.read_bytes()))


def portable(text: str) -> str:
    """A plan's text with a snapshot's absolute path made relative to the repository: the corpus was
    written in one checkout, and a clone elsewhere must compare equal."""
    return re.sub(r'"source": "[^"]*/(tests/fixtures/checkpoints/[^"/]+")', r'"source": "\1', text)


if __name__ == "__main__":
    write(Path(sys.argv[1]))
