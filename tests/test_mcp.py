"""`apron mcp` is the command line's door, called with the official SDK's own client over stdio against
the real server process. Every tool's schema is its CLI command's parameters (cli/options.py, one
definition); every tool is called once right (the document equals the CLI's --json output), once with a
misspelled argument and once with a mistyped one (a tool error carrying the CLI's one-line message for
the same command line, word for word); the server answers after errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mcp  # noqa: F401 - the SDK is a test dependency (requirements-dev-lock.txt): CI must run this file, never skip it
import pytest

from apron.cli.mcp import TOOLS, argument_name, command_of
from apron.records.documents import BootRecord, EngineIdentity, HardwareIdentity, LogRef, PlanRecord
from apron.records.store import RecordStore
from conftest import FIXTURES
from plan_helpers import a_plan

LOG = FIXTURES / "logs" / "d_kv_too_small_fast_1048575.log"
TEXT_ONLY = {"plan": {"explain", "html"}, "fit": {"top"}, "records_show": {"log", "html"}}


def cli(env: dict, *args: str) -> tuple[int, object, str]:
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    return done.returncode, (json.loads(done.stdout) if done.stdout.strip() else None), done.stderr.strip()


async def session_calls(env: dict, calls: list[tuple[str, dict]]) -> tuple[list, list]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "apron.cli", "mcp"], env=env)
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def text_of(result) -> str:
    (content,) = result.content
    return content.text


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A record store with a plan and a boot of it (for records_show and records_compare)."""
    records = RecordStore(tmp_path / "records")
    plan_id = records.put(PlanRecord(a_plan()))
    hardware = HardwareIdentity("gpu", gpu_name="NVIDIA L4", gpu_count=1)
    records.put(BootRecord("2026-01-01T00:00:00Z", plan_id, "healthy", "local", EngineIdentity("0.33.0"), hardware,
                           LogRef("0" * 64, 0)))  # fmt: skip
    return records.root


