"""Host fault, harness fault or the model's failure - on real error text: the failures in
tests/fixtures/boots-training.json, the CPU engine's own refusals, and NCCL/Xid/ENOSPC lines as
drivers and libraries print them. The boot asks the one classifier (apron.rules.failure): the same
decisive error `apron diagnose` finds."""

from __future__ import annotations

import json

import pytest

from apron.measure.logparse import parse_file, parse_log
from apron.rules.failure import classify_failure
from apron.rules.fingerprint import fingerprint
from conftest import FIXTURES

HOST, HARNESS, MODEL = "host", "harness", "model"


def classify(stage, message="", errors=(), log_tail="", ssh_exit_code=None):
    """The engine's lines as a log: what the boot hands the classifier."""
    log = parse_log("\n".join([*errors, log_tail])) if errors or log_tail else None
    return classify_failure(stage, message, log, ssh_exit_code=ssh_exit_code)


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
    fault = classify_failure("start", "the engine exited with status 1 before /health answered", parse_file(path))
    assert fault.kind == MODEL, fault
    assert "initialization failed" not in fault.evidence and "failed to start" not in fault.evidence


def test_the_fault_is_the_fingerprints_decision():
    """The boot never re-classifies: its evidence is the decisive error diagnose finds."""
    parsed = parse_file(FIXTURES / "logs" / "d_kv_too_small_mp_1048575.log")
    found = fingerprint(parsed)
    fault = classify_failure("start", "exited", parsed)
    assert fault.evidence == f"{found.exception}: {found.message}" and found.family == "kv_cache_too_small"


def test_a_log_with_only_wrappers_is_the_models_with_its_cause_missing():
    log = parse_log(
        "(EngineCore_DP0 pid=70) ERROR 11-02 10:01:01 [core.py:708] RuntimeError: Engine core initialization "
        "failed. See root cause above. Failed core proc(s): {}\n"
    )
    fault = classify_failure("start", "exited", log)
    assert fault.kind == MODEL and "cause scrolled out" in fault.reason


# Lines as NCCL, the NVIDIA driver (dmesg / nvidia-smi), CUDA and the C library print them.
HOST_LINES = {
    "NCCL or NVSwitch failed (start-up or collective)": [
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "node-3:1234:1301 [2] transport/nvls.cc:161 NCCL WARN Cuda failure 'system not yet initialized'",
        "RuntimeError: CUDA error: system not yet initialized",
        "ncclInternalError: Internal check failed.",
    ],
    "the GPU reported a hardware error (ECC, Xid, fell off the bus)": [
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:86:00): 48, pid=2211, An uncorrectable double bit error (DBE) has been detected",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    ],
    "no usable CUDA device or driver on the machine": [
        "RuntimeError: No CUDA GPUs are available",
        "RuntimeError: Failed to infer device type",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    ],
    "the disk is full": [
        "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/tmp123'",
        "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
        'message: "No space left on device" })',
    ],
    "no machine with the requested GPU could be rented, or it was taken away": [
        "sky.exceptions.ResourcesUnavailableError: Failed to provision all possible launchable resources.",
        "QueryError: There are no longer any instances available with the requested specifications.",
    ],
}


@pytest.mark.parametrize("reason, line", [(r, text) for r, lines in HOST_LINES.items() for text in lines])
def test_host_fault_lines(reason, line):
    fault = classify("start", errors=[line])
    assert (fault.kind, fault.reason) == (HOST, reason)
    assert line.strip().endswith(fault.evidence.split(": ", 1)[-1])


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
    assert (
        classify("download", "DOWNLOAD_INCOMPLETE: size tokenizer.model 587404!=130").reason
        == "the weights download was incomplete"
    )
    assert (
        classify("prepare", "no vllm executable (looked for vllm on PATH)").reason
        == "the engine is not installed where the boot ran"
    )
    assert classify("start", errors=["OSError: [Errno 98] Address already in use"]).kind == HARNESS
    assert classify("after_healthy", "KeyError: 'choices'").kind == HARNESS


def test_stall_is_the_models():
    fault = classify("health", "the engine did not answer /health within 1800 s")
    assert (fault.kind, fault.reason) == (MODEL, "engine did not become healthy")
