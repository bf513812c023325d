"""Deployment files read as candidates (apron.deploy): every format of research/deployment-formats.md,
on files written from it (tests/fixtures/candidates). Shell scripts are checked against bash itself:
the script runs with stand-ins for vllm, python3, docker, podman and uv on PATH that record the words
they were started with, and Apron's reading must match them word for word."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import strategies as st

from apron.deploy import pick, read_deployments
from apron.deploy.formats import all_formats, claiming
from apron.deploy.formats.base import Document
from apron.deploy.options import release_options, table_versions
from apron.deploy.serve_args import Arg, human_readable_int, parse_serve_args
from apron.errors import BadInput
from conftest import FIXTURES

CANDIDATES = FIXTURES / "candidates"
ALL_FILES = sorted(p for p in CANDIDATES.rglob("*") if p.is_file() and p.name != ".env")
REFUSED = {"modal-app.py": "a Modal app", "helm-template.yaml": "a Helm chart template"}
BASH = shutil.which("bash")


def one(name: str):
    (candidate,) = read_deployments(str(CANDIDATES / name))
    return candidate


def test_every_format_module_says_what_it_is():
    for module in all_formats():
        assert module.NAME and module.TITLE and callable(module.claims) and callable(module.read), module


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(CANDIDATES)))
def test_each_file_is_claimed_by_exactly_one_format(path):
    document = Document(str(path), path.read_text(), path)
    assert len(claiming(document)) == 1, [m.NAME for m in claiming(document)]
    if path.name in REFUSED:
        with pytest.raises(BadInput, match=REFUSED[path.name]):
            read_deployments(str(path))
    else:
        assert read_deployments(str(path))


# ------------------------------------------------------------------ shell, against bash

_RECORDER = """#!/bin/sh
# a stand-in that records how it was started (its name, words and environment), one file per start
{{ printf '%s\\037' "$(basename "$0")" "$@"; printf '\\036'; env; }} > "$APRON_ARGV_DIR/$$"
{body}
"""


def bash_starts(script: Path, tmp_path: Path, env: dict[str, str] | None = None) -> list[tuple[list[str], dict]]:
    """Run the script with bash; the (words, environment) of each recorded start, in order."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    bodies = {"uv": 'if [ "$1" = run ]; then shift; exec "$@"; fi', "ray": "", "vllm": "", "python3": ""}
    bodies |= {"docker": "", "podman": ""}
    for name, body in bodies.items():
        (bin_dir / name).write_text(_RECORDER.format(body=body))
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "starts"
    log.mkdir(exist_ok=True)
    system = os.pathsep.join(p for p in ("/usr/bin", "/bin") if Path(p).is_dir())
    run_env = {"PATH": f"{bin_dir}{os.pathsep}{system}", "APRON_ARGV_DIR": str(log), "HOME": str(tmp_path)}
    subprocess.run([BASH, str(script)], cwd=tmp_path, env={**run_env, **(env or {})}, timeout=60, check=False)
    starts = []
    for record in sorted(p.read_text() for p in log.iterdir()):  # background starts come in any order
        words, environment = record.split("\036", 1)
        names = words.split("\037")[:-1]
        variables = dict(line.split("=", 1) for line in environment.strip().splitlines() if "=" in line)
        if names[0] != "uv":
            starts.append((names, variables))
    return starts


