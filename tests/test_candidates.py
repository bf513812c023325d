"""`--from FILE`: deployments proposed by other tools, one real file of each kind (written from each
format's documented schema, in tests/fixtures/candidates), read, planned and checked."""

from __future__ import annotations

import hashlib
import io
import json

import pytest

from apron.cli import main
from apron.plan.candidates import read_candidate
from conftest import FIXTURES

CANDIDATES = FIXTURES / "candidates"


def run(capsys, *args: str) -> tuple[int, dict | str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in args and out.strip() else out), err


def plan_from(capsys, name: str, *args: str) -> dict:
    code, doc, err = run(capsys, "plan", "--from", str(CANDIDATES / name), *args, "--json")
    assert code in (0, 1), err
    section = doc["candidate"]
    assert section["file"] == str(CANDIDATES / name)
    assert section["sha256"] == hashlib.sha256((CANDIDATES / name).read_bytes()).hexdigest()
    assert section["apron_agrees_it_fits"] == (doc["verdict"] == "fits")
    return doc


def test_a_vllm_serve_script(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "serve-llama-3.1-8b.sh", "--gpu", "4090")
    flags = doc["candidate"]["flags"]
    assert (
        doc["model"]["repo_id"] == "meta-llama/Llama-3.1-8B-Instruct" and doc["candidate"]["format"] == "vllm-command"
    )
    # 16k is vLLM's decimal kilo (utils/argparse_utils.py human_readable_int); --max_num_seqs is --max-num-seqs
    assert doc["settings"]["max_model_len"] == 16000 and doc["settings"]["max_num_seqs"] == 64
    assert doc["settings"]["gpu_memory_utilization"] == 0.95
    assert flags["carried"] == ["--enable-auto-tool-choice", "--tool-call-parser llama3_json"]
    assert "--tool-call-parser llama3_json" in doc["command"]
    assert flags["no_memory_effect"] == ["--host 0.0.0.0", "--port 8000"]
    assert flags["not_understood"] == ["--enable-prefix-caching"]
    assert doc["hardware"]["gpu"] == "NVIDIA GeForce RTX 4090"


def test_a_recipe(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "recipe-qwen3-32b.yaml")
    section = doc["candidate"]
    assert (section["format"], section["gpu"], section["gpu_count"], section["engine"]) == (
        "recipe",
        "H100",
        2,
        "0.33.0",
    )
    assert doc["engine"]["version"] == "0.33.0" and doc["hardware"]["count"] == 2
    assert doc["hardware"]["gpu"] == "NVIDIA H100 80GB HBM3" and doc["settings"]["max_model_len"] == 32768
    assert section["flags"]["not_understood"] == ["--no-enable-expert-parallel", "--async-scheduling"]
    assert "--reasoning-parser qwen3" in doc["flags"]


def test_a_skypilot_task(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "sky-gpt-oss-20b.yaml")
    section = doc["candidate"]
    # the first accelerator choice; envs substituted into run, SKYPILOT_NUM_GPUS_PER_NODE from the count
    assert (section["format"], section["gpu"], section["gpu_count"]) == ("skypilot", "L4", 1)
    assert section["model"] == "openai/gpt-oss-20b" and section["engine"] == "0.33.0"
    assert doc["settings"]["max_model_len"] == 32768 and doc["settings"]["tensor_parallel_size"] == 1
    assert section["flags"]["not_understood"] == ["--async-scheduling"]


def test_a_kubernetes_deployment(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "k8s-mistral-7b.yaml")
    section = doc["candidate"]
    assert (section["format"], section["gpu"], section["gpu_count"]) == ("kubernetes", "NVIDIA-L4", 1)
    assert section["engine"] == "0.32.0" and doc["engine"]["version"] == "0.32.0"  # the image tag
    assert doc["hardware"]["gpu"] == "NVIDIA L4"
    assert doc["settings"]["max_num_batched_tokens"] == 1024 and doc["settings"]["max_model_len"] == 16384
    assert section["flags"]["carried"] == ["--tokenizer-mode mistral"]
    assert section["flags"]["not_understood"] == ["--enable-chunked-prefill"]


def test_an_llm_d_decode_deployment(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "llmd-qwen3-8b-decode.yaml")
    section = doc["candidate"]
    # GKE's accelerator label in a node affinity; $(TP_SIZE) from the container's env; the sidecar is skipped
    assert (section["gpu"], section["gpu_count"]) == ("nvidia-h100-80gb", 2)
    assert doc["hardware"]["gpu"] == "NVIDIA H100 80GB HBM3" and doc["settings"]["tensor_parallel_size"] == 2
    assert section["engine"] is None  # llm-d's image tag is not a vLLM release
    assert "--block-size 64" in section["flags"]["not_understood"]
    assert any(f.startswith("--kv-transfer-config") for f in section["flags"]["not_understood"])


