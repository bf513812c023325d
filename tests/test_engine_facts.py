"""Facts loading, the planner's query helpers, templates, diff and the `apron engine` commands, on
stand-in releases synced into an empty Apron home."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import engine_wheel  # tests/fixtures/engine_wheel.py
import pytest

from apron.cli import main
from apron.engine import facts as facts_module
from apron.engine import source as source_module
from apron.engine.diff import diff_facts
from apron.engine.facts import choose_version, load_facts
from apron.engine.sync import sync
from apron.engine.templates import fields, render
from apron.errors import BadInput

NEWER = {
    # 0.99.1 adds an architecture, drops one, adds a parser and changes a mirrored function.
    "vllm/model_executor/models/registry.py": engine_wheel.source_files()["vllm/model_executor/models/registry.py"]
    .replace('"ToyNoPPForCausalLM": ("toy", "ToyNoPPForCausalLM"),\n', "")
    .replace(
        '"ToyVLForConditionalGeneration": ("toy_vl", "ToyVLForConditionalGeneration"),',
        '"ToyVLForConditionalGeneration": ("toy_vl", "ToyVLForConditionalGeneration"),\n'
        '    "ToyVL2ForConditionalGeneration": ("toy_vl", "ToyVLForConditionalGeneration"),',
    ),
    "vllm/tool_parsers/__init__.py": engine_wheel.source_files()["vllm/tool_parsers/__init__.py"].replace(
        '"openai": ', '"toy_tools": ("toy_tool_parser", "ToyToolParser"),\n    "openai": '
    ),
    "vllm/v1/worker/utils.py": engine_wheel.source_files()["vllm/v1/worker/utils.py"]
    .replace("import math\n", "import math\n\n# a comment moves the function, the hash follows the text\n")
    .replace("return requested_memory", "return int(requested_memory)"),
}


@pytest.fixture
def two_versions(apron_home, tmp_path):
    for version, edits in (("0.99.0", None), ("0.99.1", NEWER)):
        sync(str(engine_wheel.build_wheel(tmp_path / version, version=version, edits=edits)))
    return apron_home


def test_templates_render_like_python():
    template = "a {x!r} b {y:.2f} c {{literal}} {self.z[0]} {w:>{width}}"
    assert fields(template) == ["x", "y", "self.z[0]", "w"]
    values = {"x": "q", "y": 1.5, "self.z[0]": 7, "w": "k", "width": 3}
    assert render(template, values) == ("a 'q' b 1.50 c {literal} 7   k", True)
    x, y, z, w, width = "q", 1.5, [7], "k", 3  # noqa: F841 - the f-string below is the reference
    assert render(template, values)[0] == f"a {x!r} b {y:.2f} c {{literal}} {z[0]} {w:>{width}}"
    assert render("a {missing} b", {}) == ("a {missing} b", False)


def test_known_versions_and_load(two_versions):
    assert {"0.99.0", "0.99.1"} <= set(facts_module.known_versions())
    assert facts_module.facts_origin("0.99.1") == "synced"
    assert load_facts("v0.99.1").version == "0.99.1"
    with pytest.raises(BadInput, match=r"no facts for this release .* `apron engine sync vllm==9\.9\.9`"):
        load_facts("9.9.9")


def test_choose_version(two_versions):
    versions = ["0.99.0", "0.99.1"]
    assert choose_version("ToyForCausalLM", versions).version == "0.99.1"
    choice = choose_version("ToyNoPPForCausalLM", versions)
    assert choice.version == "0.99.0"
    assert "newest known release that registers ToyNoPPForCausalLM; vllm 0.99.1 does not" in choice.reason
    none = choose_version("OldForCausalLM", versions)
    assert none.version is None and "supported until v0.10.2" in none.reason


def test_unregistered_architecture_refusals(two_versions):
    facts = load_facts("0.99.0")
    assert facts.unregistered_architecture_refusal(["ToyForCausalLM"]) is None
    old = facts.unregistered_architecture_refusal(["OldForCausalLM"])
    assert old.message == (
        "Model architecture OldForCausalLM was supported in vLLM until v0.10.2, and is not "
        "supported anymore. Please use an older version of vLLM if you want to use this model "
        "architecture."
    )
    assert old.is_exact and old.exception == "ValueError"
    plugin = facts.unregistered_architecture_refusal(["PluginForCausalLM"])
    assert "Please install the plugin at https://example.org/plugin if you want" in plugin.message
    unknown = facts.unregistered_architecture_refusal(["FooForCausalLM"])
    order = facts.data["registry"]["order"]
    assert unknown.message == (
        "Model architectures ['FooForCausalLM'] are not supported for now. Supported "
        f"architectures: dict_keys({order!r})"
    )
    assert unknown.is_exact


def test_quantization_capability_refusal(two_versions):
    facts = load_facts("0.99.0")
    assert facts.quantization_capability_refusal("fp8", (8, 9)) is None
    refusal = facts.quantization_capability_refusal("mxfp4", "7.5")
    assert refusal.message == (
        "The quantization method mxfp4 is not supported for the current GPU. Minimum "
        "capability: 80. Current capability: 75."
    )
    assert facts.quantization_capability_refusal("platform_only", (7, 0)) is None  # minimum not static


@pytest.mark.parametrize(
    "total_bytes, name, capability, expected",
    [
        (85_017_493_504, "NVIDIA H100 80GB HBM3", (9, 0), (1024, 8192, 1)),
        (85_174_583_296, "NVIDIA A100-SXM4-80GB", (8, 0), (256, 2048, 2)),  # "a100" keeps the small tier
        (191_541_067_776, "NVIDIA B200", (10, 0), (1024, 16384, 0)),
        (128 * 2**30, "NVIDIA GB10", (12, 1), (256, 2048, 2)),  # excluded capability
        (25_386_352_640, "NVIDIA GeForce RTX 4090", "8.9", (256, 2048, 2)),
    ],
)
def test_batch_defaults(two_versions, total_bytes, name, capability, expected):
    result = load_facts("0.99.0").batch_defaults(total_bytes, name, capability)
    assert (result.max_num_seqs, result.max_num_batched_tokens, result.tier_index) == expected
    assert "get_batch_defaults" in result.basis


def test_graph_size_parsers_tokenizer(two_versions):
    facts = load_facts("0.99.0")
    assert facts.cudagraph_default_max_size((10, 3)) == 1024
    assert facts.cudagraph_default_max_size((9, 0)) == 512
    assert facts.reasoning_parser("qwen3")["class"] == "Qwen3ReasoningParser"
    assert facts.tool_parser("nope") is None
    assert facts.default_tokenizer_mode("ToyForCausalLM") == "toy_mode"
    assert facts.default_tokenizer_mode("ToyHybridForCausalLM") is None
    assert facts.has_tokenizer_mode("slow") and not facts.has_tokenizer_mode("nope")
    assert facts.backend_priority((10, 0))[0] == "FLASHINFER" and facts.backend_priority((8, 0))[0] == "FLASH_ATTN"


def test_diff(two_versions):
    diff = diff_facts(load_facts("0.99.0").full_data, load_facts("0.99.1").full_data)
    assert diff["architectures"]["added"] == ["ToyVL2ForConditionalGeneration"]
    assert diff["architectures"]["removed"] == ["ToyNoPPForCausalLM"]
    assert diff["parsers"]["tool"]["added"] == ["toy_tools"]
    assert diff["mirrored_functions"]["changed"] == ["request_memory"]
    assert diff["mirrored_functions"]["note"] == "plans for these layouts need re-checking"
    assert diff["defaults"] == {}


def test_cli_list_show_diff(two_versions, capsys):
    assert main(["engine", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["version"] for r in rows if r["origin"] == "synced"] == ["0.99.0", "0.99.1"]
    assert main(["engine", "show", "vllm==0.99.1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["num_architectures"] == 11 and shown["num_tool_parsers"] == 4
    assert main(["engine", "show", "0.99.1"]) == 0
    assert "vllm 0.99.1" in capsys.readouterr().out
    assert main(["engine", "diff", "0.99.0", "0.99.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["architectures"]["removed"] == ["ToyNoPPForCausalLM"]
    assert main(["engine", "diff", "0.99.0", "0.99.1"]) == 0
    out = capsys.readouterr().out
    assert "architectures added (1): ToyVL2ForConditionalGeneration" in out
    assert "request_memory" in out and "re-checking" in out


def test_cli_sync_local_wheel_and_errors(apron_home, tmp_path, capsys):
    wheel = engine_wheel.build_wheel(tmp_path)
    assert main(["engine", "sync", str(wheel), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["num_architectures"] == 11
    assert "parsing" in captured.err and "wrote" in captured.err  # progress goes to stderr
    assert main(["engine", "sync", str(tmp_path / "missing.whl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("apron: error: ") and "missing.whl" in err and "\n" not in err
    assert main(["engine", "show", "1.2.3"]) == 2


def test_sync_from_index_unknown_version_is_bad_input(apron_home, monkeypatch):
    def fake_run(command, **kwargs):
        assert command[-1] == "vllm==9.9.9" and "--no-deps" in command
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for vllm==9.9.9")

    monkeypatch.setattr(source_module.subprocess, "run", fake_run)
    with pytest.raises(BadInput, match=r"vllm==9\.9\.9: no such release"):
        sync("vllm==9.9.9")
    assert main(["engine", "sync", "vllm==9.9.9"]) == 2


def test_sync_from_index_uses_pip_download(apron_home, tmp_path, monkeypatch):
    built = engine_wheel.build_wheel(tmp_path / "built", version="0.99.2")

    def fake_run(command, **kwargs):
        dest = command[command.index("--dest") + 1]
        (tmp_path / "built" / built.name).rename(f"{dest}/{built.name}")
        return subprocess.CompletedProcess(command, 0, "Saved", "")

    monkeypatch.setattr(source_module.subprocess, "run", fake_run)
    result = sync("vllm==0.99.2")
    assert result.version == "0.99.2" and result.path.parent == apron_home / "cache" / "engine-facts"
    assert load_facts("0.99.2").data["source"]["kind"] == "wheel"


def test_a_core_companion_written_before_architecture_lines_still_reads(tmp_path):
    """Facts synced by an earlier Apron have a one-line core companion whose registry still holds the
    architectures: it reads as it did, and the current format reads to the same facts."""
    import gzip as gzip_module

    from apron.engine.facts import DATA_DIR, MESSAGE_KEYS, EngineFacts, core_bytes, read_core

    full = json.loads(gzip_module.decompress(Path(DATA_DIR, "vllm-0.33.0.json.gz").read_bytes()))
    core = {key: value for key, value in full.items() if key not in MESSAGE_KEYS}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(core, sort_keys=True, separators=(",", ":")) + "\n")
    new = tmp_path / "new.json"
    new.write_bytes(core_bytes(full))
    old_data, old_lines = read_core(str(old))
    new_data, new_lines = read_core(str(new))
    assert old_lines is None and new_lines is not None
    old_facts = EngineFacts(old_data)
    new_facts = EngineFacts(new_data, architecture_lines=new_lines)
    assert old_facts.registry == new_facts.registry == full["registry"]
    arch = "Qwen3ForCausalLM"
    assert old_facts.architecture(arch) == new_facts.architecture(arch) == full["registry"]["architectures"][arch]
