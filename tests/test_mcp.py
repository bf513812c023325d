"""`apron mcp` with the official SDK's own client over stdio, against the real server process: every
tool returns the same JSON document the CLI prints with --json; bad arguments are tool errors with the
CLI's one-line message, and the server lives on after them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK is in the test extra: pip install -e '.[test]'")

from conftest import FIXTURES  # noqa: E402

TOOLS = {"plan", "fit", "diagnose", "records_list", "records_show", "records_compare", "engine_list"}
LOG = FIXTURES / "logs" / "d_kv_too_small_fast_1048575.log"


def cli_json(env: dict, *args: str) -> tuple[int, object, str]:
    done = subprocess.run(
        [sys.executable, "-m", "apron.cli", *args, "--json"], capture_output=True, text=True, env=env, timeout=120
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


def test_tools_return_the_clis_json_over_stdio(tmp_path, apron_home_with_facts):
    env = {**os.environ, "APRON_HOME": str(apron_home_with_facts)}
    records = tmp_path / "records"
    code, plan_doc, _ = cli_json(env, "plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8192")
    assert code == 0
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_doc))
    calls = [
        ("plan", {"source": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_len": 8192}),
        ("fit", {"source": "Qwen/Qwen3-8B", "users": 16, "context": 16384, "gpus": "L4,H100", "max_gpus": 2}),
        ("diagnose", {"log_text": LOG.read_text(), "plan": str(plan_file)}),
        ("records_list", {"records": str(records)}),
        ("engine_list", {}),
        ("plan", {"source": "Qwen/Qwen3-8B", "gpu": "H900"}),
        ("records_show", {"record_id": "0123456789abcdef", "records": str(records)}),
        ("fit", {"source": "Qwen/Qwen3-8B", "users": 0, "context": 8192}),
        ("plan", {"source": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_len": 8192}),
    ]
    tools, results = __import__("anyio").run(session_calls, env, calls)
    assert {t.name for t in tools} == TOOLS
    schema = next(t for t in tools if t.name == "fit").input_schema
    assert schema["required"] == ["users"] and schema["properties"]["context"]["anyOf"][0]["type"] == "integer"

    expected = [
        cli_json(env, "plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "8192"),
        cli_json(
            env, "fit", "Qwen/Qwen3-8B", "--users", "16", "--context", "16384", "--gpus", "L4,H100", "--max-gpus", "2"
        ),
        cli_json(env, "diagnose", str(LOG), "--plan", str(plan_file)),
        cli_json(env, "records", "list", "--records", str(records)),
        cli_json(env, "engine", "list"),
    ]
    for (name, _), result, (_code, doc, _) in zip(calls[:5], results[:5], expected, strict=True):
        assert not result.is_error, (name, text_of(result))
        assert json.loads(text_of(result)) == doc, name
        assert result.structured_content == (doc if isinstance(doc, dict) else {"result": doc}), name
    assert json.loads(text_of(results[1]))["num_feasible"] > 0

    bad = [
        cli_json(env, "plan", "Qwen/Qwen3-8B", "--gpu", "H900"),
        cli_json(env, "records", "show", "0123456789abcdef", "--records", str(records)),
        cli_json(env, "fit", "Qwen/Qwen3-8B", "--users", "0", "--context", "8192"),
    ]
    for result, (code, _, err) in zip(results[5:8], bad, strict=True):
        assert code == 2 and result.is_error
        assert f"apron: error: {text_of(result)}" == err  # the CLI's one-line message, word for word
        assert "\n" not in text_of(result)
    assert not results[8].is_error  # the server answers after errors


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
