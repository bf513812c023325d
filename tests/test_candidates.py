"""`--from FILE`: deployments proposed by other tools and people (files written from each format's
documented shape, in tests/fixtures/candidates), planned and checked through the CLI. The readers
themselves are tested in tests/test_deploy.py."""

from __future__ import annotations

import hashlib
import io
import json

import pytest

from apron.cli import main
from apron.deploy import read_deployments
from apron.plan.candidate import plan_candidate
from conftest import FIXTURES

CANDIDATES = FIXTURES / "candidates"
H100_BYTES = 85_017_493_504


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
    assert code == (0 if doc["verdict"] == "fits" else 1)
    return doc


def test_a_vllm_serve_script(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "serve-llama-3.1-8b.sh", "--gpu", "4090")
    section, flags = doc["candidate"], doc["candidate"]["flags"]
    assert doc["model"]["repo_id"] == "meta-llama/Llama-3.1-8B-Instruct" and section["format"] == "vllm-command"
    # 16k is vLLM's decimal kilo (utils/argparse_utils.py human_readable_int); --max_num_seqs is --max-num-seqs
    assert doc["settings"]["max_model_len"] == 16000 and doc["settings"]["max_num_seqs"] == 64
    assert doc["settings"]["gpu_memory_utilization"] == 0.95
    assert flags["carried"] == ["--enable-auto-tool-choice", "--tool-call-parser llama3_json"]
    assert flags["no_memory_effect"] == ["--host 0.0.0.0", "--port 8000"]
    assert flags["not_understood"] == ["--enable-prefix-caching"]
    assert doc["hardware"]["gpu"] == "NVIDIA GeForce RTX 4090"
    assert section["provenance"]["max_model_len"] == "line 7" and section["provenance"]["model"] == "line 6"


def test_the_printed_command_keeps_every_flag_of_the_file(capsys, apron_home_with_facts):
    """Issue 22: a user who copies the command keeps the flags Apron does not plan; Apron's own are marked."""
    doc = plan_from(capsys, "serve-llama-3.1-8b.sh", "--gpu", "4090")
    written = "--max-model-len 16k --gpu-memory-utilization 0.95 --max_num_seqs 64 --enable-auto-tool-choice "
    written += "--tool-call-parser llama3_json --enable-prefix-caching --host 0.0.0.0 --port 8000"
    # the variable the file sets for the engine comes first, as in the file
    assert doc["command"].startswith("VLLM_LOGGING_LEVEL=INFO vllm serve meta-llama/Llama-3.1-8B-Instruct " + written)
    command = doc["candidate"]["command"]
    assert command["not_planned"] == ["--enable-prefix-caching"]
    assert [f["origin"] for f in command["flags"]] == ["file"] * 8  # the parsers were already asked for
    qwen = plan_from(capsys, "vllm-recipe-qwen3.yaml")
    assert qwen["candidate"]["command"]["added_by_apron"] == ["--enable-auto-tool-choice --tool-call-parser hermes"]
    assert qwen["command"].endswith("--async-scheduling --enable-auto-tool-choice --tool-call-parser hermes")
    code, text, _ = run(capsys, "plan", "--from", str(CANDIDATES / "vllm-recipe-qwen3.yaml"))
    assert "the command adds: --enable-auto-tool-choice --tool-call-parser hermes" in text


def test_a_flag_the_release_does_not_have_is_a_proven_refusal(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "shell-api-server.sh", "--gpu", "L4")
    assert doc["verdict"] == "does_not_fit" and doc["candidate"]["flags"]["refused"] == ["--swap-space 16"]
    (problem,) = [p for p in doc["problems"] if p["kind"] == "unrecognized_argument"]
    assert problem["label"] == "proven_constraint" and "has no option --swap-space" in problem["message"]
    assert "--swap-space 16" in doc["command"]  # kept, and marked
    assert doc["candidate"]["entry"] == "python -m vllm.entrypoints.openai.api_server"


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
    # enable-expert-parallel: false is --no-enable-expert-parallel, the release's default: no effect
    assert section["flags"]["no_memory_effect"] == ["--no-enable-expert-parallel"]
    assert section["flags"]["not_understood"] == ["--async-scheduling"]
    assert "--reasoning-parser qwen3" in doc["flags"]
    assert any(n.startswith("engine pinned by the file: vllm==0.33.0 (vllm_version)") for n in doc["notes"])


