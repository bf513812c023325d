"""`apron records` (list, show, import, compare), `apron calibrate` and `apron report`: the record store,\nits views, and what is computed from it."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from apron.cli.groups import GroupedCommand, GroupedGroup
from apron.cli.options import json_option, option, records_option, shared
from apron.cli.shared import emit_json, engine_option, record_store, say
from apron.errors import BadInput, Failed


@click.group("records", cls=GroupedGroup)
def records_group() -> None:
    """Plans, boots and fixes kept side by side (content-addressed JSON)."""


@records_group.command("list")
@option("--kind", group="Options", type=click.Choice(["plan", "boot", "fix", "probe"]))
@option("--all", "show_all", group="Options", is_flag=True, help="Also the hypotheses a later fix record settled.")
@records_option
@json_option()
def records_list_command(kind: str | None, show_all: bool, records: str | None, as_json: bool) -> None:
    """Every record in the store, newest boots last."""
    from apron.records.report import render_list
    from apron.records.views import list_rows

    store = record_store(records)
    rows = list_rows(store, kind, with_settled=show_all or as_json)
    if as_json:
        emit_json(rows)
        return
    click.echo(render_list(rows))
    hidden = len(list_rows(store, kind)) - len(rows)
    if hidden:
        say(f"{hidden} hypothesis record(s) a later fix record settled not shown (--all shows them)")


@records_group.command("show")
@click.argument("record_id")
@option("--log", "with_log", group="Options", is_flag=True, help="Print the engine log stored with a boot record.")
@option(
    "--html",
    "html_file",
    group="Output",
    is_flag=False,
    flag_value="",
    help="Write the record's page (default ./apron-ID.html).",
)
@records_option
@json_option()
def records_show_command(
    record_id: str, with_log: bool, html_file: str | None, records: str | None, as_json: bool
) -> None:
    """One record (a unique id prefix is enough)."""
    from apron.records.documents import BootRecord

    store = record_store(records)
    if html_file is not None:
        from pathlib import Path

        from apron.report.page import write_record_page

        click.echo(write_record_page(store, record_id, Path(html_file) if html_file else None))
        return
    record = store.get(record_id)
    document = record.document
    if with_log:
        if not isinstance(document, BootRecord):
            raise BadInput(f"record {record.id[:12]} is a {record.kind}: only boot records keep a log")
        if document.log is None:
            raise BadInput(f"boot record {record.id[:12]} was imported from a published record: it keeps no log")
        sys.stdout.write(store.get_blob(document.log.sha256).decode("utf-8", errors="replace"))
        return
    from apron.records.documents import ProbeRecord

    if isinstance(document, ProbeRecord) and not as_json:
        from apron.records.probe_view import render_probe

        click.echo(render_probe(record.id, document))
    elif as_json:
        from apron.records.views import show_document

        emit_json(show_document(store, record.id))
    else:
        from apron.report.record_text import render_record

        click.echo(render_record(record))


@records_group.command("import")
@click.argument("file")
@option(
    "--snapshots",
    group="Options",
    type=click.Path(file_okay=False),
    help="Plan the boots from checkpoint snapshot files here (<org>--<name>.json.gz) where the Hub is out of reach.",
)
@records_option
@json_option()
def records_import_command(file: str, snapshots: str | None, records: str | None, as_json: bool) -> None:
    """Import published boots (tests/fixtures/boots-training.json's format) as boot records beside their plans.

    Every boot is planned first, with the settings it was served with; nothing is written unless all are."""
    from pathlib import Path

    from apron.calibrate.published import import_boots, published_planner

    path = Path(file)
    if not path.is_file():
        raise BadInput(f"{file}: no such file")
    imported = import_boots(path, record_store(records), published_planner(Path(snapshots) if snapshots else None))
    rows = [
        {"id": i.boot_id, "plan_id": i.plan_id, "model": i.model, "outcome": i.boot.outcome, **_hardware(i.boot)}
        for i in imported
    ]
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        click.echo(f"{row['id'][:12]}  {row['outcome']:<13} vllm {row['engine']:<8} {row['gpu']:<28} {row['model']}")
    say(f"apron: {len(rows)} boots from {path.name} (plans beside them)")


def _hardware(boot: Any) -> dict[str, Any]:
    return {"engine": boot.engine.version, "gpu": boot.hardware.gpu_name}


@click.command("calibrate", cls=GroupedCommand)
@option("--engine", "engine", group="Options", help="Only boots of this release, e.g. vllm==0.29.0.")
@option("--gpu", group="Options", help="Only boots on this GPU class (name or alias, as `apron plan --gpu`).")
@option(
    "--out",
    "out_file",
    group="Output",
    type=click.Path(dir_okay=False),
    help="Write the calibration here, for `apron plan --calibration FILE`.",
)
@records_option
@json_option()
def calibrate_command(
    engine: str | None, gpu: str | None, out_file: str | None, records: str | None, as_json: bool
) -> None:
    """Fit the terms the planner labels observed to the boots in the store, per release and GPU class,
    with the leave-one-out error of every quantity before and after (exit 1 when nothing is fitted)."""
    from apron.calibrate.factors import calibrate, render

    gpu_name = None
    if gpu:
        from apron.hardware import resolve_gpu

        gpu_name = resolve_gpu(gpu).name
    run = calibrate(record_store(records), engine=engine_option(engine), gpu=gpu_name)
    calibration = run.calibration
    written = None
    if out_file and calibration.groups:
        from pathlib import Path

        from apron.paths import write_atomic

        written = Path(out_file)
        write_atomic(written, (json.dumps(calibration.to_json(), indent=1) + "\n").encode())
    if as_json:
        emit_json({**run.to_json(), "calibration": calibration.to_json(), "written": str(written) if written else None})
    else:
        click.echo(render(run) if run.groups else "no healthy GPU boot beside its plan matches")
    if written:
        say(f"apron: wrote {written}")
    if not calibration.groups:
        raise Failed("nothing fitted: no group of at least 3 boots whose observed terms a factor improves")


@records_group.command("compare")
@click.argument("record_id", required=False)
@records_option
@json_option()
def records_compare_command(record_id: str | None, records: str | None, as_json: bool) -> None:
    """Predicted (the linked plan) beside measured (a boot: RECORD_ID, default the newest), with the error."""
    from apron.records.report import render_compare
    from apron.records.views import compare_document, newest_boot

    store = record_store(records)
    table = compare_document(store, record_id or newest_boot(store))
    if as_json:
        emit_json(table)
    else:
        click.echo(render_compare(table))


@click.command("report", cls=GroupedCommand)
@click.argument("record_ids", nargs=-1, metavar="[IDS]...")
@click.option("--all", "select_all", is_flag=True, help="Every record in the store (the default without IDS).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="apron-report", show_default=True)
@click.option("--open", "open_page", is_flag=True, help="Open the page in the default browser.")
@shared("records", group="Options")
@shared("as_json", group="Options", help="Print what was written as JSON.")
def report_command(
    record_ids: tuple[str, ...], select_all: bool, out_dir: str, open_page: bool, records: str | None, as_json: bool
) -> None:
    """Charts and a self-contained HTML page (OUT/index.html) from the records; prints the page's path."""
    from pathlib import Path

    from apron.report.page import build_report

    if record_ids and select_all:
        raise BadInput("give record IDS or --all, not both")
    written = build_report(record_store(records), list(record_ids), Path(out_dir))
    if as_json:
        emit_json(written)
    else:
        click.echo(written["index"])
    if open_page:
        import webbrowser

        webbrowser.open(Path(written["index"]).resolve().as_uri())
