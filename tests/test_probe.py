"""`apron probe`: the allocator hook (measure/probe_hook.py) in a real PyTorch process, the matching of
live blocks to the planner's buffers (records/probe.py), the probe record and its table, and the request
checks. The real vLLM CPU engine with the hook is tests/test_probe_engine.py.

The hook tests run tests/fixtures/probe_toy/toyrunner.py - a plain-PyTorch runner whose profile_run has
a forward and a sampler part with tensors of known shapes - with the engine venv's Python (it has torch;
Apron's own venv does not need it) and the hook first on PYTHONPATH, exactly as a boot loads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apron.boot.probing import check_probe_request, parse_fetched, probe_env, probe_record
from apron.errors import BadInput
from apron.records.documents import BootRecord, EngineIdentity, HardwareIdentity, LogRef, ProbeRecord
from apron.records.probe import (
    CUDA_BLOCK_BYTES,
    Moment,
    PredictedBuffer,
    ProbeBlock,
    match_buffers,
    read_reading,
)
from apron.records.probe_view import render_probe
from apron.records.store import RecordStore
from conftest import FIXTURES
from plan_helpers import base_plan

ROOT = Path(__file__).resolve().parent.parent
TOY = FIXTURES / "probe_toy"
HOOK = ROOT / "src" / "apron" / "measure" / "probe_hook.py"
T, H, INTER, V, R = 2048, 64, 256, 1000, 128  # toyrunner's shapes


def run_toy(tmp_path: Path, scenario: str, functions: list[str] | None = None, code: str = "") -> tuple[dict, dict]:
    """The toy runner under the hook: (what the program printed, {file: JSON} the hook wrote)."""
    from engine_env import vllm_python

    hook_dir, chain_dir, out_dir = tmp_path / "hook", tmp_path / "chain", tmp_path / "out"
    hook_dir.mkdir(parents=True)
    chain_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_bytes(HOOK.read_bytes())
    # a sitecustomize further down the path (a venv's, Debian's): the hook must run it too
    (chain_dir / "sitecustomize.py").write_text("import builtins\nbuiltins.APRON_TEST_CHAINED = True\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(map(str, (hook_dir, chain_dir, TOY))),
        "APRON_PROBE_DIR": str(out_dir),
        "APRON_PROBE_FUNCTIONS": json.dumps(functions if functions is not None else ["toyrunner:Runner.profile_run"]),
    }
    done = subprocess.run(
        [vllm_python(), "-c", code or "import toyrunner; toyrunner.main()", scenario],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    files = (
        {p.name.split("-")[0]: json.loads(p.read_text()) for p in out_dir.glob("*.json")} if out_dir.exists() else {}
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), files


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory) -> tuple[dict, dict, Path]:
    tmp_path = tmp_path_factory.mktemp("toy")
    printed, files = run_toy(tmp_path, "plain")
    return printed, files, tmp_path


def test_hook_records_the_peak_and_every_live_block_of_the_first_call(plain_run):
    printed, files, tmp_path = plain_run
    reading = files["probe"]
    assert reading["status"] == "recorded" and reading["platform"] == "cpu", reading.get("error")
    assert reading["function"] == "toyrunner:Runner.profile_run"
    # The forward's peak: ids (int64), the embedding, gate_up, silu of its first half, the product.
    forward = 8 * T + 2 * T * H + 2 * T * 2 * INTER + 2 * T * INTER + 2 * T * INTER
    sampler = 2 * T * H + 4 * R * V + 4 * R * V  # the forward's result, the fp32 logits, the softmax
    phases = {p["name"]: p for p in reading["phases"]}
    assert phases["_dummy_run"]["peak_bytes"] == forward
    assert phases["_dummy_sampler_run"]["peak_bytes"] == sampler
    assert reading["peak_bytes"] == max(forward, sampler) and reading["peak_phase"] == "_dummy_run"
    assert reading["allocator_peak_bytes"] == reading["peak_bytes"]  # the profiler's own counter agrees
    blocks = phases["_dummy_run"]["blocks"]
    assert sum(b["bytes"] for b in blocks) == forward
    assert [(b["op"], b["shape"], b["dtype"]) for b in blocks[:3]] == [
        ("aten::linear", [T, 2 * INTER], "bfloat16"),
        ("aten::silu", [T, INTER], "bfloat16"),
        ("aten::mul", [T, INTER], "bfloat16"),
    ]
    assert ("aten::embedding", [T, H]) in [(b["op"], b.get("shape")) for b in blocks]
    # Recording changed nothing: the recorded first call equals the untouched second one; the phase
    # markers are gone from the runner; only one reading; the later sitecustomize still ran.
    assert printed["first"] == printed["second"]
    assert printed["instance_attributes"] == ["device", "down", "embed", "gate_up", "head"]
    assert len(list((tmp_path / "out").glob("probe-*.json"))) == 1
    assert printed["chained"] is True
    assert files["patched"]["functions"] == ["toyrunner:Runner.profile_run"]


def test_a_failure_inside_the_hook_is_reported_and_the_engine_goes_on(tmp_path):
    """A runner that claims CUDA on a machine without it: the hook's CUDA recording cannot start; the
    reading says so, and profile_run runs and returns as without the hook."""
    printed, files = run_toy(tmp_path, "cuda-on-cpu")
    assert files["probe"]["status"] == "failed" and "starting the recording" in files["probe"]["error"]
    assert printed["first"] == printed["second"]
    # the engine's own exception passes through untouched, and the reading notes it
    printed, files = run_toy(tmp_path / "raises", "raises")
    assert printed["raised"] == "the engine's own error"
    assert files["probe"]["raised"] == "ValueError: the engine's own error"


def test_without_targets_the_hook_does_nothing(tmp_path):
    code = (
        "import builtins, json, sys; print(json.dumps({'meta_path': [type(f).__name__ for f in sys.meta_path], "
        "'chained': getattr(builtins, 'APRON_TEST_CHAINED', False), 'torch': 'torch' in sys.modules}))"
    )
    printed, files = run_toy(tmp_path, "none", functions=[], code=code)
    assert files == {} and "_Finder" not in printed["meta_path"] and printed["torch"] is False
    assert printed["chained"] is True


# -- matching ---------------------------------------------------------------------------------------


def buffers(*items: tuple[str, tuple[int, ...], int]) -> tuple[PredictedBuffer, ...]:
    return tuple(PredictedBuffer(name, shape, size) for name, shape, size in items)


FORWARD = Moment(
    "forward pass",
    buffers(
        ("residual", (T, H), 2 * T * H),
        ("hidden states", (T, H), 2 * T * H),
        ("MLP gate_up output", (T, 2 * INTER), 4 * T * INTER),
        ("MLP activation output", (T, INTER), 2 * T * INTER),
    ),
)
SAMPLER = Moment("sampler", buffers(("logits (model dtype, padded vocabulary)", (R, V), 2 * R * V)))


def test_buffers_are_right_missing_or_extra_by_exact_size():
    blocks = [
        ProbeBlock(4 * T * INTER, op="aten::linear", shape=(T, 2 * INTER)),
        ProbeBlock(2 * T * INTER, op="aten::silu", shape=(T, INTER)),
        ProbeBlock(2 * T * H, op="aten::embedding", shape=(T, H)),
        ProbeBlock(8 * T, op="aten::arange"),
    ]
    match = match_buffers(blocks, [SAMPLER, FORWARD])
    assert match.moment == "forward pass" and match.considered == (
        ("sampler", 0),
        ("forward pass", match.matched_bytes),
    )
    assert [(b.op, b.buffer) for b in match.blocks] == [
        ("aten::linear", "MLP gate_up output"),
        ("aten::silu", "MLP activation output"),
        ("aten::embedding", "residual"),
        ("aten::arange", None),
    ]
    assert [(b.name, b.status) for b in match.predicted] == [
        ("residual", "right"),
        ("hidden states", "missing"),  # one [T, H] block for two [T, H] buffers
        ("MLP gate_up output", "right"),
        ("MLP activation output", "right"),
    ]
    assert match.unmatched_bytes == 8 * T
    # one byte off is not a match: sizes are exact; nor is a block of the same bytes and other elements
    assert match_buffers([ProbeBlock(4 * T * INTER + 1)], [FORWARD]).matched_bytes == 0
    int64_sort = ProbeBlock(4 * T * INTER, op="aten::sort", shape=(T * INTER // 2,), dtype="int64")
    assert match_buffers([int64_sort], [FORWARD]).matched_bytes == 0
    assert match_buffers([ProbeBlock(4 * T * INTER, shape=(2 * INTER, T))], [FORWARD]).matched_bytes == 4 * T * INTER


def test_cuda_blocks_match_at_the_allocators_rounding_and_names_break_ties():
    odd = Moment("sampler", buffers(("sampled rows' hidden states", (3, 100), 600)))
    assert match_buffers([ProbeBlock(1024)], [odd], CUDA_BLOCK_BYTES).matched_bytes == 1024
    assert match_buffers([ProbeBlock(1024)], [odd]).matched_bytes == 0
    same = [
        ProbeBlock(2 * T * H, frames=("vllm/model_executor/layers/layernorm.py:40 forward",)),
        ProbeBlock(2 * T * H, source="# File: qwen3.py:120 in forward, code: residual = hidden_states"),
    ]
    match = match_buffers(same, [Moment("m", buffers(("residual", (T, H), 2 * T * H)))])
    assert [b.buffer for b in match.blocks] == [None, "residual"]
    shaped = [ProbeBlock(2 * T * H, shape=(H, T)), ProbeBlock(2 * T * H, shape=(T, H))]
    assert [b.buffer for b in match_buffers(shaped, [Moment("m", buffers(("x", (T, H), 2 * T * H)))]).blocks] == [
        None,
        "x",
    ]


def test_a_damaged_reading_is_a_failed_one():
    assert read_reading({"schema": "apron.probe-reading/9"}).status == "failed"
    assert "damaged" in (read_reading({"schema": "apron.probe-reading/1", "peak_bytes": "x"}).error or "")
    assert parse_fetched("probe-1.json\t{bad\nnoise\npatched-1.json\t{}") == {
        "probe-1.json": {
            "unreadable": "probe-1.json: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        },
        "patched-1.json": {},
    }


# -- the record -------------------------------------------------------------------------------------


def boot_of(plan_id: str, outcome: str = "healthy") -> BootRecord:
    return BootRecord(
        created_at="2026-01-01T00:00:00Z",
        plan_id=plan_id,
        outcome=outcome,  # type: ignore[arg-type]
        target="local",
        engine=EngineIdentity("0.32.0"),
        hardware=HardwareIdentity("cpu"),
        log=LogRef("0" * 64, 0),
    )


def test_probe_record_from_a_reading_round_trips_and_renders_largest_first(plain_run, tmp_path):
    files = plain_run[1]
    plan = base_plan()  # the tiny Gemma2 plan: its forward moment is [2048, 128]-wide; the toy's is 64
    details = dict(plan.details)
    details["activation"] = {
        "peak": "forward pass",
        "moments": [
            {
                "name": m.name,
                "buffers": [{"name": b.name, "shape": list(b.shape), "bytes": b.num_bytes} for b in m.buffers],
            }
            for m in (FORWARD, SAMPLER)
        ],
    }
    from dataclasses import replace

    plan = replace(plan, details=details)
    record = probe_record("b" * 64, boot_of("p" * 64), plan, {f"{k}-1.json": v for k, v in files.items()})
    assert record.status == "recorded" and record.peak_phase == "_dummy_run"
    assert record.peak_bytes == record.allocator_peak_bytes and record.logged_peak_bytes is None
    peak = record.peak
    assert peak is not None and peak.moment == "forward pass"
    assert {b.buffer for b in peak.blocks if b.buffer} == {"MLP gate_up output", "MLP activation output", "residual"}
    store = RecordStore(tmp_path / "records")
    rid = store.put(record)
    again = store.get_as(rid, ProbeRecord).document
    assert again == record
    text = render_probe(rid, again)
    sizes = first_table_sizes(text)
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == 4 * T * INTER and sum(sizes) == record.peak_bytes
    assert "MLP gate_up output" in text and "unmatched" in text and "matched" in text


def first_table_sizes(text: str) -> list[int]:
    """The bytes column of the first block table (the peak's), as `render_probe` prints it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "allocated by" in line) + 1
    end = next(i for i, line in enumerate(lines) if "the plan's buffers" in line)
    return [int(line.split()[0].replace(",", "")) for line in lines[start:end]]


def test_probe_record_says_why_nothing_was_recorded():
    boot = boot_of("p" * 64, "failed")
    assert "could not be read back" in (probe_record("b" * 64, boot, base_plan(), None).error or "")
    patched = {"patched-7.json": {"status": "patched", "functions": ["m:C.profile_run"]}}
    record = probe_record("b" * 64, boot, base_plan(), patched)
    assert record.status == "not_run" and "never called it (the boot failed first)" in (record.error or "")
    refused = {"patch-error-7.json": {"status": "failed", "function": "m:C.profile_run", "error": "AttributeError: x"}}
    assert probe_record("b" * 64, boot, base_plan(), refused).status == "failed"


def test_the_cpu_engine_is_refused_a_probe_under_enforce_eager():
    plan = base_plan()  # planned with --enforce-eager
    with pytest.raises(BadInput, match="needs compilation on"):
        check_probe_request(plan, "cpu", ())
    check_probe_request(plan, "gpu", ())  # a GPU profiles in eager mode too
    env = probe_env("/run", ("m:C.profile_run",), {"PYTHONPATH": "/mine"})
    assert env["PYTHONPATH"] == "/run/probe:/mine" and json.loads(env["APRON_PROBE_FUNCTIONS"]) == ["m:C.profile_run"]


def test_probe_command_bad_input_is_one_line_and_exit_2(tmp_path, apron_home):
    plan_file = FIXTURES / "plans" / "tiny-gemma2-L4-vllm-0.32.0.json"
    result = subprocess.run(
        [sys.executable, "-m", "apron.cli", "probe", str(plan_file), "--on", "local", "--profile", "cpu"]
        + ["--vllm", sys.executable, "--records", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "needs compilation on" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


# -- the CUDA side, which no machine here can run -----------------------------------------------------


def documented_snapshot_keys() -> set[str]:
    """The keys torch.cuda.memory._snapshot documents (Snapshot, Segment, Block, Frame, TraceEntry), read
    from the engine venv's own torch source: the fake below may use no other."""
    from engine_env import vllm_python

    done = subprocess.run(
        [vllm_python(), "-c", "import torch.cuda.memory as m, inspect; print(inspect.getsource(m._snapshot))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    import re

    return set(re.findall(r"^\s+(\w+): ", done.stdout, re.MULTILINE))


class FakeCuda:
    """torch's CUDA surface as the hook uses it, over a snapshot in the documented format: one boundary that
    cannot run here (no GPU)."""

    def __init__(self, snapshot: dict, stats: list[dict], free: list[int], reserved: list[int]):
        self.snapshot, self.stats, self.free, self.reserved = snapshot, stats, free, reserved
        self.cuda = self
        self.memory = self

    def _snapshot(self, augment_with_fx_traces: bool = False) -> dict:
        return self.snapshot

    def _record_memory_history(self, **kwargs) -> None:
        pass

    def memory_stats(self) -> dict:
        return self.stats.pop(0)

    def mem_get_info(self) -> tuple[int, int]:
        return self.free.pop(0), 80 * 2**30

    def memory_reserved(self) -> int:
        return self.reserved.pop(0)

    def current_device(self) -> int:
        return 0


def frame(name: str, line: int = 1, path: str = "vllm/v1/worker/gpu/model_runner.py") -> dict:
    return {"filename": f"/venv/lib/python3.12/site-packages/{path}", "line": line, "name": name}


def test_the_cuda_recording_is_read_from_the_allocators_own_trace_and_segments(monkeypatch):
    from apron.measure import probe_hook

    monkeypatch.setattr(probe_hook, "_WRAPPED_NAMES", {"profile_run"})
    run, sampler = [frame("profile_run", 9)], frame("_dummy_sampler_run", 30)
    forward = frame("_dummy_run", 20)
    gate_up = [frame("forward", 7, "vllm/model_executor/layers/linear.py"), forward, *run]
    gate_up[0]["fx_original_trace"] = "File qwen3.py line 90\n    gate_up, _ = self.gate_up_proj(x)"
    trace = [
        {"action": "alloc", "addr": 1000, "size": 4 << 20, "stream": 0, "frames": gate_up},
        {"action": "alloc", "addr": 9000, "size": 2 << 20, "stream": 0, "frames": [forward, *run]},
        {"action": "free_requested", "addr": 1000, "size": 4 << 20, "stream": 0, "frames": []},
        {"action": "free_completed", "addr": 1000, "size": 4 << 20, "stream": 0, "frames": []},
        {"action": "alloc", "addr": 1000, "size": 1 << 20, "stream": 0, "frames": [sampler, *run]},
        {"action": "segment_alloc", "addr": 50000, "size": 32 << 20, "stream": 0, "frames": []},
        {"action": "free_requested", "addr": 77, "size": 512, "stream": 0, "frames": []},  # from before
    ]
    segment = {
        "address": 1000,
        "total_size": 20 << 20,
        "stream": 0,
        "segment_type": "large",
        "allocated_size": 1 << 20,
        "active_size": 1 << 20,
        "blocks": [
            {
                "size": 1 << 20,
                "requested_size": 1 << 20,
                "address": 1000,
                "state": "active_allocated",
                "frames": [sampler],
            },
            {"size": 19 << 20, "requested_size": 0, "address": 2000, "state": "inactive", "frames": []},
        ],
    }
    snapshot = {"segments": [segment], "device_traces": [trace]}
    used = {k for d in (snapshot, segment, *segment["blocks"], *trace, *gate_up) for k in d}
    assert used <= documented_snapshot_keys()
    fake = FakeCuda(
        snapshot,
        stats=[
            {"allocated_bytes.all.current": 5 << 30},
            {"allocated_bytes.all.current": 5 << 30, "allocated_bytes.all.peak": (5 << 30) + (6 << 20)},
        ],
        free=[70 << 30, 69 << 30],
        reserved=[(9 << 30) + (512 << 20), 10 << 30],
    )
    session = probe_hook._Session("m:GPUModelRunner.profile_run", None)
    session.platform = "cuda"
    session._before = probe_hook._cuda_state(fake)
    session._finish_cuda(fake)
    reading = read_reading({**session.reading, "status": "recorded"})
    assert reading.peak_bytes == 6 << 20 == reading.allocator_peak_bytes  # gate_up + the second block
    phases = {p.name: p for p in reading.phases}
    assert set(phases) == {"_dummy_run", "_dummy_sampler_run"} and reading.peak_phase == "_dummy_run"
    top = phases["_dummy_run"].blocks[0]
    assert top.num_bytes == 4 << 20 and top.source == "gate_up, _ = self.gate_up_proj(x)"
    assert top.frames[:2] == (
        "vllm/model_executor/layers/linear.py:7 forward",
        "vllm/v1/worker/gpu/model_runner.py:20 _dummy_run",
    )
    assert phases["_dummy_sampler_run"].peak_bytes == 3 << 20
    assert reading.retained_free_bytes == 19 << 20 and reading.segments[0].live[0].num_bytes == 1 << 20
    assert reading.non_torch_growth_bytes == (1 << 30) - (512 << 20)  # 1 GiB more used, 0.5 GiB more reserved