def test_a_skypilot_task(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "sky-gpt-oss-20b.yaml")
    section = doc["candidate"]
    # the first accelerator choice; envs substituted into run, SKYPILOT_NUM_GPUS_PER_NODE from the count
    assert (section["format"], section["gpu"], section["gpu_count"]) == ("skypilot", "L4", 1)
    assert section["model"] == "openai/gpt-oss-20b" and section["engine"] == "0.33.0"
    assert doc["settings"]["max_model_len"] == 32768 and doc["settings"]["tensor_parallel_size"] == 1
    assert section["flags"]["not_understood"] == ["--async-scheduling"]
    assert section["provenance"]["gpu"] == "resources.accelerators" and section["provenance"]["engine"] == "setup"


def test_a_skypilot_task_on_eight_gpus_is_planned_at_tp_eight(capsys, apron_home_with_facts):
    """{H100:8, H200:8}: the count is in the key; the plan is TP 8 on 8 x H100, never TP 1 on one."""
    doc = plan_from(capsys, "sky-map-nospace.yaml")
    assert (doc["hardware"]["gpu"], doc["hardware"]["count"], doc["settings"]["tensor_parallel_size"]) == (
        "NVIDIA H100 80GB HBM3",
        8,
        8,
    )
    assert any("no order" in n for n in doc["candidate"]["notes"])


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


def test_the_agreement_says_what_it_covers(capsys, apron_home_with_facts):
    lws = plan_from(capsys, "k8s-lws.yaml")["candidate"]  # multi-node, pipeline parallel
    assert lws["agreement_covers_everything"] is False and lws["num_nodes"] == 2
    assert "--pipeline-parallel-size 2" in lws["not_planned"] and any("multi-node" in n for n in lws["not_planned"])
    code, text, _ = run(capsys, "plan", "--from", str(CANDIDATES / "k8s-lws.yaml"))
    line = next(li for li in text.splitlines() if "Apron agrees" in li or "Apron says" in li)
    assert "for what it planned; NOT planned:" in line and "--pipeline-parallel-size 2" in line
    whole = plan_from(capsys, "k8s-eks-instance-type.yaml")["candidate"]
    assert whole["agreement_covers_everything"] is True and whole["not_planned"] == []
    code, text, _ = run(capsys, "plan", "--from", str(CANDIDATES / "k8s-eks-instance-type.yaml"))
    assert "(everything in the file was planned)" in text


def test_an_unresolved_variable_is_not_planned_and_source_names_the_model(capsys, apron_home_with_facts):
    path = str(CANDIDATES / "shell-unresolved.sh")
    code, _, err = run(capsys, "plan", "--from", path, "--gpu", "L4")
    assert code == 2 and "$MODEL_ID" in err and "give it as SOURCE" in err and len(err.strip().splitlines()) == 1
    doc = plan_from(capsys, "shell-unresolved.sh", "Qwen/Qwen3-8B", "--gpu", "L4")
    assert doc["model"]["repo_id"] == "Qwen/Qwen3-8B" and doc["settings"]["tensor_parallel_size"] == 1
    assert "--tensor-parallel-size $TP" in doc["candidate"]["not_planned"]


