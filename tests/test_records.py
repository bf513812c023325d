"""The record store: content-addressed, atomic, never overwritten, verified on read - and still whole
when its writer is killed at random points."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from apron.errors import BadInput, Failed
from apron.records.documents import (
    BootRecord,
    EngineIdentity,
    FixRecord,
    HardwareIdentity,
    LogRef,
    Measured,
    PlanRecord,
    compare,
    document_from_json,
)
from apron.records.store import RecordStore, canonical_bytes, record_id, sha256_hex
from plan_helpers import a_plan

LOG = LogRef("0" * 64, 0)


def a_boot(**changes) -> BootRecord:
    fields = {
        "created_at": "2026-01-01T00:00:00Z",
        "plan_id": "p",
        "outcome": "healthy",
        "target": "local",
        "engine": EngineIdentity("0.32.0"),
        "hardware": HardwareIdentity("gpu", gpu_name="NVIDIA L4", gpu_count=1),
        "log": LOG,
    }
    return BootRecord(**{**fields, **changes})


def test_canonical_json_and_id():
    a = {"kind": "plan", "b": [1, 2], "a": {"y": "é", "x": 1.5}}
    b = {"a": {"x": 1.5, "y": "é"}, "b": [1, 2], "kind": "plan"}
    assert canonical_bytes(a) == canonical_bytes(b) == '{"a":{"x":1.5,"y":"é"},"b":[1,2],"kind":"plan"}'.encode()
    assert record_id(a) == sha256_hex(canonical_bytes(a))


def test_put_get_verify_and_never_overwrite(tmp_path):
    store = RecordStore(tmp_path)
    plan = a_plan(command="vllm serve m")
    rid = store.put(PlanRecord(plan))
    path = tmp_path / "records" / rid[:2] / f"{rid}.json"
    assert path.read_bytes() == canonical_bytes(store.get(rid).raw)
    assert store.get(rid).raw["schema_version"] == 1
    assert store.get(rid).document == PlanRecord(plan)  # the typed document comes back
    assert store.get(rid[:10]).id == rid  # a unique prefix is enough
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # an ordinary file, not mkstemp's 0600
    before = path.stat().st_mtime_ns
    assert store.put(PlanRecord(a_plan(command="vllm serve m"))) == rid
    assert path.stat().st_mtime_ns == before  # the same content is not rewritten
    assert store.ids() == [rid] and store.verify() == []
    blob = store.put_blob(b"log line\n" * 1000)
    assert store.get_blob(blob) == b"log line\n" * 1000
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes().replace(b"serve m", b"serve n"))  # damage it
    with pytest.raises(Failed, match="does not match its hash"):
        store.get(rid)
    assert store.verify() == [rid]
    with pytest.raises(BadInput):
        store.get("zz")
    with pytest.raises(BadInput, match="no record"):
        store.get("abcdef12")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_lookup_by_kind_and_field(tmp_path):
    store = RecordStore(tmp_path)
    plan_id = store.put(PlanRecord(a_plan()))
    healthy = store.put(a_boot(plan_id=plan_id))
    failed = store.put(a_boot(plan_id=plan_id, outcome="failed"))
    store.put(a_boot(plan_id="another"))
    assert {r.id for r in store.find(BootRecord, plan_id=plan_id)} == {healthy, failed}
    assert [r.id for r in store.find(BootRecord, plan_id=plan_id, outcome="failed")] == [failed]
    assert [r.id for r in store.find(PlanRecord)] == [plan_id]
    assert store.find(FixRecord) == []
    assert [r.id for r in store.find(BootRecord, prefix=healthy[:6])] == [healthy]
    assert store.get_as(healthy[:8], BootRecord).document.plan_id == plan_id
    with pytest.raises(BadInput, match="is a boot, not a plan"):
        store.get_as(healthy, PlanRecord)


def test_every_document_reads_back_as_written():
    fix = FixRecord(
        "kv_cache_max_model_len",
        "0.32.0",
        "f" * 64,
        "kv_cache_too_small",
        "fp",
        {"max_model_len": 1},
        ("--max-model-len 1",),
        "vllm serve m",
        "plan said fits",
        "proven",
        "c" * 64,
        "h" * 64,
    )
    boot = a_boot(measured={"kv_tokens": Measured(1100, "tokens", "vLLM log line")}, notes=("a note",))
    for document in (PlanRecord(a_plan()), boot, fix):
        assert document_from_json(json.loads(json.dumps(document.to_json())), 1) == document


WRITER = r"""
import sys
from apron.records.documents import BootRecord, EngineIdentity, HardwareIdentity, LogRef
from apron.records.store import RecordStore
store = RecordStore(sys.argv[1])
i = int(sys.argv[2])
while True:
    # Records of a few KiB up to ~1 MiB, so a kill lands inside writes as well as between them.
    pad = "x" * ((i * 7919) % (1 << 20))
    store.put(BootRecord("t", str(i), "failed", "local", EngineIdentity(None), HardwareIdentity(None),
                         LogRef("0" * 64, 0), notes=(pad,)))
    store.put_blob(("blob %d " % i).encode() * ((i * 104729) % 50000 + 1))
    i += 1
