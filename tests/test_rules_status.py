"""Rule status per engine version: untested -> hypothesis (motivating record) -> proven (two records);
proof never carries to another version; files are written atomically."""

from __future__ import annotations

import json
import os

import pytest

from apron.errors import BadInput
from apron.rules import StatusStore, promote


def test_hypothesis_then_proven_on_one_version(tmp_path):
    store = StatusStore(tmp_path)
    assert store.status("kv_cache_max_model_len", "0.32.0").status == "untested"
    noted = store.note_hypothesis("kv_cache_max_model_len", "vllm==0.32.0", "rec-failed-1")
    assert (noted.status, noted.motivated_by) == ("hypothesis", ("rec-failed-1",))
    proven = store.promote("kv_cache_max_model_len", "0.32.0", "rec-failed-1", "rec-healthy-2")
    assert proven.is_proven
    assert [(p.failed_id, p.healthy_id) for p in proven.proofs] == [("rec-failed-1", "rec-healthy-2")]
    assert proven.evidence() == "failed rec-failed-1 -> healthy rec-healthy-2"


def test_proof_does_not_carry_to_another_version(tmp_path):
    store = StatusStore(tmp_path)
    store.promote("dtype_bfloat16", "0.32.0", "f", "h")
    assert store.status("dtype_bfloat16", "0.32.0").is_proven
    assert store.status("dtype_bfloat16", "0.33.0").status == "untested"
    assert store.status("dtype_bfloat16", "v0.32.0").is_proven  # the same release, spelled with a v
    assert sorted(store.statuses("dtype_bfloat16")) == ["0.32.0"]


def test_a_proven_rule_stays_proven_and_proofs_are_not_duplicated(tmp_path):
    store = StatusStore(tmp_path)
    store.promote("enforce_eager", "0.30.0", "f1", "h1")
    store.promote("enforce_eager", "0.30.0", "f1", "h1")
    store.note_hypothesis("enforce_eager", "0.30.0", "f2")
    status = store.promote("enforce_eager", "0.30.0", "f2", "h2")
    assert status.is_proven and len(status.proofs) == 2
    assert status.motivated_by == ("f1", "f2")


@pytest.mark.parametrize("failed,healthy", [("same", "same"), ("", "h"), ("f", " ")])
def test_a_proof_needs_two_records(tmp_path, failed, healthy):
    with pytest.raises(BadInput):
        StatusStore(tmp_path).promote("enforce_eager", "0.30.0", failed, healthy)


def test_files_are_written_whole(tmp_path):
    store = StatusStore(tmp_path)
    store.promote("enforce_eager", "0.30.0", "f", "h")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".enforce_eager.lock")) == [
        "enforce_eager.json"
    ]
    document = json.loads((tmp_path / "enforce_eager.json").read_text())
    assert document["schema"] == "apron.rule-status/1"
    assert document["versions"]["0.30.0"]["status"] == "proven"
    # written like a record (apron.paths.write_atomic): an ordinary file under the umask, not mkstemp's 0600
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "enforce_eager.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_claim_of_proof_without_records_is_a_hypothesis(tmp_path):
    (tmp_path / "enforce_eager.json").write_text(
        json.dumps(
            {
                "schema": "apron.rule-status/1",
                "rule": "enforce_eager",
                "versions": {"0.30.0": {"status": "proven", "motivated_by": ["f"], "proofs": []}},
            }
        )
    )
    assert StatusStore(tmp_path).status("enforce_eager", "0.30.0").status == "hypothesis"


def test_an_unreadable_file_is_bad_input(tmp_path):
    (tmp_path / "enforce_eager.json").write_text("{not json")
    with pytest.raises(BadInput, match="unreadable"):
        StatusStore(tmp_path).status("enforce_eager", "0.30.0")


def test_a_file_that_is_not_an_object_is_bad_input(tmp_path):
    (tmp_path / "enforce_eager.json").write_text("[]")
    with pytest.raises(BadInput, match="enforce_eager.json: not a JSON object"):
        StatusStore(tmp_path).status("enforce_eager", "0.30.0")


def test_promote_checks_the_rule_exists(tmp_path):
    with pytest.raises(BadInput, match="no rule"):
        promote("no_such_rule", "0.30.0", "f", "h", store=StatusStore(tmp_path))
    assert promote("enforce_eager", "0.30.0", "f", "h", store=StatusStore(tmp_path)).is_proven


def test_default_store_lives_under_the_records_folder(apron_home):
    assert StatusStore().root == apron_home / "data" / "records" / "rules"