SHELL_FILES = [
    "serve-llama-3.1-8b.sh",
    "shell-variables.sh",
    "shell-comment-in-continuation.sh",
    "shell-api-server.sh",
    "docker-run.sh",
    "podman-run.sh",
    "shell-two-servers.sh",
    "shell-env.sh",
]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize("name", SHELL_FILES)
def test_shell_scripts_read_as_bash_runs_them(name, tmp_path):
    starts = [(w, e) for w, e in bash_starts(CANDIDATES / name, tmp_path) if w[0] != "ray"]
    candidates = read_deployments(str(CANDIDATES / name))
    assert len(starts) == len(candidates)
    for candidate in candidates:
        argv = [a.text for a in candidate.found.argv]
        words, environment = next((w, e) for w, e in starts if w[-len(argv) :] == argv or not argv)
        if words[0] == "vllm":
            assert words[1] == "serve" and words[2:] == argv
        elif words[0] == "python3":
            assert words[1:3] == ["-m", "vllm.entrypoints.openai.api_server"] and words[3:] == argv
        else:  # docker or podman run IMAGE ARGS: the image's entry point gets ARGS
            image = next(w for w in words[2:] if "vllm-openai" in w)
            assert words[words.index(image) + 1 :] == argv
        for var in candidate.env:
            if var.use != "not_planned" and words[0] in ("vllm", "python3"):
                assert environment.get(var.name) == var.value, var


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize(
    "script",
    [
        "X=a; vllm serve m --a ${X:-d} --b ${Y:-d} --c ${X-e}",
        'E=""; vllm serve m --x ${E:-empty} --y "${E-set}" --z ${E:+alt}',
        "vllm serve m --p ${P:=42} --q $P",
        "A='one two'; vllm serve m $A \"$A\" '$A'",
        "vllm serve m --json '{\"a\": [1, 2]}' 2>&1 >> out.log | tee x.log",
        "vllm serve m &> all.log; vllm serve n --port 1 && echo ok",
        "cat <<EOF > c.yaml\nvllm serve not-me\nEOF\nvllm serve m --k v",
        "vllm serve m \\\n  --a 1 \\\n  --b=2 # trailing comment\n",
        'export M=x/y; exec env CUDA_VISIBLE_DEVICES=3 vllm serve "$M" --e "a\\"b" --f a\\ b',
    ],
)
def test_shell_forms_read_as_bash_runs_them(script, tmp_path):
    path = tmp_path / "s.sh"
    path.write_text(script)
    starts = [w for w, _ in bash_starts(path, tmp_path) if w[0] == "vllm"]
    candidates = read_deployments(str(path))
    assert sorted(["vllm", "serve", *[a.text for a in c.found.argv]] for c in candidates) == sorted(starts)


def test_a_trailing_backslash_at_the_end_of_the_file_joins_nothing():
    assert (CANDIDATES / "shell-variables.sh").read_bytes().endswith(b"wait \\")
    candidate = one("shell-variables.sh")
    assert candidate.settings == {"tensor_parallel_size": 2, "max_model_len": 32768, "gpu_memory_utilization": 0.9}
    assert candidate.gpu_count.value == 2 and candidate.gpu_count.where == "line 10"  # CUDA_VISIBLE_DEVICES
    assert candidate.name == "qwen3"  # --served-model-name
    # redirections, the background & and the pipe are shell, not flags of vLLM
    assert [f.text for f in candidate.args.flags][-1] == "--port 8001"
    assert candidate.provenance()["model"] == "line 13" and candidate.provenance()["max_model_len"] == "line 15"


def test_a_comment_inside_a_continuation_ends_the_command():
    candidate = one("shell-comment-in-continuation.sh")
    assert candidate.settings == {"max_model_len": 8192}
    (note,) = candidate.notes
    assert "--gpu-memory-utilization 0.85 --max-num-seqs 32" in note and "not passed to vLLM" in note


def test_variables_set_outside_the_file_are_unresolved_not_guessed():
    candidate = one("shell-unresolved.sh")
    assert candidate.model.value == "$MODEL_ID" and candidate.model_is_unresolved
    (tp,) = [f for f in candidate.args.flags if f.dest == "tensor_parallel_size"]
    assert tp.use == "not_planned" and "$TP is set outside the file" in tp.why
    assert "tensor_parallel_size" not in candidate.settings and candidate.settings["dtype"] == "bfloat16"


def test_docker_and_podman_runs():
    docker = one("docker-run.sh")
    assert docker.entry.startswith("docker run vllm/vllm-openai:v0.32.0")
    assert (docker.engine.value, docker.gpu_count.value) == ("0.32.0", 2)  # the tag; --gpus '"device=0,1"'
    env = {v.name: v for v in docker.env}
    assert env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"].use == "planned" and env["HF_TOKEN"].value == "$HF_TOKEN"
    assert docker.settings["env"] == (("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"),)
    podman = one("podman-run.sh")
    assert podman.engine is None and podman.gpu_count.value == "all"  # latest names no release
    assert podman.model.value == "openai/gpt-oss-20b"


def test_two_servers_in_one_script_are_two_deployments():
    small, large = read_deployments(str(CANDIDATES / "shell-two-servers.sh"))
    assert (small.model.value, small.gpu_count.value) == ("Qwen/Qwen3-0.6B", 1)
    assert (large.model.value, large.gpu_count.value, large.settings["tensor_parallel_size"]) == (
        "Qwen/Qwen3-14B",
        2,
        2,
    )
    assert pick((small, large), "Qwen/Qwen3-14B") == (large,)
    with pytest.raises(BadInput, match="holds no deployment of that name"):
        pick((small, large), "nope")


