"""`apron check` (will a served model answer the way users ask) and `apron serve-test` (how fast it serves)."""

from __future__ import annotations

from typing import Any

import click

from apron.cli.groups import GroupedCommand
from apron.cli.options import SERVING_OPTIONS, json_option, option, shared
from apron.cli.shared import emit_json, say
from apron.errors import Failed


@click.command("check", cls=GroupedCommand)
@click.argument("url")
@shared("model")
@option(
    "--timeout",
    "timeout_seconds",
    group="Endpoint",
    type=float,
    default=600,
    show_default=True,
    help="Seconds per request.",
)
@option(
    "--suite",
    group="Checks",
    type=click.Choice(["short", "deploy"]),
    default="short",
    show_default=True,
    help="short: three exact questions; deploy: needle, tool call, JSON schema, image, reasoning.",
)
@option("--only", group="Checks", multiple=True, help="Run only this check (repeatable), e.g. --only tool_call.")
@option("--multimodal", group="Checks", is_flag=True, help="The model takes images: run the image check.")
@shared("reasoning_effort")
@option(
    "--reasoning/--no-reasoning",
    group="Checks",
    default=None,
    help="The model thinks before answering (default: judge from its replies).",
)
@option("--reasoning-parser", group="Checks", help="The model's reasoning parser, named in fixes.")
@option(
    "--tool-call-parser",
    "tool_parser",
    group="Checks",
    old=("--tool-parser",),
    help="The model's tool-call parser (vLLM's --tool-call-parser), named in fixes.",
)
@option(
    "--tool-choice",
    group="Checks",
    type=click.Choice(["auto", "required", "named"]),
    default="auto",
    show_default=True,
    help="auto goes through the server's tool parser; required/named are constrained by the server.",
)
@option(
    "--answer-budget-tokens",
    group="Checks",
    type=int,
    default=64,
    show_default=True,
    help="max_tokens for a short answer.",
)
@option(
    "--seed", group="Checks", type=int, help="Seed for the needle, its depth and the image colour (default: random)."
)
@json_option("Print the apron.check/1 JSON document.")
def check_command(url: str, model: str, as_json: bool, only: tuple[str, ...], **opts: Any) -> None:
    """Will the model at URL answer the way users ask? Exit 1 if a check fails."""
    from apron.measure.checks import run_checks

    report = run_checks(url, model, only=only or None, progress=say, **opts)
    if as_json:
        emit_json(report.to_json())
    else:
        from apron.report.answers import render_check_report

        click.echo(render_check_report(report))
    if report.verdict != "answered":
        failed = [r.name for r in report.results if r.status == "fail"]
        raise Failed(f"not answered: {len(failed)} of {len(report.results)} checks failed ({', '.join(failed)})")


@click.command("serve-test", cls=GroupedCommand)
@click.argument("url")
@shared("model")
@option(
    "--timeout",
    "timeout_seconds",
    group="Endpoint",
    type=float,
    default=1800,
    show_default=True,
    help="Seconds for the whole test.",
)
@option("--vllm", "vllm_executable", group="Serving test", help="The `vllm` executable (default: the one on PATH).")
@shared(*SERVING_OPTIONS, old=())
@option("--seed", group="Serving test", type=int, default=0, show_default=True)
@option(
    "--tokenizer",
    group="Serving test",
    help="Tokenizer for the prompts (default: the served model's root from /v1/models).",
)
@option(
    "--result-dir",
    group="Output",
    type=click.Path(file_okay=False),
    help="Where the result JSON goes (default: Apron's data dir).",
)
@json_option("Print the apron.serve_test/1 JSON document.")
def serve_test_command(url: str, model: str, as_json: bool, **opts: Any) -> None:
    """How fast does the model at URL serve? vLLM's own `vllm bench serve`; exit 1 if requests fail."""
    from apron.measure.servetest import run_serve_test

    report = run_serve_test(url, model, progress=say, **opts)
    if as_json:
        emit_json(report.to_json())
    else:
        from apron.report.answers import render_serve_report

        click.echo(render_serve_report(report))
    if report.verdict != "served":
        raise Failed(f"not served: {report.reason}")
