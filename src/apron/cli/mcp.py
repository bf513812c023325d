"""`apron mcp`: the command line's own door for agents, over the Model Context Protocol on stdio.

A tool is a CLI command with `--json`: its input schema is built from that command's click parameters
(the OptionSpecs of cli/options.py and the command's own options: one definition), an argument is named
after its flag (`--max-model-len` is `max_model_len`, `--from` is `from`), and a call runs the command
line those arguments spell, in this process, through the CLI's own parsing, checks and error handling
(cli/shared.py run). So a tool returns the document the command prints with --json, and an argument
the command would refuse - misspelled, mistyped, out of range - comes back as a tool error carrying the
CLI's one-line message, word for word. Options that only shape the text output (--explain, --top, --html,
--log) are left out. Needs the official SDK: pip install 'apron[mcp]'.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import Any

import click

from apron.cli.groups import GroupedCommand
from apron.cli.options import HumanInt
from apron.errors import BadInput
from apron.frozen import field, frozen

INSTRUCTIONS = (
    "Apron answers, before anyone rents a GPU, whether an exact LLM checkpoint fits, boots and answers on a "
    "GPU with a vLLM release, and with which flags. `plan` checks one GPU; `fit` finds the cheapest GPU x "
    "count for N users at a context of C tokens; `diagnose` reads a failed boot's log. Every number says "
    "how it is known (derived, predicted, measured or unknown). Each tool is an `apron` command with "
    "--json; its arguments are the command's flags (max_model_len is --max-model-len)."
)
ERROR_PREFIX = "apron: error: "


@frozen
class ToolSpec:
    """A tool: the CLI words of its command, the parameters left out (text output only), and inputs
    a tool takes as text where the command reads a file (the text is written to a temporary file)."""

    name: str
    words: tuple[str, ...]
    left_out: frozenset[str] = frozenset()
    text_inputs: dict[str, str] = field(default_factory=dict)  # tool argument -> the CLI argument it fills


TOOLS = (
    ToolSpec("plan", ("plan",), frozenset({"explain", "html"})),
    ToolSpec("fit", ("fit",), frozenset({"top"})),
    ToolSpec("diagnose", ("diagnose",), text_inputs={"log_text": "logfile"}),
    ToolSpec("records_list", ("records", "list")),
    ToolSpec("records_show", ("records", "show"), frozenset({"log", "html"})),
    ToolSpec("records_compare", ("records", "compare")),
    ToolSpec("engine_list", ("engine", "list")),
)
ALWAYS = frozenset({"json", "help"})  # every tool returns the --json document


class ToolError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def command_of(spec: ToolSpec) -> click.Command:
    from apron.cli import cli

    command: click.Command = cli
    for word in spec.words:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), word)
        assert found is not None, word
        command = found
    return command


def argument_name(param: click.Parameter) -> str:
    """An option's tool argument is its first flag's name (--max-model-len: max_model_len); a
    positional's is its own (source, logfile, record_id)."""
    if isinstance(param, click.Option):
        return param.opts[0].lstrip("-").replace("-", "_")
    return str(param.name)


def parameters(spec: ToolSpec) -> dict[str, click.Parameter]:
    """The command's parameters a tool takes, by argument name, in the command's order."""
    left_out = ALWAYS | spec.left_out
    return {argument_name(p): p for p in command_of(spec).params if argument_name(p) not in left_out}


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    params = parameters(spec)
    properties = {name: _property(param) for name, param in params.items()}
    for extra, target in spec.text_inputs.items():
        properties[extra] = {"type": "string", "description": f"The text of {target.upper()}, instead of a path."}
    replaced = set(spec.text_inputs.values())
    required = [name for name, p in params.items() if p.required and name not in replaced]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _property(param: click.Parameter) -> dict[str, Any]:
    out = _json_type(param)
    flag = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
    help_text = getattr(param, "help", None)
    out["description"] = f"{flag}: {help_text}" if help_text else flag
    default = param.default  # click's own "no default" is a sentinel object, not a value
    if isinstance(default, str | int | float) and default is not False:
        out["default"] = default
    return out


def _json_type(param: click.Parameter) -> dict[str, Any]:
    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        return {"type": "boolean"}
    if isinstance(kind, click.Choice):
        return {"type": "string", "enum": [str(c) for c in kind.choices]}
    if isinstance(getattr(kind, "kind", None), HumanInt):
        return {"anyOf": [{"type": "integer"}, {"type": "string"}]}  # 32768 or "32k", as vLLM reads it
    if isinstance(kind, click.IntRange):
        return {"type": "integer", **({"minimum": kind.min} if kind.min is not None else {})}
    if kind is click.INT:
        return {"type": "integer"}
    if kind is click.FLOAT:
        return {"type": "number"}
    return {"type": "string"}