def test_environment_is_sorted_by_what_it_does_to_the_plan():
    env = {v.name: v for v in one("shell-env.sh").env}
    assert env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"].use == "planned"
    assert env["PYTORCH_CUDA_ALLOC_CONF"].use == "not_planned" and "expandable" in env["PYTORCH_CUDA_ALLOC_CONF"].why
    # neither is a variable of vLLM 0.33.0's envs.py: the engine ignores them
    assert (
        env["VLLM_ATTENTION_BACKEND"].use == "not_read" and "--attention-backend" in env["VLLM_ATTENTION_BACKEND"].why
    )
    assert env["VLLM_USE_FLASHINFER_MOE_FP8"].use == "not_read"
    assert env["HF_HOME"].use == "no_memory_effect"
    assert "VLLM_ATTENTION_BACKEND" not in release_options("0.33.0").env


# ------------------------------------------------------------------ YAML formats


def test_skypilot_forms():
    nospace = one("sky-map-nospace.yaml")  # {H100:8, H200:8}: keys "H100:8" with null values
    assert (nospace.gpu.value, nospace.gpu_count.value, nospace.settings["tensor_parallel_size"]) == ("H100", 8, 8)
    assert any("no order" in n and "H200:8" in n for n in nospace.notes)
    assert (one("sky-set.yaml").gpu.value, one("sky-set.yaml").gpu_count.value) == ("L4", 1)
    ordered = one("sky-ordered.yaml")
    assert (ordered.gpu_name, ordered.gpu_count.value, ordered.engine.value) == ("NVIDIA A100-SXM4-80GB", 4, "0.30.0")
    assert any("tries A100-80GB:4 first" in n for n in ordered.notes)
    multi = one("sky-multinode.yaml")
    assert multi.num_nodes.value == 2 and multi.engine.value == "0.33.0"  # the vllm== pin in setup
    assert any("2 nodes" in n for n in multi.not_planned()) and "--pipeline-parallel-size 2" in multi.not_planned()
    assert one("sky-map.yaml").settings["max_model_len"] == 32000  # 32k is decimal in vLLM


