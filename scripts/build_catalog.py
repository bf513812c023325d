#!/usr/bin/env python3
"""Rebuild the bundled checkpoint catalog (src/apron/checkpoint/catalog) from tests/fixtures snapshots.

The catalog lets `apron plan <repo_id>` answer offline for popular models. Each entry is the fixture
snapshot verbatim (gzip), and index.json records the repo id, pinned revision and whether the
snapshot's byte totals were checked against the Hub (`exact`).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "checkpoints"
CATALOG = ROOT / "src" / "apron" / "checkpoint" / "catalog"
MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "mistralai/Mistral-7B-Instruct-v0.3",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-8B-AWQ",
    "google/gemma-2-2b-it",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "deepseek-ai/DeepSeek-V2-Lite-Chat",
    "microsoft/phi-4",
    "state-spaces/mamba-2.8b-hf",
]


def main() -> None:
    CATALOG.mkdir(parents=True, exist_ok=True)
    index = {}
    for repo_id in MODELS:
        name = repo_id.replace("/", "--") + ".json.gz"
        shutil.copyfile(FIXTURES / name, CATALOG / name)
        doc = json.loads(gzip.decompress((FIXTURES / name).read_bytes()))
        index[repo_id] = {
            "file": name,
            "revision": doc.get("revision"),
            "exact": bool(doc.get("exact")),
            "architecture": doc["files"]["config.json"].get("architectures", ["?"])[0],
        }
    (CATALOG / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(index)} catalog entries to {CATALOG}")


if __name__ == "__main__":
    main()
