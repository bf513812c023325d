"""Failures the checkpoint's files cause, on real error text: boots of the vLLM 0.32 CPU engine on a
tiny checkpoint broken one way at a time (tests/fixtures/logs/checkpoint_files/*.log, made by its
make_logs.py), and the loaders' own errors produced by calling tokenizers, safetensors, sentencepiece,
transformers and huggingface_hub (library_errors.py, in the engine's venv and with older releases).
Each is a family of its own, blamed where the fault is, with what to check; no flag change fixes it,
so no rule applies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from apron.plan.settings import UserSettings
from apron.report.diagnosis import render_diagnosis
from apron.rules import diagnose, fingerprint
from apron.rules.families import family_check
from rules_text import LOGS

HERE = LOGS / "checkpoint_files"
LIBRARIES = json.loads((HERE / "index.json").read_text())["_libraries"]

# name -> (family, blame): the engine's own log of each broken checkpoint.
ENGINE_LOGS = {
    "tokenizer_json_truncated": ("tokenizer_files_invalid", "model"),  # a bare JSONDecodeError, read by its frames
    "tokenizer_json_newer_model": ("tokenizer_files_invalid", "model"),
    "tokenizer_json_merges_mismatch": ("tokenizer_files_invalid", "model"),
    "tokenizer_files_missing": ("tokenizer_files_invalid", "model"),
    "bpe_merges_mismatch": ("tokenizer_files_invalid", "model"),
    "sentencepiece_model_corrupt": ("tokenizer_files_invalid", "model"),
    "tokenizer_config_invalid": ("tokenizer_files_invalid", "model"),
    "tokenizer_class_unknown": ("tokenizer_files_invalid", "model"),  # transformers 5.19 falls back, then fails
    "safetensors_header_cut": ("checkpoint_json_invalid", "model"),  # vLLM reads the header in its config
    "config_missing": ("model_path_invalid", "harness"),
    "hub_gated_no_token": ("gated_repo", "harness"),
    "hub_private_no_token": ("model_path_invalid", "harness"),
    "hub_unreachable": ("hub_unreachable", "host"),
}
# case -> family: the loaders' errors, printed as Python prints an exception chain.
LIBRARY_CASES = {
    "tokenizer_json_newer_model": "tokenizer_files_invalid",
    "tokenizer_json_merges_mismatch": "tokenizer_files_invalid",
    "bpe_merges_mismatch": "tokenizer_files_invalid",
    "bpe_merges_line_invalid": "tokenizer_files_invalid",
    "sentencepiece_model_corrupt": "tokenizer_files_invalid",
    "tokenizer_files_missing": "tokenizer_files_invalid",
    "tokenizer_model_missing": "checkpoint_file_missing",
    "safetensors_data_cut": "weights_corrupt",
    "safetensors_header_too_small": "weights_corrupt",
    "safetensors_header_length_past_file": "weights_corrupt",
    "safetensors_header_invalid": "weights_corrupt",
    "hub_gated_no_token": "gated_repo",
    "hub_private_no_token": "model_path_invalid",
    "hub_file_missing": "checkpoint_file_missing",
    "hub_offline_not_cached": "hub_offline_not_cached",
    "hub_local_files_only_not_cached": "hub_offline_not_cached",
    "hub_unreachable": "hub_unreachable",
    "transformers_gated_no_token": "gated_repo",
    "transformers_file_missing": "checkpoint_file_missing",
    "transformers_unreachable": "hub_unreachable",
}


def test_every_fixture_is_expected():
    assert {p.stem for p in HERE.glob("*.log")} == set(ENGINE_LOGS)
    assert LIBRARIES["vllm"].startswith("0.32.0") and LIBRARIES["transformers"] == "5.19.0"


@pytest.mark.parametrize("name", sorted(ENGINE_LOGS))
def test_the_engine_log_of_a_broken_checkpoint(name, apron_home):
    log = (HERE / f"{name}.log").read_text()
    found = fingerprint(log)
    assert (found.family, found.blame) == ENGINE_LOGS[name], (found.exception, found.message)
    assert found.check and found.to_json()["check"] == family_check(found.family)
    diagnosis = diagnose(log, user_settings=UserSettings(max_model_len=512))
    assert diagnosis.candidates == ()  # no flag change fixes a broken file
    assert f"check            {found.check[:40]}" in render_diagnosis(diagnosis, f"{name}.log")


def test_the_tokenizer_is_named_on_the_check_line():
    check = family_check("tokenizer_files_invalid") or ""
    for file in ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "tokenizer_config.json"):
        assert file in check
    assert "revision" in check


def _chain_as_printed(chain: list[dict]) -> str:
    """A traceback's tail as Python prints a chain: each exception, then the one raised from it."""
    parts = []
    for index, link in enumerate(chain):
        if index:
            parts += ["", "The above exception was the direct cause of the following exception:", ""]
        first, *rest = link["message"].split("\n")
        parts += ["Traceback (most recent call last):", '  File "/x/loader.py", line 1, in load', "    raise"]
        parts += [f"{link['exception']}: {first}".rstrip(), *rest]
    return "\n".join(parts)