@pytest.mark.parametrize(
    "resources,expected",
    [
        ('accelerators: "H100:8"', ("H100", 8)),
        ("accelerators: T4", ("T4", 1)),
        ("gpus: A10G:2", ("A10G", 2)),
        ("accelerators: [H200:8, B200:8]", ("H200", 8)),
        ("any_of:\n    - accelerators: L40S:2\n    - accelerators: L4:4", ("L40S", 2)),
    ],
)
def test_skypilot_accelerator_strings(resources, expected, tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text(f"resources:\n  {resources}\nrun: vllm serve Qwen/Qwen3-8B\n")
    (candidate,) = read_deployments(str(path))
    assert (candidate.gpu.value, candidate.gpu_count.value) == expected


def test_a_fraction_of_a_gpu_and_a_gpu_by_memory(tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text("resources:\n  accelerators: A100:0.5\nrun: vllm serve Qwen/Qwen3-0.6B\n")
    (candidate,) = read_deployments(str(path))
    assert candidate.gpu_count is None and any("a fraction of a GPU" in n for n in candidate.not_planned())
    path.write_text("resources:\n  accelerators: 80GB+:1\nrun: vllm serve Qwen/Qwen3-0.6B\n")
    with pytest.raises(BadInput, match="names GPUs by memory"):
        read_deployments(str(path))


def test_kubernetes_forms():
    lws = one("k8s-lws.yaml")  # the leader's script, past the log shipper that mentions vllm's path
    assert (lws.model.value, lws.gpu_name, lws.gpu_count.value, lws.num_nodes.value) == (
        "openai/gpt-oss-120b",
        "NVIDIA H100 80GB HBM3",
        8,
        2,
    )
    assert "--pipeline-parallel-size 2" in lws.not_planned() and any("multi-node" in n for n in lws.not_planned())
    eks = one("k8s-eks-instance-type.yaml")  # g6e: L40S; the image's entry point; $(MAX_LEN) from env
    assert (eks.gpu_name, eks.gpu_count.value, eks.engine.value) == ("NVIDIA L40S", 2, "0.32.0")
    assert eks.settings == {"max_model_len": 40960, "tensor_parallel_size": 2, "max_num_seqs": 64}
    karpenter = one("k8s-karpenter.yaml")
    assert karpenter.gpu_name == "NVIDIA H100 80GB HBM3" and any("p5, p5e" in n for n in karpenter.notes)
    flag = next(f for f in karpenter.args.flags if f.dest == "chat_template_content_format")
    assert flag.words[-1] == "$(FORMAT)" and flag.use == "no_memory_effect"  # $$( is a literal $(


def test_kserve_inference_service():
    candidate = one("kserve-llama.yaml")
    assert (candidate.model.value, candidate.gpu_name, candidate.gpu_count.value) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "NVIDIA L4",
        1,
    )
    assert candidate.settings == {"max_model_len": 8192, "gpu_memory_utilization": 0.95}
    assert candidate.args.of("refused") == [] and any("--model_name=llama3" in n for n in candidate.notes)


def test_kserve_on_the_transformers_backend_is_refused(tmp_path):
    text = (CANDIDATES / "kserve-llama.yaml").read_text().replace("--backend=vllm", "--backend=huggingface")
    (tmp_path / "isvc.yaml").write_text(text)
    with pytest.raises(BadInput, match="huggingface backend"):
        read_deployments(str(tmp_path / "isvc.yaml"))


def test_helm_values_of_production_stack_and_llm_d():
    llama, qwen = read_deployments(str(CANDIDATES / "helm-production-stack.yaml"))
    assert (llama.name, llama.engine.value, llama.gpu_name) == ("llama3", "0.32.0", "NVIDIA L4")
    assert llama.settings == {
        "max_model_len": 16384,
        "dtype": "bfloat16",
        "gpu_memory_utilization": 0.9,
        "max_num_seqs": 64,
    }
    assert llama.provenance()["max_model_len"] == "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen"
    assert "--no-enable-chunked-prefill" in llama.not_planned() and "--enable-prefix-caching" in llama.not_planned()
    assert (qwen.name, qwen.engine, qwen.gpu_count.value, qwen.settings["tensor_parallel_size"]) == (
        "qwen3-32b",
        None,
        2,
        2,
    )
    assert any("LMCache" in n for n in qwen.not_planned())
    prefill, decode = read_deployments(str(CANDIDATES / "helm-llmd-values.yaml"))
    assert (prefill.name, prefill.gpu_count.value, prefill.settings["tensor_parallel_size"]) == ("prefill", 1, 1)
    assert (decode.name, decode.gpu_count.value, decode.settings["tensor_parallel_size"]) == ("decode", 2, 2)
    assert decode.model.value == "Qwen/Qwen3-32B" and decode.gpu_name == "NVIDIA H200"


def test_compose_files():
    candidate = one("compose-vllm.yaml")  # the chat UI beside it starts no vLLM
    assert (candidate.name, candidate.model.value, candidate.engine.value, candidate.gpu_count.value) == (
        "vllm",
        "Qwen/Qwen3-8B",  # ${MODEL:-Qwen/Qwen3-8B}
        "0.31.0",
        1,
    )
    assert candidate.settings == {"max_model_len": 16384, "gpu_memory_utilization": 0.9}
    dotenv = read_deployments(str(CANDIDATES / "compose-dotenv" / "compose.yaml"))[0]
    assert dotenv.model.value == "openai/gpt-oss-20b" and dotenv.gpu_count.value == 2  # .env, device_ids
    assert dotenv.settings == {"max_model_len": 32768, "max_num_seqs": 64}


def test_vllm_config_and_recipes():
    config = one("vllm-config.yaml")
    assert config.model is None and config.settings == {
        "max_model_len": 10240,
        "gpu_memory_utilization": 0.88,
        "max_num_seqs": 48,
        "enforce_eager": False,
    }
    # false becomes --no-KEY only where the parser has one (load_config_file)
    assert "--no-enforce-eager" in [f.text for f in config.args.flags] and "--port 8100" in config.args.of(
        "no_memory_effect"
    )
    default, awq = read_deployments(str(CANDIDATES / "vllm-recipe-qwen3.yaml"))
    assert default.is_default and not awq.is_default and awq.model.value == "Qwen/Qwen3-8B-AWQ"
    assert (default.gpu.value, default.gpu_count.value) == ("H100", 2)  # meta.hardware "2x H100"
    assert default.args.of("carried") == ["--reasoning-parser qwen3"]  # a default-on feature
    assert "--async-scheduling" in default.not_planned()  # the NVIDIA override
    assert not any("speculative" in f.text for f in default.args.flags)  # opt-in: off
    assert any("opt-in" in n and "spec_decode" in n for n in default.notes)
    assert pick((default, awq), None) == (default,)


# ------------------------------------------------------------------ the flags, as the parser reads them


def test_flags_follow_the_releases_parser():
    options = release_options("0.33.0")
    words = "--enable-prefix-caching Qwen/Q -tp 4 --max-model-len=1K --max_num_batched_tokens 2.5k -O3"
    words += " --no-enforce-eager --disable-expert-parallel --swap-space 16 --max-num 12 --compilation-config.mode 3"
    args = parse_serve_args([Arg(w, "t") for w in words.split()], options)
    assert args.model.text == "Qwen/Q"  # the switch before it takes no value
    assert args.settings == {
        "tensor_parallel_size": 4,
        "max_model_len": 1024,
        "max_num_batched_tokens": 2500,
        "enforce_eager": False,
    }
    by_text = {f.text: f for f in args.flags}
    assert by_text["-O3"].use == "not_planned" and by_text["-O3"].dest == "optimization_level"
    assert by_text["--disable-expert-parallel"].use == "no_memory_effect"  # sets the default, False
    assert by_text["--swap-space 16"].use == "refused" and "no option --swap-space" in by_text["--swap-space 16"].why
    assert by_text["--max-num 12"].use == "refused" and "ambiguous" in by_text["--max-num 12"].why
    assert by_text["--compilation-config.mode 3"].dest == "compilation_config"


def test_human_readable_integers_as_vllm_reads_them():
    assert [human_readable_int(t) for t in ("16k", "1K", "25.6k", "2M", "1.5K", "auto", "-1", "7")] == [
        16000,
        1024,
        25600,
        2 * 2**20,
        None,
        None,
        None,
        7,
    ]


def test_the_option_table_holds_each_shipped_release():
    versions = table_versions()
    assert {"0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"} <= set(versions)
    assert release_options("0.34.0").version == versions[-1]  # newer: the newest table
    assert release_options("0.30.5").version == "0.30.0"
    for version in versions:
        options = release_options(version).options
        assert options["--max-model-len"].nargs == 1 and options["--enforce-eager"].sets is True


def test_the_option_table_matches_the_installed_engines_parser(tmp_path):
    """Regenerate the table from the real vLLM (the CPU build the suite boots) and compare."""
    from engine_env import vllm_python

    python = vllm_python()
    out = tmp_path / "table.json.gz"
    script = Path(__file__).resolve().parent.parent / "scripts" / "serve_options.py"
    done = subprocess.run([python, str(script), str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    import gzip

    import apron.deploy.options as options_module

    fresh = json.loads(gzip.decompress(out.read_bytes()))["releases"]
    ((version, entry),) = fresh.items()
    shipped = json.loads(gzip.decompress(options_module._TABLE.read_bytes()))["releases"]
    assert entry == shipped[version]


def test_a_production_stack_key_the_chart_may_not_pass_is_listed_not_guessed(tmp_path):
    path = tmp_path / "values.yaml"
    text = "servingEngineSpec:\n  modelSpec:\n    - name: a\n      modelURL: Qwen/Qwen3-8B\n"
    path.write_text(text + "      vllmConfig: {maxModelLen: 4096, v1: 1}\n")
    (candidate,) = read_deployments(str(path))
    assert candidate.settings == {"max_model_len": 4096} and candidate.args.of("refused") == []
    assert any("vllmConfig.v1" in n for n in candidate.not_planned())


def test_llm_d_with_the_containers_own_command(tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text(
        "modelArtifacts: {uri: 'hf://Qwen/Qwen3-8B'}\n"
        "decode:\n  parallelism: {tensor: 2}\n  containers:\n    - name: vllm\n      modelCommand: custom\n"
        "      command: [vllm, serve, Qwen/Qwen3-8B, --tensor-parallel-size, '2', --max-model-len, '8192']\n"
        "      resources: {limits: {nvidia.com/gpu: 2}}\n"
    )
    (candidate,) = read_deployments(str(path))
    assert (candidate.name, candidate.gpu_count.value) == ("decode", 2)
    assert candidate.settings == {"tensor_parallel_size": 2, "max_model_len": 8192}


def test_a_config_file_with_a_misspelt_option(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("max-model-len: 4096\ngpu-memory-utilization: 0.9\nmax-num-seqs: 8\nmax-modle-len: 1\n")
    (candidate,) = read_deployments(str(path))
    assert candidate.format == "vllm-config" and candidate.args.of("refused") == ["--max-modle-len 1"]


def test_docker_gpus_all_and_a_count(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("docker run --gpus all vllm/vllm-openai:v0.33.0 --model Qwen/Qwen3-8B\n")
    assert read_deployments(str(path))[0].gpu_count.value == "all"
    path.write_text("docker run --gpus=2 -e NVIDIA_VISIBLE_DEVICES=0,1,2 vllm/vllm-openai --model Qwen/Qwen3-8B\n")
    assert read_deployments(str(path))[0].gpu_count.value == 2  # --gpus wins
    path.write_text("docker run --runtime nvidia -e NVIDIA_VISIBLE_DEVICES=0,1,2 vllm/vllm-openai Qwen/Qwen3-8B\n")
    assert read_deployments(str(path))[0].gpu_count.value == 3


def test_compose_environment_as_a_map_and_every_gpu(tmp_path):
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  engine:\n    image: vllm/vllm-openai:v0.33.0\n    command: [Qwen/Qwen3-8B, --max-model-len, '4096']\n"
        "    environment: {VLLM_ALLOW_LONG_MAX_MODEL_LEN: '1', HF_TOKEN: null}\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu]}]}}}\n"
    )
    (candidate,) = read_deployments(str(path))
    assert candidate.gpu_count.value == "all" and candidate.settings["max_model_len"] == 4096
    env = {v.name: v for v in candidate.env}
    assert env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"].use == "planned" and env["HF_TOKEN"].value == "$HF_TOKEN"


_KEYS = st.sampled_from(
    ["run", "resources", "accelerators", "any_of", "envs", "num_nodes", "services", "image", "command",
     "environment", "deploy", "apiVersion", "kind", "spec", "template", "containers", "args", "env",
     "servingEngineSpec", "modelSpec", "modelURL", "vllmConfig", "modelArtifacts", "decode", "parallelism",
     "model", "model_id", "base_args", "features", "variants", "predictor", "modelFormat", "name", "limits"]
)  # fmt: skip
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10), st.floats(allow_nan=True), st.text(max_size=12),
    st.sampled_from(["vllm serve Qwen/Qwen3-8B --tp 2", "H100:8", "vllm/vllm-openai:v0.33.0", "hf://Qwen/Qwen3-8B",
                     "huggingface", "LeaderWorkerSet", "Deployment", "$(X)", "${Y:-1}", "--max-model-len"]),
)  # fmt: skip
_YAML = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=5)),
    max_leaves=25,
)