"""


def test_killed_writer_leaves_only_whole_records(tmp_path):
    store_dir = tmp_path / "store"
    rng = random.Random(5)
    start = 0
    for _ in range(15):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_dir), str(start)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(0.25, 0.9))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        start += 1000
    store = RecordStore(store_dir)
    ids = store.ids()
    assert len(ids) > 15, "the writer should have finished some records"
    assert store.verify() == []
    for rid in ids:
        assert store.get(rid).kind == "boot"
    # Debris of interrupted writes stays in tmp/, never under records/ or blobs/.
    assert all(p.parent.name != "tmp" for p in (store_dir / "records").rglob("*.json"))


def test_compare_predicted_beside_measured():
    plan = a_plan(quantities={"available_kv_bytes": 10 * 2**30, "kv_tokens": 1000, "cudagraph_bytes": None})
    boot = a_boot(
        measured={
            "available_kv_bytes": Measured(9 * 2**30, "bytes", "log"),
            "kv_tokens": Measured(1250, "tokens", "log"),
        }
    )
    table = compare(plan, boot)
    rows = {r["name"]: r for r in table["rows"]}
    assert rows["available_kv_bytes"]["error_gib"] == 1.0
    assert rows["available_kv_bytes"]["error_pct"] == pytest.approx(11.11, abs=0.01)
    assert rows["kv_tokens"]["error"] == -250 and rows["kv_tokens"]["error_pct"] == -20.0
    assert "cudagraph_bytes" not in rows  # neither predicted nor measured
    assert table["warnings"] == []
    cpu = compare(plan, a_boot(hardware=HardwareIdentity("cpu", cpu_model="AMD EPYC"), measured=boot.measured))
    assert "not comparable" in cpu["warnings"][0]


def test_records_cli_list_show_compare(tmp_path):
    store = RecordStore(tmp_path)
    plan = a_plan(quantities={"kv_tokens": 1000})
    plan_id = store.put(PlanRecord(plan))
    boot_id = store.put(
        a_boot(
            plan_id=plan_id,
            hardware=HardwareIdentity("cpu", cpu_model="X"),
            command={"argv": ["vllm", "serve", "/m"], "shell": "vllm serve /m"},
            measured={"kv_tokens": Measured(1100, "tokens", "log")},
            log=LogRef(store.put_blob(b"hello log\n"), 10),
        )
    )

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "apron.cli", *args, "--records", str(tmp_path)], capture_output=True, text=True
        )

    listed = run("records", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["kind"] for r in json.loads(listed.stdout)] == ["plan", "boot"]
    assert boot_id[:12] in run("records", "list").stdout
    shown = json.loads(run("records", "show", boot_id[:8], "--json").stdout)
    assert shown["id"] == boot_id and shown["measured"]["kv_tokens"]["label"] == "measured"
    assert run("records", "show", boot_id, "--log").stdout == "hello log\n"
    table = json.loads(run("records", "compare", boot_id, "--json").stdout)
    row = next(r for r in table["rows"] if r["name"] == "kv_tokens")
    assert row["predicted"] == 1000 and row["measured"] == 1100
    text = run("records", "compare", boot_id).stdout
    assert "kv_tokens" in text and "-9.1%" in text
    bad = run("records", "compare", plan_id)
    assert bad.returncode == 2 and "not a boot" in bad.stderr