def _library_cases() -> list[tuple[str, dict]]:
    out = []
    for file in ("library_errors-engine-venv.json", "library_errors-older.json"):
        for entry in json.loads((HERE / file).read_text()):
            out.append((f"{entry['case']}[{entry['library']}]", entry))
    return out


@pytest.mark.parametrize("label, entry", _library_cases(), ids=[label for label, _ in _library_cases()])
def test_the_loaders_own_error_text(label, entry, apron_home):
    assert entry["chain"], f"{label}: the call did not fail"
    found = fingerprint(_chain_as_printed(entry["chain"]))
    assert found is not None and found.family == LIBRARY_CASES[entry["case"]], (label, found and found.message)
    assert found.check


def test_a_missing_file_is_named_in_the_fields():
    (entry,) = [e for _, e in _library_cases() if e["case"] == "transformers_file_missing"]
    assert fingerprint(_chain_as_printed(entry["chain"])).fields == {"file": "tokenizer.model"}


def test_the_library_texts_are_what_the_engine_venv_prints_today(tmp_path):
    """Regenerated by calling the libraries where the engine has them (skipped without that venv)."""
    from engine_env import vllm_python

    done = subprocess.run(
        [vllm_python(), str(HERE / "library_errors.py")], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    saved = json.loads((HERE / "library_errors-engine-venv.json").read_text())
    # A new engine venv prints new texts: write the file again (library_errors.py > it) and read the diff.
    assert json.loads(done.stdout) == saved


def test_the_fixture_logs_carry_no_machine_paths():
    for path in HERE.iterdir():
        if path.suffix in (".log", ".json"):
            text = path.read_text()
            assert "/work/" not in text and "/root/" not in text and "/tmp/" not in text, path.name


def test_the_generators_name_every_case():
    source = (HERE / "make_logs.py").read_text() + (HERE / "library_errors.py").read_text()
    for name in (*ENGINE_LOGS, *LIBRARY_CASES):
        assert f"{name}" in source, name
    assert Path(HERE / "index.json").exists()


@pytest.mark.parametrize("version", ["0.29.0", "0.33.0"])
def test_a_tokenizer_class_this_transformers_lacks(version, apron_home):
    """vLLM's own refusal (tokenizers/hf.py, from the shipped facts), and the transformers text it
    wraps (models/auto/tokenization_auto.py of transformers 4.46.3, the f-string with its value)."""
    from rules_text import render, shipped_refusals, template_with

    refusal = template_with(shipped_refusals(version), "Failed to load the tokenizer.")
    cause = "ValueError: Tokenizer class FrobnicatorTokenizer does not exist or is not currently imported."
    log = "\n".join([cause, "", "The above exception was the direct cause of the following exception:", ""])
    log += f"\n{refusal['exception']}: {render(refusal['template'], {})}"
    for text in (log, f"{refusal['exception']}: {render(refusal['template'], {})}", cause):
        found = fingerprint(text, engine_version=version)
        assert (found.family, found.blame) == ("tokenizer_class_unavailable", "model"), text
        assert "--trust-remote-code" in (found.check or "")