def test_source_with_a_file_that_names_no_model(capsys, apron_home_with_facts):
    doc = plan_from(capsys, "vllm-config.yaml", "Qwen/Qwen3-8B", "--gpu", "L4")
    assert doc["settings"]["max_model_len"] == 10240 and doc["settings"]["gpu_memory_utilization"] == 0.88
    assert doc["candidate"]["format"] == "vllm-config"
    code, _, err = run(capsys, "plan", "--from", str(CANDIDATES / "vllm-config.yaml"), "--gpu", "L4")
    assert code == 2 and "names no model" in err and "SOURCE" in err
    code, _, err = run(capsys, "plan", "Qwen/Qwen3-14B", "--from", str(CANDIDATES / "k8s-mistral-7b.yaml"))
    assert code == 2 and "differs from the model mistralai/Mistral-7B-Instruct-v0.3" in err


def test_gpu_memory_and_capability_on_the_from_path(capsys, apron_home_with_facts, tmp_path):
    path = tmp_path / "spark.yaml"
    path.write_text("resources:\n  accelerators: GB10:1\nrun: vllm serve Qwen/Qwen3-8B --max-model-len 8192\n")
    code, _, err = run(capsys, "plan", "--from", str(path))
    assert code == 2 and "'GB10' (resources.accelerators) is not in Apron's GPU catalog" in err
    assert "--gpu-memory-bytes and --gpu-capability" in err
    code, _, err = run(capsys, "plan", "--from", str(path), "--gpu-memory-bytes", str(120 * 2**30))
    assert code == 2 and "--gpu-capability for it" in err and "--gpu-memory-bytes and" not in err
    args = ("--gpu-memory-bytes", str(120 * 2**30), "--gpu-capability", "12.1", "--json")
    code, doc, _ = run(capsys, "plan", "--from", str(path), *args)
    assert code in (0, 1) and doc["hardware"]["gpu"] == "GB10"
    assert doc["hardware"]["total_bytes_per_gpu"] == 120 * 2**30
    code, doc, _ = run(
        capsys, "plan", "--from", str(CANDIDATES / "k8s-mistral-7b.yaml"), "--gpu-memory-bytes", "24000000000", "--json"
    )
    assert doc["hardware"]["gpu"] == "NVIDIA L4" and doc["hardware"]["total_bytes_per_gpu"] == 24_000_000_000


def test_several_deployments_are_planned_each_or_by_name(capsys, apron_home_with_facts):
    path = str(CANDIDATES / "helm-llmd-values.yaml")
    code, doc, _ = run(capsys, "plan", "--from", path, "--json")
    assert doc["schema"] == "apron.plan-set/1" and doc["deployments"] == ["prefill", "decode"]
    assert [p["schema"] for p in doc["plans"]] == ["apron.plan/1"] * 2
    assert [p["settings"]["tensor_parallel_size"] for p in doc["plans"]] == [1, 2]
    assert code == (0 if set(doc["verdicts"].values()) == {"fits"} else 1)
    code, text, _ = run(capsys, "plan", "--from", path)
    assert "== deployment 1 of 2: prefill" in text and "== deployment 2 of 2: decode" in text
    code, one, _ = run(capsys, "plan", "--from", path, "--name", "decode", "--json")
    assert one["schema"] == "apron.plan/1" and one["candidate"]["name"] == "decode"
    code, _, err = run(capsys, "plan", "--from", path, "--name", "router")
    assert code == 2 and "'prefill', 'decode'" in err


def test_a_deployment_that_does_not_fit_fails_the_set(capsys, apron_home_with_facts):
    code, doc, _ = run(capsys, "plan", "--from", str(CANDIDATES / "shell-two-servers.sh"), "--gpu", "L4", "--json")
    assert doc["verdicts"] == {"Qwen/Qwen3-0.6B": "fits", "Qwen/Qwen3-14B": "fits"} or code == 1
    code, doc, _ = run(capsys, "plan", "--from", str(CANDIDATES / "shell-two-servers.sh"), "--gpu", "T4", "--json")
    assert doc["verdicts"]["Qwen/Qwen3-14B"] != "fits" and code == 1