def test_stdin_and_command_line_settings_win(capsys, monkeypatch, apron_home_with_facts):
    text = (CANDIDATES / "serve-llama-3.1-8b.sh").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text)))
    code, doc, _ = run(capsys, "plan", "--from", "-", "--gpu", "L4", "--max-model-len", "8192", "--json")
    assert code in (0, 1)
    assert doc["candidate"]["file"] == "stdin" and doc["candidate"]["sha256"] == hashlib.sha256(text).hexdigest()
    assert doc["settings"]["max_model_len"] == 8192 and doc["settings"]["max_num_seqs"] == 64
    assert any("max_model_len=8192" in n for n in doc["candidate"]["notes"])


def test_the_card_lists_the_flags_apron_does_not_understand(capsys, apron_home_with_facts):
    code, text, _ = run(capsys, "plan", "--from", str(CANDIDATES / "recipe-qwen3-32b.yaml"))
    assert "candidate: " in text and "NOT understood" in text and "--async-scheduling" in text


@pytest.mark.parametrize(
    "content,message",
    [
        ("vllm serve Qwen/Qwen3-8B --max-model-len 4096\n", "names no GPU type"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {}\n", "no container runs vllm serve"),
        ("run: |\n  vllm serve $MODEL --port 8000\nresources: {accelerators: H100:1}\n", "unset variable $MODEL"),
        ("name: something\nitems: [1, 2]\n", "neither a vllm serve command line"),
        ("resources: {accelerators: H100:1}\nrun: |\n  python train.py\n", "no `vllm serve` command"),
        ("model: Qwen/Qwen3-8B\nhardware: {gpu: H100, count: two}\n", "not a whole number"),
        ("vllm serve Qwen/Qwen3-8B --kv-cache-dtype int3\n", "--kv-cache-dtype 'int3'"),
    ],
)
def test_bad_candidate_files_are_exit_2(content, message, tmp_path, capsys, apron_home_with_facts):
    path = tmp_path / ("candidate.yaml" if ":" in content.split("\n")[0] else "candidate.sh")
    path.write_text(content)
    code, out, err = run(capsys, "plan", "--from", str(path))
    assert code == 2 and out == "" and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_boot_from_plans_the_file_first(capsys, apron_home_with_facts, tmp_path):
    code, _, err = run(
        capsys, "boot", "--from", str(CANDIDATES / "serve-llama-3.1-8b.sh"), "--on", "local", "--records", str(tmp_path)
    )
    assert code == 2 and "names no GPU type" in err


def test_fit_from_a_candidate_marks_its_configuration(capsys, apron_home_with_facts):
    code, doc, _ = run(
        capsys,
        "fit",
        "--from",
        str(CANDIDATES / "recipe-qwen3-32b.yaml"),
        "--users",
        "8",
        "--gpus",
        "H100,H200",
        "--json",
    )
    assert code == 0 and doc["request"]["context_tokens"] == 32768  # the recipe's --max-model-len
    own = [r for r in doc["configurations"] if r["candidate"]]
    assert len(own) == 1 and (own[0]["gpu"], own[0]["count"]) == ("NVIDIA H100 80GB HBM3", 2)
    assert doc["candidate"]["sha256"] == hashlib.sha256((CANDIDATES / "recipe-qwen3-32b.yaml").read_bytes()).hexdigest()
    assert all("--reasoning-parser qwen3" in r["flags"] for r in doc["configurations"] if r["status"] == "feasible")


def test_serve_args_follow_vllms_parser():
    from apron.plan.candidates.serve_args import parse_serve_args

    args = parse_serve_args(
        [
            "m",
            "-tp",
            "4",
            "--max-model-len=1K",
            "--max-num-batched-tokens",
            "2.5k",
            "--no-enforce-eager",
            "--dtype",
            "half",
        ],
        "test",
    )
    assert args.model == "m"
    assert args.settings == {
        "tensor_parallel_size": 4,
        "max_model_len": 1024,
        "max_num_batched_tokens": 2500,
        "enforce_eager": False,
        "dtype": "half",
    }
    auto = parse_serve_args(["--model", "m", "--max-model-len", "auto"], "test")
    assert (
        auto.model == "m" and auto.not_understood == ["--max-model-len auto"] and "max_model_len" not in auto.settings
    )


def test_every_fixture_file_reads(apron_home_with_facts):
    kinds = {read_candidate(str(p)).kind for p in CANDIDATES.iterdir()}
    assert kinds == {"vllm-command", "recipe", "skypilot", "kubernetes"}


def test_a_skypilot_task_with_any_of_and_the_api_server_module(apron_home_with_facts):
    candidate = read_candidate(str(CANDIDATES / "sky-qwen3-32b-any-of.yaml"))
    assert (candidate.gpu, candidate.gpu_count, candidate.engine) == ("H100", 2, "0.33.0")  # image_id's tag
    assert candidate.model == "Qwen/Qwen3-32B"  # --model $MODEL from envs
    assert candidate.args.settings == {"tensor_parallel_size": 2, "max_model_len": 16384}
    assert candidate.args.no_memory_effect == ["--port 8000"] and candidate.args.not_understood == []
