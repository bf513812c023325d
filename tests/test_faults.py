"""Host fault, harness fault or the model's failure - on real error text: the failures in
tests/fixtures/boots-training.json, the CPU engine's own refusals, and NCCL/Xid/ENOSPC lines as
drivers and libraries print them."""

from __future__ import annotations

import json

import pytest

from apron.boot.faults import HARNESS, HOST, MODEL, classify, root_error
from apron.measure.logparse import parse_file
from conftest import FIXTURES

FAILURES = [
    b
    for b in json.loads((FIXTURES / "boots-training.json").read_text())["boots"]
    if b.get("failure") and b["failure"].get("last_error")
]


def expected_kind(failure: dict) -> str:
    """The fixture's fingerprint, in this project's terms. Its harness recorded a rented machine that
    never came up ("no longer any instances available") as a harness exception; the brief counts a
    machine that never starts as the host's fault, so it is retried elsewhere, not blamed on anyone."""
    fingerprint = failure["fingerprint"][0]
    if "no longer any instances available" in failure["last_error"]:
        return HOST
    return {"harness": HARNESS, "boot": MODEL}[fingerprint.split(":")[0]]


@pytest.mark.parametrize("boot", FAILURES, ids=lambda b: f"{b['model_id']}:{b['failure']['fingerprint'][0]}")
def test_training_fixture_failures(boot):
    failure = boot["failure"]
    stage = (
        "download"
        if "DOWNLOAD" in failure["last_error"]
        else "connect"
        if "QueryError" in failure["last_error"]
        else "start"
    )
    fault = classify(stage, errors=[failure["last_error"]])
    assert fault.kind == expected_kind(failure), fault


def test_training_fixture_has_each_kind():
    assert {expected_kind(b["failure"]) for b in FAILURES} == {HOST, HARNESS, MODEL}


@pytest.mark.parametrize(
    "name",
    [
        "d_kv_too_small_fast_1048575",
        "c_auto_kv_util_004_refused",
        "e_max_model_len_gt_derived",
        "f_unsupported_architecture",
        "g_gemma2_float16",
        "g_no_weight_files",
        "tool_parser_refused",
    ],
)
def test_cpu_engine_refusals_are_the_models(name):
    path = FIXTURES / "logs" / f"{name}.log"
    parsed = parse_file(path)
    text = path.read_text()
    fault = classify(
        "start",
        "the engine exited with status 1 before /health answered",
        parsed.errors or parsed.errors_after_shutdown,
        text[-20000:],
    )
    assert fault.kind == MODEL, fault
    assert "initialization failed" not in fault.evidence and "failed to start" not in fault.evidence


def test_root_error_skips_the_wrappers():
    errors = (
        "EngineCore failed to start.",
        "ValueError: To serve at least one request ...",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    )
    assert root_error(errors) == "ValueError: To serve at least one request ..."


# Lines as NCCL, the NVIDIA driver (dmesg / nvidia-smi), CUDA and the C library print them.
HOST_LINES = {
    "NCCL/NVSwitch failure at first collective": [
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "node-3:1234:1301 [2] transport/nvls.cc:161 NCCL WARN Cuda failure 'system not yet initialized'",
        "RuntimeError: CUDA error: system not yet initialized",
        "ncclInternalError: Internal check failed.",
    ],
    "ECC/Xid GPU error": [
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:86:00): 48, pid=2211, An uncorrectable double bit error (DBE) has been detected",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    ],
    "no CUDA device": [
        "RuntimeError: No CUDA GPUs are available",
        "RuntimeError: Failed to infer device type",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    ],
    "disk full": [
        "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/tmp123'",
        "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
        'message: "No space left on device" })',
    ],
    "machine never started": [
        "sky.exceptions.ResourcesUnavailableError: Failed to provision all possible launchable resources.",
        "QueryError: There are no longer any instances available with the requested specifications.",
    ],
}


@pytest.mark.parametrize("reason, line", [(r, text) for r, lines in HOST_LINES.items() for text in lines])
def test_host_fault_lines(reason, line):
    fault = classify("start", errors=[line])
    assert (fault.kind, fault.reason) == (HOST, reason)
    assert fault.evidence == line.strip()


def test_host_evidence_in_the_log_tail_beats_the_engine_exception():
    # NCCL writes its warning to stderr before the Python exception the engine raises.
    tail = "some INFO line\nnode:1:1 [0] misc/socket.cc:50 NCCL WARN socket connect failed\nRuntimeError: boom"
    assert classify("start", errors=["RuntimeError: boom"], log_tail=tail).kind == HOST


def test_lost_connection_is_the_hosts_only_from_the_harness():
    assert classify("start", "ssh: connect to host 10.0.0.5 port 22: Connection timed out").kind == HOST
    assert classify("start", "", ssh_exit_code=255).reason == "lost connection"
    assert classify("connect", "ssh: connect to host x port 22: Connection refused").reason == "machine unreachable"
    # An engine log that mentions a connection reset in passing is still the model's failure.
    fault = classify("start", "exited", errors=["ValueError: bad config"], log_tail="Connection reset by peer")
    assert fault.kind == MODEL


def test_harness_faults():
    assert classify("download", "DOWNLOAD_INCOMPLETE: size tokenizer.model 587404!=130").reason == "download incomplete"
    assert (
        classify("prepare", "no vllm executable (looked for vllm on PATH)").reason
        == "engine not installed on the target"
    )
    assert classify("start", errors=["OSError: [Errno 98] Address already in use"]).kind == HARNESS
    assert classify("after_healthy", "KeyError: 'choices'").kind == HARNESS


def test_stall_is_the_models():
    fault = classify("health", "the engine did not answer /health within 1800 s")
    assert (fault.kind, fault.reason) == (MODEL, "engine did not become healthy")