@pytest.mark.parametrize("suffix", [".yaml", ".sh"])
def test_no_file_crashes_the_readers(suffix, tmp_path_factory):
    """Any text, and YAML of the formats' own keys in any shape: candidates or one line of bad input."""
    import yaml  # type: ignore[import-untyped]
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st_

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st_.one_of(st_.text(max_size=300), _YAML.map(lambda d: yaml.safe_dump(d, sort_keys=False))))
    def check(text: str) -> None:
        path = tmp_path_factory.mktemp("fuzz") / f"candidate{suffix}"
        path.write_text(text)
        try:
            read_deployments(str(path))
        except BadInput as exc:
            assert "\n" not in exc.message and exc.message

    check()


@pytest.mark.parametrize("suffix", [".sh", ".txt"])
def test_a_command_line_whose_json_argument_reads_as_yaml_is_still_a_command_line(suffix, tmp_path):
    path = tmp_path / f"serve{suffix}"
    path.write_text(
        'vllm serve Qwen/Qwen3-8B --speculative-config \'{"method": "ngram", "num_speculative_tokens": 3}\'\n'
    )
    (candidate,) = read_deployments(str(path))
    assert candidate.format == "vllm-command" and candidate.model.value == "Qwen/Qwen3-8B"
    assert candidate.args.of("not_planned") == ['--speculative-config {"method": "ngram", "num_speculative_tokens": 3}']