def command_line(spec: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    """The CLI words these arguments spell. A name the command has no parameter for goes in as the
    flag it would be, so the command refuses it in its own words (No such option ... Did you mean)."""
    params = parameters(spec)
    positional: list[str] = []
    options: list[str] = []
    for name, value in arguments.items():
        param = params.get(name)
        if value is None and param is not None:
            continue
        if param is None:  # the command refuses the flag itself, whatever the value
            flag = f"--{name.replace('_', '-')}"
            options += [flag, str(value)] if isinstance(value, str | int | float) and value is not True else [flag]
        elif isinstance(param, click.Option) and param.is_flag:
            options += [param.opts[0]] if _flag(param, value) else []
        elif isinstance(param, click.Option):
            options += [param.opts[0], _scalar(param.opts[0], value)]
        else:
            positional.append(_scalar(param.human_readable_name, value))
    return [*spec.words, *options, "--json", "--", *positional] if positional else [*spec.words, *options, "--json"]


def _flag(param: click.Option, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadInput(
            f"Invalid value for '{param.opts[0]}': {json.dumps(value)} is not a flag value; give true or false"
        )
    return value


def _scalar(where: str, value: Any) -> str:
    """A value as the command line would carry it; JSON with no command-line form is refused here."""
    if isinstance(value, bool) or isinstance(value, list | dict):
        raise BadInput(
            f"Invalid value for '{where}': {json.dumps(value)} is not a value a command line carries; "
            "give a string or a number"
        )
    return str(value)


@contextmanager
def _text_inputs(spec: ToolSpec, arguments: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Arguments with each text input written to a temporary file named in its CLI argument."""
    given = dict(arguments)
    paths = []
    try:
        for extra, filled in spec.text_inputs.items():
            if extra in given:
                text = given.pop(extra)
                if not isinstance(text, str):
                    raise BadInput(f"Invalid value for '{extra}': give the text as a string")
                handle, path = tempfile.mkstemp(prefix="apron-mcp-", suffix=".txt")
                with os.fdopen(handle, "w") as out:
                    out.write(text)
                paths.append(path)
                given[filled] = path
        yield given
    finally:
        for path in paths:
            os.unlink(path)


def call(spec: ToolSpec, arguments: dict[str, Any]) -> Any:
    """Run the tool's command line; its --json document, or ToolError with the CLI's one-line message."""
    from apron.cli import cli
    from apron.cli.groups import run

    try:
        with _text_inputs(spec, arguments) as given:
            argv = command_line(spec, given)
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                code = run(cli, argv)
    except BadInput as exc:
        raise ToolError(exc.message) from None
    if out.getvalue().strip():
        return json.loads(out.getvalue())  # also a plan that does not fit, or a fit with no row (exit 1)
    errors = [line[len(ERROR_PREFIX) :] for line in err.getvalue().splitlines() if line.startswith(ERROR_PREFIX)]
    raise ToolError(errors[-1] if errors else (err.getvalue().strip() or f"exit {code} with no output"))


def server() -> Any:
    try:
        from mcp.server.lowlevel.server import Server
        from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool
    except ImportError:
        raise BadInput("`apron mcp` needs the MCP SDK: pip install 'apron[mcp]'") from None
    from importlib.metadata import version

    specs = {spec.name: spec for spec in TOOLS}
    tools = [Tool(name=spec.name, description=_description(spec), input_schema=input_schema(spec)) for spec in TOOLS]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        spec = specs.get(params.name)
        try:
            if spec is None:
                raise ToolError(f"no tool {params.name!r}; the tools are {', '.join(specs)}")
            document = call(spec, dict(params.arguments or {}))
        except ToolError as exc:
            return CallToolResult(content=[TextContent(type="text", text=exc.message)], is_error=True)
        structured = document if isinstance(document, dict) else {"result": document}
        text = json.dumps(document, indent=2)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)

    return Server(
        "apron", version=version("apron"), instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool
    )


def _description(spec: ToolSpec) -> str:
    command = command_of(spec)
    summary = (command.help or "").strip().split("\n\n")[0]
    return f"`apron {' '.join(spec.words)} --json`: {summary}"


def serve() -> None:
    """Serve on stdio until the client closes the connection."""
    import anyio

    app = server()

    async def main() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await app.run(read_stream, write_stream, app.create_initialization_options())

    anyio.run(main)


@click.command("mcp", cls=GroupedCommand)
def mcp_command() -> None:
    """Serve Apron's tools (plan, fit, diagnose, records, engine list) to agents over MCP on stdio."""
    serve()
