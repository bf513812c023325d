"""The `apron.plan/1` contract changes only by adding fields: every plan of the corpus (every bundled
catalog model and every fixture snapshot, under three settings; tests/plan_corpus.py) prints the same
bytes as the code of commit 16f0303 printed, once the fields added since are taken out again."""

from __future__ import annotations

import json
import subprocess
import sys

import plan_corpus

# Fields added to the document since the corpus was written: (object path, key).
ADDED: tuple[tuple[tuple[str, ...], str], ...] = ()


def without_added(document: dict) -> dict:
    for path, key in ADDED:
        node = document
        for part in path:
            node = node[part]
        assert key in node, f"added field {'.'.join((*path, key))} is missing"
        del node[key]
    return document


def test_existing_fields_are_byte_identical(apron_home_with_facts):
    before = plan_corpus.read()
    after = plan_corpus.plan_texts()
    assert sorted(after) == sorted(before)
    changed = [
        key for key, text in after.items() if json.dumps(without_added(json.loads(text)), indent=2) != before[key]
    ]
    assert not changed, f"{len(changed)} plans differ from the corpus, e.g. {changed[:3]}"


def test_the_cli_prints_the_corpus_document(apron_home_with_facts):
    result = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    printed = json.loads(result.stdout)
    assert json.dumps(without_added(printed), indent=2) == plan_corpus.read()["Qwen/Qwen3-8B h100"]
