"""The `apron.plan/1` contract changes only by adding fields: every plan of the corpus (every bundled
catalog model and every fixture snapshot, under three settings; tests/plan_corpus.py) prints the same
bytes as the code of commit 16f0303 printed, once the fields added since are taken out again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import plan_corpus
from apron.checkpoint import load_checkpoint
from apron.hardware import resolve_gpu
from apron.plan.planner import plan_checkpoint
from apron.plan.result import Plan
from apron.plan.settings import UserSettings
from conftest import snapshot_path

# Fields added to the document since the corpus was written: (object path, key). The corpus was
# written again when the second wave's budget and KV layouts changed the numbers on purpose.
# fixed_command (issue 22): a does_not_fit plan's command with the first fix that fits, else null.
# Fields added to the plan since the corpus was last written (path, key); empty when it was just written
# (the corpus of this commit holds details.parallel, fixed_command and every quantity's low/high).
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
        key
        for key, text in after.items()
        if plan_corpus.portable(json.dumps(without_added(json.loads(text)), indent=2))
        != plan_corpus.portable(before[key])
    ]
    assert not changed, f"{len(changed)} plans differ from the corpus, e.g. {changed[:3]}"
    # ... and every stage after the planner reads the document back into the same Plan
    for text in after.values():
        document = json.loads(text)
        assert Plan.from_json(document).to_json() == document


@pytest.mark.parametrize(
    "name, multimodal",
    [
        ("google--gemma-4-31B-it", True),
        ("Qwen--Qwen3.8-27B", True),
        ("google--gemma-2-2b-it", False),
        ("Qwen--Qwen3-8B", False),
    ],
)
def test_multimodality_is_a_field_of_the_plan(name, multimodal, apron_home_with_facts):
    """From the release's registry (else the config's vision or audio tower), never a search of text;
    --language-model-only keeps the model multimodal but stops the checks from sending images."""
    checkpoint = load_checkpoint(str(snapshot_path(name)))
    plan = plan_checkpoint(checkpoint, resolve_gpu("H100"), UserSettings())
    assert plan.model.is_multimodal is multimodal
    assert plan.to_json()["model"]["is_multimodal"] is multimodal
    assert plan.sends_images is multimodal
    text_only = plan_checkpoint(checkpoint, resolve_gpu("H100"), UserSettings(language_model_only=True))
    assert text_only.model.is_multimodal is multimodal
    assert not text_only.sends_images


def test_the_cli_prints_the_corpus_document(apron_home_with_facts):
    result = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    printed = json.loads(result.stdout)
    assert json.dumps(without_added(printed), indent=2) == plan_corpus.read()["Qwen/Qwen3-8B h100"]
