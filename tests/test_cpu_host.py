"""apron.hardware.cpu reads the machine as vLLM's CPU worker does, from /sys and /proc or from the copy
APRON_HOST_ROOT names (tests/fake_host.py); apron.measure.machine reads a log's machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from apron.hardware import resolve_gpu
from apron.hardware.cpu import cpu_flags, first_cpu, node_memory
from apron.measure.logparse import parse_file, parse_log
from apron.measure.machine import cpu_machine_of
from conftest import FIXTURES
from fake_host import FakeHost, write_host

GIB = 2**30


def test_the_node_of_the_first_allowed_cpu_and_its_meminfo(tmp_path, monkeypatch):
    """cpu_worker.py binds to get_allowed_cpu_list()[0]'s node: CPU 3 on node 1 here, not node 0."""
    write_host(tmp_path, FakeHost(node_bytes=int(8.21 * GIB), node=1, num_cpus=4, first_allowed_cpu=3, flags=()))
    monkeypatch.setenv("APRON_HOST_ROOT", str(tmp_path))
    assert first_cpu() == 3
    node = node_memory()
    assert node.total_bytes == int(8.21 * GIB) // 1024 * 1024
    assert node.basis.startswith("NUMA node 1 MemTotal (") and str(tmp_path) in node.basis
    assert cpu_flags() == frozenset()
    gpu = resolve_gpu("cpu")
    assert (gpu.total_bytes, gpu.cpu_flags, gpu.is_cpu) == (node.total_bytes, frozenset(), True)


def test_a_cgroup_limit_below_the_node_wins(tmp_path, monkeypatch):
    """get_memory_node_info clamps the node's figures to the cgroup's memory.max."""
    write_host(tmp_path, FakeHost(node_bytes=32 * GIB, cgroup_limit_bytes=6 * GIB))
    monkeypatch.setenv("APRON_HOST_ROOT", str(tmp_path))
    node = node_memory()
    assert node.total_bytes == 6 * GIB and node.basis.startswith("the cgroup memory limit, below NUMA node 0")
    assert cpu_flags() == {"avx512_bf16"}


def test_no_per_node_meminfo_falls_back_to_the_machines(tmp_path, monkeypatch):
    """Systems without /sys/devices/system/node (many RISC-V boards): psutil's virtual_memory total."""
    write_host(tmp_path, FakeHost(node_bytes=4 * GIB, machine_bytes=12 * GIB, has_node_meminfo=False))
    monkeypatch.setenv("APRON_HOST_ROOT", str(tmp_path))
    node = node_memory()
    assert node.total_bytes == 12 * GIB and node.basis == "the machine's MemTotal (no per-node meminfo)"


def test_an_unreadable_machine_is_bad_input_naming_the_flag(tmp_path):
    tmp_path.joinpath("empty").mkdir()
    env = {"APRON_HOST_ROOT": str(tmp_path / "empty"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", "Qwen/Qwen3-0.6B", "--gpu", "cpu"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "APRON_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "apron: error: --gpu cpu: this machine's memory could not be read; give --gpu-memory-bytes"
    ]


@pytest.mark.parametrize("family", ["llama", "mamba"])
def test_a_cpu_log_names_its_machine(family):
    """The example-tiny logs were made on a 23.54 GiB node of a CPU with AVX-512 BF16: every model's
    config pass says so ("Reset SSM cache type to float32 for accelerated GDN ...")."""
    machine = cpu_machine_of(parse_file(FIXTURES / "logs" / "example-tiny" / f"{family}.log"))
    assert machine is not None
    assert machine.node_bytes == round(23.54 * GIB) and machine.cpu_flags == {"avx512_bf16"}


def test_a_log_without_the_bf16_line_is_a_machine_without_it():
    text = (FIXTURES / "logs" / "example-tiny" / "mamba.log").read_text()
    kept = "\n".join(line for line in text.splitlines() if "Reset SSM cache type" not in line)
    machine = cpu_machine_of(parse_log(kept))
    assert machine is not None and machine.cpu_flags == frozenset()


def test_a_gpu_log_or_a_refusal_before_the_kv_line_names_no_machine():
    assert cpu_machine_of(parse_file(FIXTURES / "logs" / "g_missing_model_dir.log")) is None
    assert cpu_machine_of(parse_log("INFO 12-01 14:20:36 [gpu_worker.py:1] Memory profiling takes 1 s")) is None