def test_environment_the_planner_models(capsys, apron_home_with_facts, tmp_path):
    doc = plan_from(capsys, "shell-env.sh", "--gpu", "H100")
    assert doc["settings"]["max_model_len"] == 65536 and not [
        p for p in doc["problems"] if p["kind"] == "max_model_len"
    ]
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN lets it through" in n for n in doc["notes"])
    uses = {v["name"]: v["use"] for v in doc["candidate"]["env"]}
    assert uses["VLLM_ATTENTION_BACKEND"] == "not_read" and uses["PYTORCH_CUDA_ALLOC_CONF"] == "not_planned"
    assert doc["command"].startswith("VLLM_ATTENTION_BACKEND=FLASHINFER PYTORCH_CUDA_ALLOC_CONF=")
    without = tmp_path / "no-env.sh"
    without.write_text(
        (CANDIDATES / "shell-env.sh").read_text().replace("export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\n", "")
    )
    code, doc, _ = run(capsys, "plan", "--from", str(without), "--gpu", "H100", "--json")
    assert code == 1 and doc["verdict"] == "does_not_fit"
    assert [
        p for p in doc["problems"] if p["kind"] == "max_model_len" and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in p["message"]
    ]


def test_the_cpu_kv_cache_space_is_planned_on_the_cpu_only(capsys, apron_home_with_facts):
    (candidate,) = read_deployments(str(CANDIDATES / "compose-vllm.yaml"))
    on_cpu = plan_candidate(candidate, "cpu", engine_version="0.32.0")
    assert on_cpu.user.kv_cache_memory_bytes == 8 * 2**30
    on_gpu = plan_candidate(candidate, "L4")
    assert on_gpu.user.kv_cache_memory_bytes is None
    (space,) = [v for v in on_gpu.candidate.env if v.name == "VLLM_CPU_KVCACHE_SPACE"]
    assert space.use == "no_memory_effect" and "CPU platform only" in space.why


def test_stdin_and_command_line_settings_win(capsys, monkeypatch, apron_home_with_facts):
    text = (CANDIDATES / "serve-llama-3.1-8b.sh").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text)))
    code, doc, _ = run(capsys, "plan", "--from", "-", "--gpu", "L4", "--max-model-len", "8192", "--json")
    assert code in (0, 1)
    assert doc["candidate"]["file"] == "stdin" and doc["candidate"]["sha256"] == hashlib.sha256(text).hexdigest()
    assert doc["settings"]["max_model_len"] == 8192 and doc["settings"]["max_num_seqs"] == 64
    assert any("max_model_len=8192" in n for n in doc["candidate"]["notes"])
    # the value typed here replaces the file's in place, and says what it replaced
    (typed,) = [f for f in doc["candidate"]["command"]["flags"] if f["origin"] == "set_here"]
    assert (typed["flag"], typed["was"], typed["where"]) == ("--max-model-len 8192", "--max-model-len 16k", "line 7")
    assert " --max-model-len 8192 --gpu-memory-utilization 0.95 " in doc["command"]


def test_the_card_lists_the_flags_apron_does_not_plan(capsys, apron_home_with_facts):
    code, text, _ = run(capsys, "plan", "--from", str(CANDIDATES / "recipe-qwen3-32b.yaml"))
    assert "candidate: " in text and "NOT planned" in text and "--async-scheduling" in text


