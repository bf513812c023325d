"""`apron boot` end to end: the real vLLM CPU engine through `local` and through `ssh://` (a real sshd on
loopback), records whose measured values come from the engine's own log, and teardown in every
outcome. The runner's plumbing (a 50 MB log over ssh, host-fault retries, Ctrl-C) is exercised with
tests/fake_vllm.py, a stand-in that prints the real engine's log.

The engine tests boot tests/fixtures/plans/tiny-gemma2-L4-vllm-0.32.0.json: `apron plan` of a tiny
Gemma2 (scripts/make_tiny_model.py --arch gemma2) for an L4 on vLLM 0.32.0, booted on this CPU with
--weights pointing at the tiny model built in the test and the "cpu" engine profile: a GPU plan on a CPU,
whose numbers are not comparable. The boots of plans made for the CPU platform itself (healthy, refused,
fixed) are the README's walkthrough (tests/test_readme_walkthrough.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from apron.boot.answers import AnswerSettings
from apron.boot.command import build_command, parse_extra_args
from apron.boot.fix import boot_with_fix, replan_from_plan
from apron.boot.hosts import SshSettings
from apron.boot.runner import boot
from apron.boot.session import BootOptions
from apron.boot.targets import parse_target
from apron.errors import BadInput
from apron.measure.logparse import parse_log
from apron.plan.result import ModelIdentity
from apron.records.documents import BootRecord, FixRecord, PlanRecord, compare
from apron.records.saved import saved_plan
from apron.records.store import RecordStore
from apron.rules import fingerprint
from conftest import FIXTURES
from plan_helpers import base_plan

PLAN_FILE = FIXTURES / "plans" / "tiny-gemma2-L4-vllm-0.32.0.json"
ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30


# --- pieces ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kind, address",
    [
        ("local", "local", "local"),
        ("ssh://ubuntu@10.0.0.5", "ssh", "ssh://ubuntu@10.0.0.5"),
        ("ssh://me@gpu-box:2222", "ssh", "ssh://me@gpu-box:2222"),
        ("ssh://host", "ssh", "ssh://host"),
        ("sky", "sky", "sky"),
        ("sky:aws", "sky", "sky:aws"),
    ],
)
def test_targets(text, kind, address):
    spec = parse_target(text)
    assert (spec.kind, spec.address) == (kind, address)


@pytest.mark.parametrize("text", ["gpu", "ssh://", "ssh://a@b:0", "ssh://a@b:99999", "sky:mars", "http://x"])
def test_bad_targets(text):
    with pytest.raises(BadInput):
        parse_target(text)


def test_command_is_the_plans_plus_host_port_name_profile_and_extras():
    command = build_command(
        "vllm serve org/m --revision abc --max-model-len 512 --enforce-eager",
        vllm="/v/bin/vllm",
        model_path="/w/m",
        port=8123,
        served_model_name="org/m",
        profile="cpu",
        extra_args=parse_extra_args("--kv-cache-memory-bytes 1000000"),
        log_level="debug",
        run_dir="/w/run",
    )
    assert command.argv == (
        "/v/bin/vllm",
        "serve",
        "/w/m",
        "--max-model-len",
        "512",
        "--enforce-eager",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--served-model-name",
        "org/m",
        "--kv-cache-memory-bytes",
        str(64 * 2**20),
        "--distributed-executor-backend",
        "uni",
        "--kv-cache-memory-bytes",
        "1000000",
    )  # the user's extra comes last and wins
    assert command.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and command.env["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert command.env["TMPDIR"] == "/w/run/tmp"
    assert command.shell().startswith("DO_NOT_TRACK=1 ") and "/v/bin/vllm serve /w/m" in command.shell()
    with pytest.raises(BadInput):
        build_command("python x.py", vllm="v", model_path="m", port=1, served_model_name="m")
    with pytest.raises(BadInput):
        build_command("vllm serve m", vllm="v", model_path="m", port=1, served_model_name="m", log_level="TRACE")


def test_plan_inputs(tmp_path):
    """One loader for saved plans: a plan file, a record file, a record id; a SOURCE is none of them."""
    store = RecordStore(tmp_path / "records")
    plan = base_plan()
    assert saved_plan(str(PLAN_FILE), store) == plan
    record = tmp_path / "plan-record.json"
    record.write_text(json.dumps(PlanRecord(plan).to_json()))
    assert saved_plan(str(record), store) == plan
    rid = store.put(PlanRecord(plan))
    assert saved_plan(rid[:12], store) == plan
    assert saved_plan("Qwen/Qwen3-8B", store) is None  # a SOURCE: planned first
    assert saved_plan(str(FIXTURES / "checkpoints" / "Qwen--Qwen3-8B.json.gz"), store) is None  # a snapshot
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "apron.plan/1", "model": {}}))
    with pytest.raises(BadInput, match="damaged apron.plan/1 document"):
        saved_plan(str(bad), store)
    with pytest.raises(BadInput, match="no record abcdef12"):
        saved_plan("abcdef12", store)


def run_cli(*args, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["boot", str(PLAN_FILE), "--on", "mars"], "a target is local"),
        (["boot", "some/model", "--on", "local"], "give --gpu"),
        (["boot", str(PLAN_FILE), "--on", "local", "--env", "NOEQUALS"], "KEY=VALUE"),
        (["boot", str(PLAN_FILE), "--on", "local", "--extra-args", "'unterminated"], "--extra-args"),
        (["boot", str(PLAN_FILE), "--on", "local", "--weights", "/nonexistent-folder"], "no config.json"),
    ],
)
def test_boot_bad_input_is_one_line_and_exit_2(args, message, apron_home, tmp_path):
    result = run_cli(*args, "--records", str(tmp_path / "rec"), "--vllm", sys.executable)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3


# --- the runner's plumbing, with the stand-in engine -----------------------------------------------------


@pytest.fixture
def fake_vllm(tmp_path) -> str:
    path = tmp_path / "bin" / "vllm"
    path.parent.mkdir()
    path.write_text(f'#!/bin/sh\nexec {sys.executable} {ROOT / "tests" / "fake_vllm.py"} "$@"\n')
    path.chmod(0o755)
    return str(path)


def tiny_weights(tmp_path) -> Path:
    """A folder vLLM would take as a checkpoint (the stand-in engine never reads it)."""
    folder = tmp_path / "weights" / "tiny-gemma2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"architectures": ["Gemma2ForCausalLM"]}')
    return folder


def test_ssh_runner_streams_a_50mb_log_without_deadlock(ssh_server, fake_vllm, tmp_path, apron_home):
    store = RecordStore(tmp_path / "records")
    options = BootOptions(
        vllm=fake_vllm,
        weights=str(tiny_weights(tmp_path)),
        profile="cpu",
        extra_env={"FAKE_VLLM_LOG_MB": "50"},
        workdir=str(tmp_path / "remote"),
        health_timeout_seconds=300,
    )
    started = time.monotonic()
    result = boot(
        base_plan(),
        [parse_target(ssh_server.target)],
        options,
        store,
        ssh=SshSettings(str(ssh_server.user_key), str(ssh_server.known_hosts)),
    )
    elapsed = time.monotonic() - started
    record = result.record.to_json()
    assert record["outcome"] == "healthy", record["fault"]
    assert record["log"]["bytes"] > 50 * 2**20
    log = store.get_blob(record["log"]["sha256"])
    assert log.endswith(b"Application startup complete.\n")
    assert record["measured"]["available_kv_bytes"]["value"] == round(0.06 * GIB)
    assert record["target"] == ssh_server.target
    assert not (tmp_path / "remote" / "boots").exists() or not any((tmp_path / "remote" / "boots").iterdir())
    assert elapsed < 240


def test_host_fault_retries_on_the_next_target_and_is_not_held_against_the_model(
    ssh_server, fake_vllm, tmp_path, apron_home
):
    store = RecordStore(tmp_path / "records")
    closed = f"ssh://{ssh_server.user}@127.0.0.1:1"  # nothing listens on port 1: the machine "never started"
    options = BootOptions(
        vllm=fake_vllm, weights=str(tiny_weights(tmp_path)), workdir=str(tmp_path / "remote"), retries=1
    )
    result = boot(
        base_plan(),
        [parse_target(closed), parse_target(ssh_server.target)],
        options,
        store,
        ssh=SshSettings(str(ssh_server.user_key), str(ssh_server.known_hosts)),
    )
    record = result.record.to_json()
    assert record["outcome"] == "healthy" and record["target"] == ssh_server.target
    assert [a["fault"]["kind"] for a in record["attempts"]] == ["host"]
    assert record["attempts"][0]["target"] == closed
    # Only host faults everywhere: the record says so and nothing counts against the model.
    only_closed = boot(
        base_plan(),
        [parse_target(closed)],
        options,
        store,
        ssh=SshSettings(str(ssh_server.user_key), str(ssh_server.known_hosts)),
    ).record.to_json()
    assert only_closed["outcome"] == "host_fault" and only_closed["counts_against_model"] is False
    assert only_closed["fault"]["reason"] == "machine unreachable" and only_closed["measured"] == {}
    assert len(only_closed["attempts"]) == 1


def test_engine_refusal_and_missing_engine(fake_vllm, tmp_path, apron_home):
    store = RecordStore(tmp_path / "records")
    plan = base_plan()
    weights = str(tiny_weights(tmp_path))
    refused = boot(
        plan,
        [parse_target("local")],
        BootOptions(vllm=fake_vllm, weights=weights, extra_env={"FAKE_VLLM_MODE": "fail"}),
        store,
    ).record.to_json()
    assert refused["outcome"] == "failed" and refused["counts_against_model"] is True
    assert refused["fault"]["kind"] == "model"
    assert refused["fault"]["evidence"].startswith("ValueError: To serve at least one request")
    missing = boot(
        plan, [parse_target("local")], BootOptions(vllm=str(tmp_path / "no-vllm"), weights=weights), store
    ).record.to_json()
    assert (
        missing["outcome"] == "harness_fault"
        and missing["fault"]["reason"] == "the engine is not installed where the boot ran"
    )


class StoreThatKeepsLogs(RecordStore):
    """The real store, except that reading a log back from it fails the test: the --fix loop must read
    the log the boot handed along, not fetch it again."""

    def get_blob(self, sha256: str) -> bytes:
        raise AssertionError(f"the fix loop read blob {sha256[:12]} back from the store")


def test_the_fix_loop_reads_the_log_handed_with_the_boot_not_the_store(fake_vllm, tmp_path, apron_home, monkeypatch):
    """A refused boot (the stand-in prints the real engine's KV-too-small refusal), corrected once and
    refused again: the fingerprint and the fix record come from the parsed log the boot returned, which
    is the log the store keeps."""
    from apron.checkpoint.example import TinySpec, write_tiny_model

    monkeypatch.chdir(tmp_path)  # the plan's source is the local folder tiny-gemma2, re-planned after the fix
    weights = write_tiny_model(tmp_path / "tiny-gemma2", TinySpec(family="gemma2")).folder
    options = BootOptions(vllm=fake_vllm, weights=str(weights), extra_env={"FAKE_VLLM_MODE": "fail"})
    store = StoreThatKeepsLogs(tmp_path / "records")
    answers = AnswerSettings(suite="none", serve_test=False)
    outcome = boot_with_fix(
        base_plan(), [parse_target("local")], options, store, answers, replan_from_plan, max_attempts=1
    )
    failed, corrected = outcome.boots
    assert failed.log is not None and failed.record.log is not None
    kept = RecordStore(tmp_path / "records").get_blob(failed.record.log.sha256)
    assert failed.log.text.encode() == kept and failed.log.parsed == parse_log(kept.decode())
    fix = RecordStore(tmp_path / "records").get_as(outcome.fixes[-1], FixRecord).document
    found = fingerprint(kept.decode(), engine_version="0.32.0")
    assert found is not None and (fix.fingerprint, fix.family) == (found.id, found.family)
    assert fix.rule == "kv_cache_max_model_len" and fix.corrected_flags == ("--max-model-len 1792",)
    assert "--max-model-len 2048" in fix.could_have_known  # read from the log's non-default args
    assert (fix.failed_boot, fix.corrected_boot, fix.status) == (failed.record_id, corrected.record_id, "hypothesis")
    assert outcome.stopped_because == "still failing after 1 corrected boots"


def test_ctrl_c_stops_the_engine_and_tears_down(fake_vllm, tmp_path, apron_home):
    """SIGINT while the engine starts: the engine's whole process group is gone afterwards."""
    workdir = tmp_path / "work"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "apron.cli",
            "boot",
            str(PLAN_FILE),
            "--on",
            "local",
            "--vllm",
            fake_vllm,
            "--weights",
            str(tiny_weights(tmp_path)),
            "--env",
            "FAKE_VLLM_MODE=hang",
            "--workdir",
            str(workdir),
            "--records",
            str(tmp_path / "rec"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pid_files = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not pid_files:
        pid_files = [p for p in workdir.glob("boots/*/engine.pid") if p.read_text().strip()]
        time.sleep(0.2)
    assert pid_files, proc.stderr.read().decode() if proc.poll() is not None else "no engine started"
    pgid = int(pid_files[0].read_text())
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err.decode()
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
    assert not any((workdir / "boots").iterdir())  # the run folder is removed too


# --- the real engine -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_gemma2(tiny_models) -> Path:
    return tiny_models("tiny-gemma2", "--arch", "gemma2")


def assert_measured_from_the_cpu_log(record: dict, store: RecordStore) -> None:
    assert record["outcome"] == "healthy", record["fault"]
    measured = record["measured"]
    # "Explicitly set (0.06/X) GiB for KV cache": the cpu profile's 64 MiB, as vLLM prints it.
    assert measured["available_kv_bytes"]["value"] == round(0.06 * GIB)
    assert measured["available_kv_bytes"]["label"] == "measured"
    assert "Explicitly set (0.06/" in measured["available_kv_bytes"]["basis"]
    assert measured["kv_tokens"]["value"] > 0 and measured["max_concurrency"]["value"] > 0
    assert "weights_bytes_per_gpu" not in measured  # the CPU build does not print it: absent, not guessed
    log = store.get_blob(record["log"]["sha256"]).decode()
    assert "CPU KV cache size:" in log and len(log.encode()) == record["log"]["bytes"]
    assert record["engine"]["version"].startswith("0.32.0") and record["engine"]["packages_sha256"]
    assert record["hardware"]["platform"] == "cpu" and record["hardware"]["cpu_cores"] >= 1
    assert record["command"]["argv"][1] == "serve" and "--kv-cache-memory-bytes" in record["command"]["argv"]
    assert record["command"]["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    timings = record["timings"]
    assert timings["engine_start_seconds"] > 0 and timings["cold_start_seconds"] >= timings["engine_start_seconds"]
    table = compare(store.get_as(record["plan_id"], PlanRecord).document.plan, BootRecord.from_json(record))
    rows = {r["name"]: r for r in table["rows"]}
    assert rows["available_kv_bytes"]["predicted"] is not None and rows["available_kv_bytes"]["measured"] is not None
    assert any("CPU" in w for w in table["warnings"])


def assert_no_engine_left(record: dict) -> None:
    argv = record["command"]["argv"]
    needle = f"--port\0{argv[argv.index('--port') + 1]}\0".encode()
    left = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            data = cmdline.read_bytes()
        except OSError:
            continue
        if b"vllm" in data and needle in data:
            left.append(data.replace(b"\0", b" ")[:200])
    assert not left


@pytest.mark.engine
def test_boot_ssh_real_engine_through_the_cli(tiny_gemma2, ssh_server, tmp_path, apron_home, boot_pool):
    from engine_env import engine_lock, shared_vllm_cache, vllm_venv

    records = tmp_path / "records"
    with engine_lock():
        result = run_cli(
            "boot",
            str(PLAN_FILE),
            "--on",
            ssh_server.target,
            *ssh_server.ssh_args(),
            "--venv",
            str(vllm_venv()),
            "--weights",
            str(tiny_gemma2),
            "--profile",
            "cpu",
            "--env",
            f"VLLM_CACHE_ROOT={shared_vllm_cache()}",
            "--suite",
            "short",
            "--num-prompts",
            "8",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--workdir",
            str(tmp_path / "remote"),
            "--records",
            str(records),
            "--json",
            env={"APRON_PROGRESS": "1"},
        )
    boot_pool.add(RecordStore(records))
    # Random weights: the engine boots, answers with tokens and serves, but the short questions fail
    # honestly, so the boot exits 1 naming what it missed.
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith("apron: error: booted, but not answered:")
    document = json.loads(result.stdout)
    store = RecordStore(records)
    assert store.get_as(document["id"], BootRecord).document.outcome == "healthy"
    verdicts = document["after_healthy"]["verdicts"]
    assert verdicts == {"booted": True, "responded": True, "answered": False, "served": True}
    assert [c["status"] for c in document["answers"]["checks"]] == ["fail", "fail", "fail"]
    figures = document["serving"]["figures"]  # vllm bench serve ran on the target, over ssh
    assert figures["completed"] == 8 and figures["failed"] == 0
    assert figures["ttft"]["p99_seconds"] >= figures["ttft"]["p50_seconds"] > 0
    assert_measured_from_the_cpu_log(document, store)
    assert document["target"] == ssh_server.target
    assert document["model_path"].startswith(str(tmp_path / "remote" / "boots"))  # copied over ssh
    assert "engine: " in result.stderr and "healthy after" in result.stderr  # progress on stderr
    assert not any((tmp_path / "remote" / "boots").iterdir())
    assert_no_engine_left(document)
    compared = run_cli("records", "compare", document["id"][:12], "--records", str(records))
    assert compared.returncode == 0 and "available_kv_bytes" in compared.stdout


@pytest.mark.engine
def test_boot_records_a_real_engine_refusal(tiny_gemma2, tmp_path, apron_home, boot_pool):
    """vLLM's own validation refuses a max_model_len past the model's: a model failure, with its words."""
    from engine_env import engine_lock, shared_vllm_cache, vllm_venv

    records = tmp_path / "records"
    with engine_lock():
        result = run_cli(
            "boot",
            str(PLAN_FILE),
            "--on",
            "local",
            "--venv",
            str(vllm_venv()),
            "--weights",
            str(tiny_gemma2),
            "--profile",
            "cpu",
            "--extra-args",
            "--max-model-len 999999",
            "--env",
            f"VLLM_CACHE_ROOT={shared_vllm_cache()}",
            "--records",
            str(records),
            "--json",
        )
    boot_pool.add(RecordStore(records))
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["outcome"] == "failed" and document["fault"]["kind"] == "model"
    assert (
        "User-specified max_model_len (999999) is greater than the derived max_model_len"
        in document["fault"]["evidence"]
    )
    assert result.stderr.strip().splitlines()[-1].startswith("apron: error: boot failed:")


def test_hub_weights_are_downloaded_on_the_target_at_the_pinned_revision(hub, fake_vllm, tmp_path):
    """A Hub plan: snapshot_download on the target (here: local, against the loopback Hub) at the plan's
    revision, then the engine gets the folder and no --revision."""
    python = Path(fake_vllm).parent / "python"  # as in an engine venv: a Python with huggingface_hub
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    repo = hub.add_repo(
        "org/tiny",
        {
            "config.json": b'{"architectures": ["Gemma2ForCausalLM"]}',
            "model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
        },
    )
    model = ModelIdentity("org/tiny", "org/tiny", repo.sha, "Gemma2ForCausalLM", "gemma2", "hub")
    plan = replace(base_plan(), model=model, command=f"vllm serve org/tiny --revision {repo.sha} --max-model-len 512")
    store = RecordStore(tmp_path / "records")
    options = BootOptions(vllm=fake_vllm, workdir=str(tmp_path / "work"))
    record = boot(plan, [parse_target("local")], options, store).record.to_json()
    assert record["outcome"] == "healthy", record["fault"]
    folder = Path(record["model_path"])
    assert folder == tmp_path / "work" / "models" / f"org--tiny@{repo.sha}"
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert "--revision" not in record["command"]["argv"] and record["command"]["argv"][2] == str(folder)
    assert record["command"]["argv"][record["command"]["argv"].index("--served-model-name") + 1] == "org/tiny"
    assert record["timings"]["weights_download_seconds"] > 0
    plan = replace(plan, model=replace(model, source="org/missing", repo_id="org/missing"))
    missing = boot(plan, [parse_target("local")], options, store).record.to_json()
    assert missing["outcome"] == "harness_fault" and missing["fault"]["stage"] == "download"


def test_a_source_is_planned_first_then_booted(fake_vllm, tmp_path, apron_home_with_facts):
    """SOURCE instead of a plan: `apron boot` plans it (apron.plan.planner.make_plan), stores the plan record
    and links it from the boot record."""
    from conftest import materialize

    folder = materialize("Qwen/Qwen3-0.6B", tmp_path / "Qwen3-0.6B")
    records = tmp_path / "records"
    result = run_cli(
        "boot",
        str(folder),
        "--gpu",
        "L4",
        "--engine",
        "vllm==0.32.0",
        "--max-model-len",
        "4096",
        "--on",
        "local",
        "--vllm",
        fake_vllm,
        "--workdir",
        str(tmp_path / "work"),
        "--suite",
        "none",
        "--no-serve-test",
        "--records",
        str(records),
        "--json",
        env={"APRON_PROGRESS": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads(result.stdout)
    plan = RecordStore(records).get_as(document["plan_id"], PlanRecord).document.plan
    assert plan.model.source == str(folder) and plan.engine_version == "0.32.0"
    argv = document["command"]["argv"]
    assert argv[2] == str(folder) and argv[3:5] == ["--max-model-len", "4096"]
    assert re.search(r"^apron: \[ *\d+\.\d s\] planning ", result.stderr, re.M), result.stderr