def test_every_tool_is_its_cli_command(tmp_path, store, apron_home_with_facts):
    env = {**os.environ, "APRON_HOME": str(apron_home_with_facts)}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(cli(env, "plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--json")[1]))
    record = str(store)
    plan_id = RecordStore(store).find(PlanRecord)[0].id
    # tool: (right arguments, the CLI words they stand for; misspelled; mistyped and its CLI words or None)
    cases = {
        "plan": (
            {"source": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_len": "8k", "kv_cache_memory_bytes": None},
            ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8k"],
            {"source": "Qwen/Qwen3-8B", "gpu": "H100", "max_modle_len": 8192},
            (
                {"source": "Qwen/Qwen3-8B", "gpu": "H100", "tp": "two"},
                ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--tp", "two"],
            ),
        ),
        "fit": (
            {"source": "Qwen/Qwen3-8B", "users": 16, "context": 16384, "gpus": "L4,H100", "max_gpus": 2},
            ["fit", "Qwen/Qwen3-8B", "--users", "16", "--context", "16384", "--gpus", "L4,H100", "--max-gpus", "2"],
            {"source": "Qwen/Qwen3-8B", "users": 16, "contxt": 8192},
            ({"source": "Qwen/Qwen3-8B", "users": "many"}, ["fit", "Qwen/Qwen3-8B", "--users", "many"]),
        ),
        "diagnose": (
            {"log_text": LOG.read_text(), "plan": str(plan_file)},
            ["diagnose", str(LOG), "--plan", str(plan_file)],
            {"logfile": str(LOG), "plann": str(plan_file)},
            ({"logfile": str(LOG), "engine": ["vllm==0.32.0"]}, None),
        ),
        "records_list": (
            {"records": record, "kind": "plan"},
            ["records", "list", "--records", record, "--kind", "plan"],
            {"records": record, "knd": "plan"},
            ({"records": record, "kind": 3}, ["records", "list", "--records", record, "--kind", "3"]),
        ),
        "records_show": (
            {"record_id": plan_id[:8], "records": record},
            ["records", "show", plan_id[:8], "--records", record],
            {"record_id": plan_id[:8], "record": record},
            ({"record_id": plan_id[:8], "records": True}, None),
        ),
        "records_compare": (
            {"records": record},
            ["records", "compare", "--records", record],
            {"records": record, "record": plan_id},
            ({"records": record, "record_id": {"id": plan_id}}, None),
        ),
        # engine_list takes no argument: any name is misspelled, and no value can be mistyped
        "engine_list": ({}, ["engine", "list"], {"verbose": True}, None),
    }
    assert set(cases) == {spec.name for spec in TOOLS}
    calls = []
    for name, (right, _, misspelled, mistyped) in cases.items():
        calls += [(name, right), (name, misspelled), (name, mistyped[0] if mistyped else {"json": "yes"})]
    calls.append(("plan", cases["plan"][0]))
    tools, results = __import__("anyio").run(session_calls, env, calls)

    # the schema is the command's parameters, named after their flags; nothing else is accepted
    by_name = {t.name: t for t in tools}
    for spec in TOOLS:
        schema = by_name[spec.name].input_schema
        wanted = (
            {argument_name(p) for p in command_of(spec).params} - {"json", "help"} - TEXT_ONLY.get(spec.name, set())
        )
        assert set(schema["properties"]) == wanted | set(spec.text_inputs), spec.name
        assert schema["additionalProperties"] is False
    plan_schema = by_name["plan"].input_schema
    assert {"kv_cache_memory_bytes", "max_model_len", "from", "gpu_memory_bytes", "limit_mm_per_prompt"} <= set(
        plan_schema["properties"]
    )
    assert plan_schema["properties"]["tp"] == {
        "type": "integer",
        "description": "--tp: Tensor-parallel size.",
        "default": 1,
    }
    assert by_name["fit"].input_schema["required"] == ["users"]

    for index, (name, (_, words, misspelled, mistyped)) in enumerate(cases.items()):
        right, wrong_name, wrong_type = results[3 * index : 3 * index + 3]
        code, document, _ = cli(env, *words, "--json")
        assert not right.is_error, (name, text_of(right))
        assert json.loads(text_of(right)) == document, name
        assert right.structured_content == (document if isinstance(document, dict) else {"result": document}), name
        # misspelled: the CLI's own refusal of the flag it would be
        flag = next(
            k
            for k in misspelled
            if k not in {"source", "logfile", "record_id"} and k not in by_name[name].input_schema["properties"]
        )
        cli_words = [*words[: len(spec_words(name))], f"--{flag.replace('_', '-')}"]
        if misspelled[flag] is not True:
            cli_words.append(str(misspelled[flag]))
        code, _, err = cli(env, *cli_words, "--json")
        assert code == 2 and wrong_name.is_error, name
        assert f"apron: error: {text_of(wrong_name)}" == err, name
        assert "No such option" in err
        # mistyped: one line; the CLI's own words where a command line can say the same
        assert wrong_type.is_error and "\n" not in text_of(wrong_type), name
        mistyped_words = mistyped[1] if mistyped else None
        if mistyped is None:
            continue
        if mistyped_words is not None:
            code, _, err = cli(env, *mistyped_words, "--json")
            assert code == 2 and f"apron: error: {text_of(wrong_type)}" == err, name
        else:
            assert text_of(wrong_type).startswith("Invalid value for '"), (name, text_of(wrong_type))
    assert json.loads(text_of(results[0]))["settings"]["max_model_len"] == 8000  # "8k", as vLLM reads it
    assert not results[-1].is_error  # the server answers after errors


def spec_words(name: str) -> tuple[str, ...]:
    return next(spec.words for spec in TOOLS if spec.name == name)


def test_without_the_sdk_the_command_says_how_to_get_it(tmp_path):
    """`apron mcp` with the SDK hidden: exit 2 and the extra to install, not a traceback."""
    hider = tmp_path / "hide" / "mcp"
    hider.mkdir(parents=True)
    (hider / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    env = {**os.environ, "PYTHONPATH": str(hider.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", "mcp"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "pip install 'apron[mcp]'" in done.stderr