@pytest.mark.parametrize(
    "content,message",
    [
        ("vllm serve Qwen/Qwen3-8B --max-model-len 4096\n", "names no GPU type"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {}\n", "no container starts vLLM"),
        ("run: |\n  vllm serve $MODEL --port 8000\nresources: {accelerators: H100:1}\n", "give it as SOURCE"),
        ("name: something\nitems: [1, 2]\n", "not a deployment Apron reads"),
        ("resources: {accelerators: H100:1}\nrun: |\n  python train.py\n", "never starts vLLM"),
        ("model: Qwen/Qwen3-8B\nhardware: {gpu: H100, count: two}\n", "not a whole number"),
        ("vllm serve Qwen/Qwen3-8B --kv-cache-dtype int3\n", "--kv-cache-dtype 'int3'"),
        ("services:\n  a: {image: vllm/vllm-openai, command: '--model \"x'}\n", "cannot split it into words"),
        ("import modal\n\n@app.function(gpu='H100')\ndef f(): pass\n", "a Modal app"),
        ("spec:\n  image: {{ .Values.image }}\n", "a Helm chart template"),
        ("vllm serve 'Qwen/Qwen3-8B\n", "never closed"),
        ("servingEngineSpec:\n  modelSpec: []\n", "production-stack, but servingEngineSpec.modelSpec lists no model"),
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
    code, _, err = run(
        capsys, "boot", "--from", str(CANDIDATES / "helm-llmd-values.yaml"), "--on", "local", "--records", str(tmp_path)
    )
    assert code == 2 and "boot one, named with --name" in err


def test_the_boot_plan_keeps_the_files_flags_but_not_how_the_server_is_reached(apron_home_with_facts):
    (candidate,) = read_deployments(str(CANDIDATES / "docker-run.sh"))
    planned = plan_candidate(candidate, "H100")
    boot = planned.boot_plan()
    assert boot.command.startswith("vllm serve Qwen/Qwen3-14B ")  # the weights' revision may follow
    assert "--tensor-parallel-size 2 --max-model-len 65536 --enable-prefix-caching" in boot.command
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in boot.command
    assert planned.engine_env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}  # passed to the engine's environment
    (served,) = read_deployments(str(CANDIDATES / "serve-llama-3.1-8b.sh"))
    command = plan_candidate(served, "4090").boot_plan().command
    assert "--port" not in command and "--host" not in command and "--enable-prefix-caching" in command


def test_fit_from_a_candidate_marks_its_configuration(capsys, apron_home_with_facts):
    path = str(CANDIDATES / "recipe-qwen3-32b.yaml")
    code, doc, _ = run(capsys, "fit", "--from", path, "--users", "8", "--gpus", "H100,H200", "--json")
    assert code == 0 and doc["request"]["context_tokens"] == 32768  # the recipe's --max-model-len
    own = [r for r in doc["configurations"] if r["candidate"]]
    assert len(own) == 1 and (own[0]["gpu"], own[0]["count"]) == ("NVIDIA H100 80GB HBM3", 2)
    assert doc["candidate"]["sha256"] == hashlib.sha256((CANDIDATES / "recipe-qwen3-32b.yaml").read_bytes()).hexdigest()
    assert all("--reasoning-parser qwen3" in r["flags"] for r in doc["configurations"] if r["status"] == "feasible")
    # each row's command is the file's, with what fit changed in place of the file's values
    for row in doc["configurations"]:
        assert "--async-scheduling" in row["command"] and "--no-enable-expert-parallel" in row["command"]
        assert (
            f"--tensor-parallel-size {row['tensor_parallel_size']}" in row["command"]
            or row["tensor_parallel_size"] == 1
        )


def test_fit_from_a_file_of_several_deployments_needs_a_name(capsys, apron_home_with_facts):
    path = str(CANDIDATES / "helm-production-stack.yaml")
    code, _, err = run(capsys, "fit", "--from", path, "--users", "4", "--gpus", "L4")
    assert code == 2 and "pick one with --name" in err
    code, doc, _ = run(capsys, "fit", "--from", path, "--name", "llama3", "--users", "4", "--gpus", "L4,H100", "--json")
    assert doc["candidate"]["name"] == "llama3" and doc["request"]["context_tokens"] == 16384
    own = [r for r in doc["configurations"] if r["candidate"]]
    assert [(r["gpu"], r["count"]) for r in own] == [("NVIDIA L4", 1)]
    assert any("refuses the file's --disable-log-requests" in n for n in doc["notes"])  # 0.32.0's parser


def test_a_model_given_as_a_path_on_the_files_machine(capsys, apron_home_with_facts, tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("vllm serve /models/Qwen3-8B --max-model-len 8192 --served-model-name qwen\n")
    code, _, err = run(capsys, "plan", "--from", str(path), "--gpu", "L4")
    assert code == 2 and "the path /models/Qwen3-8B (line 1)" in err and "SOURCE" in err
    code, doc, _ = run(capsys, "plan", "Qwen/Qwen3-8B", "--from", str(path), "--gpu", "L4", "--json")
    assert code in (0, 1) and doc["model"]["repo_id"] == "Qwen/Qwen3-8B" and doc["settings"]["max_model_len"] == 8192
    assert any("the path /models/Qwen3-8B" in n for n in doc["candidate"]["notes"])


def test_boot_from_runs_the_files_command_with_its_environment(tmp_path, apron_home_with_facts):
    """`apron boot --from`: the file's flags reach the engine (tests/fake_vllm.py as the engine, which
    would listen on the file's --port if that were passed), its engine variables reach the process."""
    from apron.checkpoint.example import TinySpec, write_tiny_model
    from test_newcomer_boot import QUICK, apron, fake_engine_venv

    write_tiny_model(tmp_path / "tiny", TinySpec(num_layers=2, max_positions=2048))
    fake_engine_venv(tmp_path / "venv")
    (tmp_path / "run.sh").write_text(
        "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\n"
        "vllm serve ./tiny --port 9999 --max-model-len 512 --kv-cache-memory-bytes 64M --enable-prefix-caching\n"
    )
    result = apron(
        "boot", "--from", "run.sh", "--gpu", "cpu", "--gpu-memory-bytes", str(16 * 2**30), "--engine", "vllm==0.32.0",
        "--on", "local", "--venv", "venv", *QUICK, "--records", "records", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    command = json.loads(result.stdout)["command"]
    argv = command["argv"]
    assert "--enable-prefix-caching" in argv and "9999" not in argv
    assert argv[argv.index("--max-model-len") + 1] == "512"
    assert command["env"]["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"


def test_a_saved_from_plan_boots_with_the_variables_its_command_sets():
    """The printed command starts with the file's engine variables; a boot of the saved plan passes
    them to the engine's environment rather than refusing the command."""
    from apron.boot.command import build_command

    command = build_command(
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-8B --max-model-len 65536",
        vllm="/v/bin/vllm",
        model_path="/w/qwen",
        port=8001,
        served_model_name="m",
    )
    assert command.argv[:5] == ("/v/bin/vllm", "serve", "/w/qwen", "--max-model-len", "65536")
    assert command.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"


def test_a_release_without_an_option_table_reads_flags_with_the_newest_below(monkeypatch, apron_home_with_facts):
    """A release Apron has facts for but no option table (a synced one): its flags are read with the
    newest table below it, and an option that table lacks is listed, not made a refusal."""
    import apron.deploy.options as options

    raw = options._raw()
    trimmed = {**raw, "releases": {v: e for v, e in raw["releases"].items() if v != "0.33.0"}}
    monkeypatch.setattr(options, "_raw", lambda: trimmed)
    options.release_options.cache_clear()
    try:
        (candidate,) = read_deployments(str(CANDIDATES / "shell-api-server.sh"))
        planned = plan_candidate(candidate, "L4", engine_version="0.33.0")
        assert planned.candidate.release_read == "0.32.0" and planned.plan.engine_version == "0.33.0"
        assert planned.candidate.args.of("refused") == ["--swap-space 16"]
        assert not [p for p in planned.plan.problems if p.kind == "unrecognized_argument"]
        assert any("no option table for 0.33.0" in n for n in planned.to_json()["candidate"]["notes"])
    finally:
        options.release_options.cache_clear()