YAML_FILES = [p for p in ALL_FILES if p.suffix == ".yaml" and p.name not in REFUSED]


def _paths(doc, prefix=()):
    """Every path into a YAML document."""
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _paths(value, (*prefix, index))


def _mutated(doc, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        out = dict(doc)
        if value is _DROP and not rest:
            out.pop(head, None)
        else:
            out[head] = _mutated(doc[head], rest, value)
        return out
    out = list(doc)
    if value is _DROP and not rest:
        del out[head]
    else:
        out[head] = _mutated(doc[head], rest, value)
    return out


_DROP = object()


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: p.name)
def test_mutated_real_files_give_candidates_or_one_line(path, tmp_path_factory):
    """Each YAML fixture with one field replaced (any type), dropped or emptied: candidates whose
    settings check out, or one line of bad input - never an internal error."""
    import yaml  # type: ignore[import-untyped]
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st_

    from apron.plan.candidate import candidate_settings

    docs = list(yaml.safe_load_all(path.read_text()))
    targets = [(i, p) for i, d in enumerate(docs) if d is not None for p in _paths(d)]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st_.sampled_from(targets), st_.one_of(_YAML, st_.just(_DROP)))
    def check(target, value):
        index, where = target
        changed = [(_mutated(d, where, value) if i == index else d) for i, d in enumerate(docs)]
        if any(d is _DROP for d in changed):
            return
        out = tmp_path_factory.mktemp("mutated") / path.name
        out.write_text(yaml.safe_dump_all(changed, sort_keys=False))
        try:
            for candidate in read_deployments(str(out)):
                try:
                    candidate_settings(candidate)
                except BadInput as exc:
                    assert "\n" not in exc.message
        except BadInput as exc:
            assert "\n" not in exc.message and exc.message

    check()


