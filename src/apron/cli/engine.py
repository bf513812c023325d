"""`apron engine` (sync, list, show, diff): what each vLLM release supports and defaults to."""

from __future__ import annotations

import click

from apron.cli.groups import GroupedGroup
from apron.cli.options import json_option
from apron.cli.shared import emit_json, say


@click.group("engine", cls=GroupedGroup)
def engine_group() -> None:
    """Engine facts: what each vLLM release supports and defaults to, read from its own source."""


@engine_group.command("sync")
@click.argument("spec", metavar="vllm==X|WHEEL|TREE")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the facts file here instead of Apron's cache.",
)
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Parser processes (default: CPUs).")
@json_option()
def engine_sync_command(spec: str, out_dir: str | None, jobs: int | None, as_json: bool) -> None:
    """Read a release's facts from its wheel (pip download) or a local wheel or source tree."""
    from pathlib import Path

    from apron.engine.sync import sync

    result = sync(spec, Path(out_dir) if out_dir else None, say=say, jobs=jobs)
    row = {
        "version": result.version,
        "path": str(result.path),
        "sha256": result.facts["source"]["sha256"],
        "num_architectures": len(result.facts["registry"]["architectures"]),
        "extract_seconds": round(result.extract_seconds, 2),
        "gaps": result.facts["gaps"],
    }
    if as_json:
        emit_json(row)
    else:
        click.echo(str(result.path))


@engine_group.command("list")
@json_option()
def engine_list_command(as_json: bool) -> None:
    """List the releases Apron has facts for (shipped and synced)."""
    from apron.engine.summary import list_rows

    rows = list_rows()
    if as_json:
        emit_json(rows)
        return
    from apron.report.tables import render_table

    table = [
        (r["version"], r["origin"], f"{r['num_architectures']:,}", r["torch"] or "not pinned", r["filename"])
        for r in rows
    ]
    click.echo(render_table(("release", "facts", "architectures", "torch", "read from"), table, right=(2,)))


@engine_group.command("show")
@click.argument("version", metavar="X")
@json_option("Print JSON (a summary; --full for everything).")
@click.option("--full", is_flag=True, help="With --json: the whole facts document.")
def engine_show_command(version: str, as_json: bool, full: bool) -> None:
    """Show one release's facts: counts, pins, defaults and gaps."""
    from apron.engine.facts import load_facts, parse_engine_spec
    from apron.engine.summary import render_summary, summary

    facts = load_facts(parse_engine_spec(version))
    if as_json:
        emit_json(facts.full_data if full else summary(facts))
        return
    for line in render_summary(summary(facts)):
        click.echo(line)


@engine_group.command("diff")
@click.argument("old", metavar="X")
@click.argument("new", metavar="Y")
@json_option()
def engine_diff_command(old: str, new: str, as_json: bool) -> None:
    """What changed from release X to release Y, and which mirrored functions need re-checking."""
    from apron.engine.diff import diff_facts
    from apron.engine.facts import load_facts, parse_engine_spec
    from apron.engine.summary import render_diff

    diff = diff_facts(load_facts(parse_engine_spec(old)).full_data, load_facts(parse_engine_spec(new)).full_data)
    if as_json:
        emit_json(diff)
        return
    for line in render_diff(diff):
        click.echo(line)
