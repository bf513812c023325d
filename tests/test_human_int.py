"""Issue 22 section 3: `--max-model-len 32k` and the other suffixed integers, read exactly as the pinned
release's own argument parser reads them. The engine venv's vLLM (the CPU build, 0.32.0) parses the same
texts with its own functions and its own `vllm serve` parser; Apron's answer must be the same number, or a
refusal where vLLM refuses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from apron.errors import BadInput
from apron.plan.settings import (
    HUMAN_READABLE_FLAGS,
    HUMAN_READABLE_OR_AUTO_FLAGS,
    OPTIONAL_FLAGS,
    human_readable_int,
    human_readable_int_or_auto,
)

TEXTS = [
    "4096", " 4096 ", "+4096", "1_024", "0", "-1", "auto", "AUTO", "32k", "32K", "32m", "2M", "1g", "1G", "1t",
    "1T", "25.6k", "4.35k", "1.1k", "0.5m", "2.5K", "1.5G", "32kb", "32 k", "k", "1e3", "0x10", "", "32ki",
    "١٢٣", "٣k", "12.k", ".5k",
]  # fmt: skip

# vLLM's functions and parser, run in the engine's own Python: for each text, the number or the refusal;
# and for every integer option of `vllm serve`, the name of the type its parser applies.
PROBE = r"""
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser, human_readable_int, human_readable_int_or_auto
from vllm.engine.arg_utils import AsyncEngineArgs
out = {"int": {}, "or_auto": {}, "types": {}}
for text in json.loads(sys.argv[1]):
    for key, parse in (("int", human_readable_int), ("or_auto", human_readable_int_or_auto)):
        try:
            out[key][text] = parse(text)
        except Exception as exc:
            out[key][text] = "refused: " + type(exc).__name__
parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
for action in parser._actions:
    kind, optional = action.type, False
    if getattr(kind, "__name__", None) == "_optional_type":  # arg_utils.py optional_type(inner)
        kind, optional = kind.__closure__[0].cell_contents, True
    name = getattr(kind, "__name__", None)
    if name in ("human_readable_int", "human_readable_int_or_auto", "int"):
        for option in action.option_strings:
            if option.startswith("--") and "_" not in option:
                out["types"][option] = [name, optional]
print(json.dumps(out))
"""


def _apron(parse, text: str) -> int | str:
    try:
        return parse(text)
    except BadInput:
        return "refused"


@pytest.fixture(scope="module")
def vllm_reads() -> dict:
    from engine_env import vllm_python

    done = subprocess.run([vllm_python(), "-c", PROBE, json.dumps(TEXTS)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_text_reads_as_the_release_reads_it(vllm_reads):
    for text in TEXTS:
        theirs = vllm_reads["int"][text]
        mine = _apron(human_readable_int, text)
        assert mine == (theirs if isinstance(theirs, int) else "refused"), text
        theirs = vllm_reads["or_auto"][text]
        if theirs == -1:  # vLLM's auto-fit: Apron parses it and refuses to plan it, in one line
            with pytest.raises(BadInput, match="auto-fit length is not planned"):
                human_readable_int_or_auto(text)
        else:
            assert _apron(human_readable_int_or_auto, text) == (theirs if isinstance(theirs, int) else "refused"), text


PLANNED_INTEGERS = ("--max-model-len", "--max-num-batched-tokens", "--kv-cache-memory-bytes", "--max-num-seqs")


def test_the_flags_that_take_suffixes_are_the_releases(vllm_reads):
    types = {flag: vllm_reads["types"][flag] for flag in PLANNED_INTEGERS}
    assert {f for f, (t, _) in types.items() if t == "human_readable_int_or_auto"} == set(HUMAN_READABLE_OR_AUTO_FLAGS)
    assert {f for f, (t, _) in types.items() if t == "human_readable_int"} == set(HUMAN_READABLE_FLAGS)
    assert types["--max-num-seqs"][0] == "int" and vllm_reads["types"]["--tensor-parallel-size"][0] == "int"
    assert {f for f, (_, optional) in types.items() if optional} >= set(OPTIONAL_FLAGS)


def test_an_optional_flag_reads_none_as_not_given(apron_home_with_facts):
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", "Qwen/Qwen3-0.6B", "--gpu", "cpu", "--gpu-memory-bytes",
         str(16 * 2**30), "--kv-cache-memory-bytes", "None", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert json.loads(done.stdout)["settings"]["kv_cache_memory_bytes"] is None


@pytest.mark.parametrize(
    ("args", "setting"),
    [
        (["--max-model-len", "32k"], ("max_model_len", 32000)),
        (["--max-model-len", "32K"], ("max_model_len", 32768)),
        (["--max-num-batched-tokens", "4k"], ("max_num_batched_tokens", 4000)),
        (["--max-num-batched-tokens", "2K"], ("max_num_batched_tokens", 2048)),
    ],
)
def test_the_cli_plans_the_number_vllm_would_run(args, setting, apron_home_with_facts):
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", "Qwen/Qwen3-8B", "--gpu", "H100", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    document = json.loads(done.stdout)
    name, value = setting
    assert document["settings"][name] == value
    assert f"{args[0]} {value}" in document["command"]  # the command says the number, not the suffix


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2.5K", "'2.5K': decimals are not allowed with binary suffixes like K; did you mean 2.5k?"),
        ("auto", "'auto': vLLM's auto-fit length is not planned; give the length to plan (e.g. 32k)"),
        ("32 k", "'32 k' is not an integer as vLLM reads it (e.g. 32768, 32k = 32,000, 32K = 32,768)"),
    ],
)
def test_a_text_vllm_refuses_or_apron_cannot_plan_is_one_line(value, message, apron_home_with_facts):
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", "plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", value],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"apron: error: Invalid value for '--max-model-len': {message}"]
