"""`apron diagnose` (a failed boot's log, the rule that corrects it), `apron rules` (the correction rules\nand their status) and `apron log parse` (what a vLLM log says)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from apron.cli.groups import GroupedCommand, GroupedGroup
from apron.cli.options import json_option, option, records_option
from apron.cli.shared import emit_json, engine_option, record_store
from apron.errors import Failed

if TYPE_CHECKING:
    from apron.rules import StatusStore


@click.command("diagnose", cls=GroupedCommand)
@click.argument("logfile", type=click.Path(dir_okay=False))
@option(
    "--plan",
    "plan_ref",
    group="Options",
    help="The plan the boot ran: a plan JSON file (apron plan --json) or a plan record id.",
)
@option(
    "--engine",
    "engine",
    group="Options",
    help="vLLM release of the boot, e.g. vllm==0.32.0 (default: the plan's, else the log's banner).",
)
@records_option
@json_option("Print the apron.diagnosis/1 JSON document.")
def diagnose_command(
    logfile: str, plan_ref: str | None, engine: str | None, records: str | None, as_json: bool
) -> None:
    """Find the decisive error in a failed boot's LOGFILE, the rule that corrects it, and whether the plan knew."""
    from apron.records.saved import not_a_plan, saved_plan
    from apron.report.diagnosis import render_diagnosis
    from apron.rules import StatusStore, diagnose
    from apron.rules.diagnose import read_log

    store = record_store(records)
    plan = saved_plan(plan_ref, store) if plan_ref else None
    if plan_ref and plan is None:
        raise not_a_plan(f"--plan {plan_ref}")
    diagnosis = diagnose(
        read_log(logfile), plan=plan, engine_version=engine_option(engine), store=StatusStore(store.rules_dir)
    )
    if as_json:
        emit_json(diagnosis.to_json())
        return
    click.echo(render_diagnosis(diagnosis, logfile))


@click.group("rules", cls=GroupedGroup)
def rules_group() -> None:
    """Correction rules and their status (hypothesis or proven) per vLLM release."""


def _status_store(records: str | None) -> StatusStore:
    """Rule statuses live beside the boot records that prove them (RECORDS/rules)."""
    from apron.rules import StatusStore

    return StatusStore(record_store(records).rules_dir)


@rules_group.command("list")
@option("--engine", "engine", group="Options", help="Show each rule's status on this release, e.g. vllm==0.32.0.")
@records_option
@json_option()
def rules_list_command(engine: str | None, records: str | None, as_json: bool) -> None:
    """Every correction rule, the failure families it answers, and where it is proven."""
    from apron.report.diagnosis import render_rules, rule_json
    from apron.rules import all_rules

    store, version = _status_store(records), engine_option(engine)
    statuses = {rule.id: store.statuses(rule.id) for rule in all_rules()}
    if version:
        statuses = {rid: {version: store.status(rid, version)} for rid in statuses}
    if as_json:
        emit_json([rule_json(rule, statuses[rule.id]) for rule in all_rules()])
        return
    click.echo(render_rules(all_rules(), statuses, version))


@rules_group.command("show")
@click.argument("rule_id")
@records_option
@json_option()
def rules_show_command(rule_id: str, records: str | None, as_json: bool) -> None:
    """One rule: what it changes, why, and its status and evidence on every release."""
    from apron.report.diagnosis import render_rule, rule_json
    from apron.rules import get_rule

    rule = get_rule(rule_id)
    statuses = _status_store(records).statuses(rule.id)
    if as_json:
        emit_json(rule_json(rule, statuses))
        return
    click.echo(render_rule(rule, statuses))


@click.group("log", cls=GroupedGroup)
def log_group() -> None:
    """Read vLLM logs."""


@log_group.command("parse")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@json_option("Print every field as JSON.")
def log_parse_command(file: str, as_json: bool) -> None:
    """What a vLLM start-up log says: memory accounting, timings, config, errors (null when not printed)."""
    from apron.measure.logparse import parse_file
    from apron.rules.fingerprint import fingerprint
    from apron.rules.formats import FORMATS
    from apron.units import shorten

    log = parse_file(file, FORMATS)
    if not log.has_vllm_lines:
        raise Failed(
            f"{file} has no vLLM log lines (none carries vLLM's 'INFO MM-DD HH:MM:SS [file.py:N]' prefix or "
            "matches one of the release's format strings): give the engine's start-up log"
        )
    decisive = fingerprint(log)
    parsed = {**log.to_json(), "decisive_error": decisive.decisive_json() if decisive else None}
    if as_json:
        emit_json(parsed)
        return
    for name, value in parsed.items():
        if name in ("sources", "per_rank", "decisive_error") or value in (None, [], {}):
            continue
        if name == "template_lines":
            click.echo(f"{name:<36} {len(value):,} lines without vLLM's prefix, read by their message")
            continue
        if name in ("errors", "errors_after_shutdown"):
            for line in value:
                click.echo(f"{'error' if name == 'errors' else 'error after shutdown'}: {shorten(line, 300)}")
            continue
        click.echo(f"{name:<36} {_log_value(name, value)}")
    if decisive is not None:
        click.echo(
            f"{'decisive error':<36} line {decisive.line_number}: {shorten(decisive.decisive_json()['error'], 300)}"
        )


def _log_value(name: str, value: Any) -> str:
    """A parsed field for people: sizes and times with units, the run's settings as the vllm serve
    arguments they are, lists one item after another (--json has the values as data)."""
    from apron.rules.diagnose import serve_argument
    from apron.units import format_bytes, format_count, format_seconds

    if name.endswith("_bytes") and isinstance(value, (int, float)):
        return f"{format_bytes(value)} ({int(value):,} B)"
    if name.endswith("_seconds") and isinstance(value, (int, float)):
        return format_seconds(value)
    if name == "settings" and isinstance(value, dict):
        model = value.get("model") or value.get("model_tag")
        args = " ".join(serve_argument(k, v) for k, v in value.items() if k not in ("model", "model_tag"))
        return f"{model} {args}".strip() if model else args
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return format_count(value)