def test_a_config_file_beside_the_script_is_read_in_as_vllm_does(tmp_path):
    (tmp_path / "conf.yaml").write_text("max-model-len: 4096\ngpu-memory-utilization: 0.8\n")
    (tmp_path / "run.sh").write_text("vllm serve Qwen/Qwen3-8B --config conf.yaml --max-model-len 2048 -tp 2\n")
    (candidate,) = read_deployments(str(tmp_path / "run.sh"))
    # the command line wins over the file (vLLM puts the file's flags first)
    assert candidate.settings == {"max_model_len": 2048, "gpu_memory_utilization": 0.8, "tensor_parallel_size": 2}
    assert candidate.provenance()["gpu_memory_utilization"] == "conf.yaml: gpu-memory-utilization"
    (tmp_path / "conf.yaml").unlink()
    (candidate,) = read_deployments(str(tmp_path / "run.sh"))
    assert "--config conf.yaml" in candidate.not_planned() and any("not beside" in n for n in candidate.notes)


def test_the_scripts_own_arguments_are_the_callers():
    from apron.deploy.formats.base import script_founds

    (found,) = script_founds('vllm serve "$1" -tp 2 "$@"\n', "")
    assert [a.text for a in found.argv] == ["$1", "-tp", "2", "$@"] and found.argv[-1].unresolved == ("$@",)
    args = parse_serve_args(found.argv, release_options("0.33.0"))
    assert args.flags[-1].use == "not_planned" and "caller" in args.flags[-1].why


@pytest.mark.parametrize(
    "line,entry",
    [
        ("python -m vllm.entrypoints.cli.main serve Qwen/Qwen3-8B -tp 2", "python -m vllm.entrypoints.cli.main serve"),
        ("python3 -m vllm.entrypoints.api_server --model Qwen/Qwen3-8B -tp 2", "python -m vllm.entrypoints.api_server"),
        ("bash -c -- 'vllm serve Qwen/Qwen3-8B -tp 2'", "vllm serve"),
        (
            "docker run --gpus all vllm/vllm-openai:v0.10.1.1 Qwen/Qwen3-8B -tp 2",
            "docker run vllm/vllm-openai:v0.10.1.1",
        ),
    ],
)
def test_other_ways_to_start_vllm(line, entry, tmp_path):
    (tmp_path / "run.sh").write_text(line + "\n")
    (candidate,) = read_deployments(str(tmp_path / "run.sh"))
    assert candidate.entry.startswith(entry) and candidate.model.value == "Qwen/Qwen3-8B"
    assert candidate.settings["tensor_parallel_size"] == 2
    if "v0.10.1.1" in line:
        assert candidate.engine.value == "0.10.1.1"
    if "api_server --model" in line and "openai" not in line:
        assert any("no such module" in n for n in candidate.notes)
