"""`apron report`, `records show --html` and `plan --html` on stores of real plan records of catalog
models: what is drawn, what is skipped and said, exit codes, and that a plain `apron plan` never loads
the chart code. The page in a real browser, with real boots, is tests/test_report_browser.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from apron.plan.result import Plan
from apron.records.documents import PlanRecord
from apron.records.store import SCHEMA_VERSION, RecordStore, canonical_bytes, sha256_hex
from apron.report import series
from apron.report.charts import predicted_vs_measured
from apron.report.rows import layout_family, plan_row
from apron.report.svg import linear_ticks, log_ticks
from conftest import FIXTURES

CATALOG_PLANS = (  # (model, gpu, the layout the report should name)
    ("Qwen/Qwen3-8B", "H100", "GQA"),
    ("google/gemma-2-2b-it", "L4", "sliding + full"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "H100", "MLA"),
    ("state-spaces/mamba-2.8b-hf", "4090", "state only (mamba)"),
)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def plan_json(model: str, gpu: str) -> dict:
    result = run_cli("plan", model, "--gpu", gpu, "--json")
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def catalog_plans() -> dict[str, dict]:
    return {model: plan_json(model, gpu) for model, gpu, _ in CATALOG_PLANS}


def plan_store(path: Path, plans: dict[str, dict]) -> RecordStore:
    store = RecordStore(path)
    for plan in plans.values():
        store.put(PlanRecord(Plan.from_json(plan)))
    return store


def put_raw(store: RecordStore, document: dict) -> str:
    """Write a record the way a later Apron would (RecordStore.put refuses kinds it does not know)."""
    data = canonical_bytes(document)
    rid = sha256_hex(data)
    path = store.root / "records" / rid[:2] / f"{rid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return rid


def test_layout_families_of_catalog_models(catalog_plans):
    for model, _, layout in CATALOG_PLANS:
        assert layout_family(Plan.from_json(catalog_plans[model])) == layout, model


def test_report_of_plans_writes_page_charts_and_record_pages(catalog_plans, tmp_path):
    store = plan_store(tmp_path / "store", catalog_plans)
    result = run_cli("report", "--records", str(store.root), "--out", str(tmp_path / "out"), "--json")
    assert result.returncode == 0, result.stderr
    written = json.loads(result.stdout)
    assert written["num_plans"] == len(CATALOG_PLANS) and written["num_boots"] == 0 and written["skipped"] == []
    page = Path(written["index"]).read_text()
    for name in ("predicted-vs-measured", "memory", "kv-by-layout", "time-to-first-token"):
        svg = (tmp_path / "out" / "charts" / f"{name}.svg").read_text()
        assert svg.startswith("<?xml") and f'id="chart-{name}"' in page
        assert svg.split("\n", 1)[1].strip() in page  # the same SVG, inlined
    for rid in store.ids():
        assert f'href="records/{rid}.html"' in page  # the table under the memory chart links every plan
        assert rid in (tmp_path / "out" / "records" / f"{rid}.html").read_text()
    # Chart 2: six segments per plan (the reserve included), each titled with its record.
    memory = (tmp_path / "out" / "charts" / "memory.svg").read_text()
    assert len(re.findall(r'<rect [^>]*class="mark"', memory)) == 6 * len(CATALOG_PLANS)
    # Chart 3: one planned point per plan, on its layout's row.
    kv = (tmp_path / "out" / "charts" / "kv-by-layout.svg").read_text()
    for _, _, layout in CATALOG_PLANS:
        assert f">{layout}</text>" in kv
    assert kv.count("planned · ") == 0 and kv.count("<title>predicted · ") == len(CATALOG_PLANS)
    # No boots: charts 1 and 4 say so instead of drawing nothing.
    assert "no boot comparable" in page and "no serving test in these records" in page
    assert "time to first token (s)" not in page  # no empty axis
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_tokens_per_gib_come_from_the_plans_numbers(catalog_plans):
    row = plan_row(Plan.from_json(catalog_plans["Qwen/Qwen3-8B"]), "x" * 64)
    (point,) = series.kv_points(series.Selection(plans=[row]))
    q = catalog_plans["Qwen/Qwen3-8B"]["quantities"]
    assert point.tokens_per_gib == pytest.approx(q["kv_tokens"]["value"] / (q["available_kv_bytes"]["value"] / 2**30))
    # full/GQA: close to 1 GiB over the bytes a token takes (block rounding aside)
    assert point.tokens_per_gib == pytest.approx(2**30 / q["kv_bytes_per_token"]["value"], rel=0.01)


def test_newer_schema_and_unknown_kinds_are_skipped_with_a_note(catalog_plans, tmp_path):
    store = plan_store(tmp_path / "store", {"q": catalog_plans["Qwen/Qwen3-8B"]})
    newer = put_raw(store, {"schema_version": SCHEMA_VERSION + 1, "kind": "boot", "outcome": "healthy"})
    probe = put_raw(store, {"schema_version": SCHEMA_VERSION, "kind": "survey", "peak_bytes": 1})
    plan2 = put_raw(store, {"schema_version": SCHEMA_VERSION, "kind": "plan", "plan": {"schema": "apron.plan/2"}})
    result = run_cli("report", "--records", str(store.root), "--out", str(tmp_path / "out"), "--json")
    assert result.returncode == 0, result.stderr
    skipped = {s["id"]: s["reason"] for s in json.loads(result.stdout)["skipped"]}
    assert set(skipped) == {newer, probe, plan2}
    assert "newer than this Apron" in skipped[newer] and "survey" in skipped[probe] and "apron.plan/2" in skipped[plan2]
    page = (tmp_path / "out" / "index.html").read_text()
    for rid in (newer, probe, plan2):
        assert rid[:12] in page
    assert page.count('class="skipped"') == 1


def test_empty_store_unknown_ids_and_bad_arguments(catalog_plans, tmp_path):
    empty = run_cli("report", "--records", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert empty.returncode == 1 and empty.stderr.count("\n") == 1 and "holds no records" in empty.stderr
    assert not (tmp_path / "out").exists()
    store = plan_store(tmp_path / "store", catalog_plans)
    for args, message in (
        (["0123456789abcdef"], "no record 0123456789abcdef"),
        (["zz"], "at least 4 hex characters"),
        ([store.ids()[0], "--all"], "not both"),
    ):
        result = run_cli("report", *args, "--records", str(store.root), "--out", str(tmp_path / "out"))
        assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    missing = run_cli("records", "show", "abcdef12", "--records", str(store.root), "--html")
    assert missing.returncode == 2 and "no record abcdef12" in missing.stderr


def test_report_of_chosen_ids(catalog_plans, tmp_path):
    store = plan_store(tmp_path / "store", catalog_plans)
    first = store.ids()[0]
    result = run_cli("report", first[:10], "--records", str(store.root), "--out", str(tmp_path / "out"), "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["num_plans"] == 1
    assert [p.name for p in (tmp_path / "out" / "records").iterdir()] == [f"{first}.html"]


def test_plan_html_writes_the_memory_chart_with_the_cards_numbers(tmp_path):
    out = tmp_path / "qwen.html"
    result = run_cli("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--html", str(out))
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stderr and result.stdout.startswith("Qwen/Qwen3-8B")  # the card still prints
    page = out.read_text()
    card_lines = [line for line in result.stdout.splitlines() if "[" in line and "GiB" in line]
    assert len(card_lines) >= 5
    for line in card_lines:  # "  weights per GPU   15.26 GiB  (15.24-15.30)  [predicted]": title, value, label
        title, value, label = re.match(r"\s+(.+?)\s{2,}(.+?)\s+\[(\w+)\]", line).groups()
        value = " ".join(value.split())
        assert re.search(rf"<td>{re.escape(title)}</td><td class=\"num\">{re.escape(value)}</td><td>{label}</td>", page)
    assert page.count('class="mark"') == 6 and 'id="chart-memory-plan"' in page and "<script" not in page


def test_records_show_html_for_a_plan(catalog_plans, tmp_path):
    store = plan_store(tmp_path / "store", {"m": catalog_plans["state-spaces/mamba-2.8b-hf"]})
    rid = store.ids()[0]
    result = run_cli("records", "show", rid[:8], "--records", str(store.root), "--html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    path = tmp_path / f"apron-{rid[:12]}.html"
    assert result.stdout.strip() == f"apron-{rid[:12]}.html" and path.exists()
    page = path.read_text()
    assert "state only (mamba)" in page and rid in page and 'class="mark"' in page
    chosen = tmp_path / "sub" / "plan.html"
    again = run_cli("records", "show", rid, "--records", str(store.root), "--html", str(chosen))
    assert again.returncode == 0 and chosen.read_text() == page


def test_plain_plan_does_not_load_the_report_code(tmp_path):
    """The chart code loads on the report path only (apron report, --html): plan's start-up stays lean."""
    probe = (
        "import sys; from apron.cli import main; code = main(sys.argv[1:]); "
        f"open({str(tmp_path / 'modules')!r}, 'w').write('\\n'.join(sorted(sys.modules)))"
    )
    args = ["Qwen/Qwen3-8B", "--gpu", "H100"]
    for extra, loaded in (([], False), (["--html", str(tmp_path / "p.html")], True)):
        subprocess.run([sys.executable, "-c", probe, "plan", *args, *extra], check=True, capture_output=True)
        modules = set((tmp_path / "modules").read_text().split())
        report_modules = {"apron.report.svg", "apron.report.charts", "apron.report.page", "apron.report.rows"}
        assert (report_modules <= modules) if loaded else not (report_modules & modules), extra


def test_ticks():
    assert [v for v, _ in linear_ticks(0, 81)] == [0, 20, 40, 60, 80]
    assert [t for _, t in log_ticks(0.15, 8)] == ["0.2", "0.5", "1", "2", "5"]  # two decades: 1-2-5 steps
    assert [t for _, t in log_ticks(0.05, 30)] == ["0.1", "1", "10"]
    assert [t for _, t in log_ticks(900, 3e6)] == ["1k", "10k", "100k", "1M"]


def test_predicted_vs_measured_draws_every_point_with_its_record():
    """The drawing of chart 1 with GPU points, which no CPU-only store has: the measured side is the
    real H100 and RTX 4090 boots of tests/fixtures/boots-training.json, the predicted side today's plans
    of them. These are hindcasts, so they are never records and never on a report page."""
    boots = json.loads((FIXTURES / "boots-training.json").read_text())["boots"]
    points = []
    for i, boot in enumerate(b for b in boots if b["boot_outcome"] == "healthy"):
        measured = boot["measured"]["weights_bytes_per_gpu"] / 2**30
        points.append(
            series.ComparePoint(
                f"{i:064x}",
                f"{i:064x}",
                "weights_bytes_per_gpu",
                measured * 1.005,
                measured,
                boot["gpu"],
                boot["model_id"],
            )
        )
    chart = predicted_vs_measured(points, [])
    assert len(chart.marks) == len(points) == chart.svg.count('class="mark"')
    for point in points:
        assert f"boot {point.record_id[:12]} ({point.model}" in chart.svg
    assert chart.svg.count('class="band"') == 4 and chart.svg.count('class="identity"') == 4
    assert all(p.is_within for p in points)  # 0.5% off: inside the 1% band


def test_probe_records_are_listed_with_their_matched_and_unmatched_totals(catalog_plans, tmp_path):
    """A probe record (the shape `apron probe` writes, built here) is drawn: the report lists it with its
    peak, the bytes the plan's buffers account for and the rest; it gets its own page."""
    from apron.records.documents import BootRecord, EngineIdentity, HardwareIdentity, ProbePhase, ProbeRecord
    from apron.records.probe import PredictedBuffer, ProbeBlock

    store = plan_store(tmp_path / "store", {"q": catalog_plans["Qwen/Qwen3-8B"]})
    plan_id = store.ids()[0]
    boot = BootRecord(
        "2026-01-01T00:00:00Z",
        plan_id,
        "healthy",
        "local",
        EngineIdentity("0.33.0"),
        HardwareIdentity("gpu", gpu_name="NVIDIA H100 80GB HBM3", gpu_count=1),
        None,
    )
    boot_id = store.put(boot)
    phase = ProbePhase(
        "_dummy_run",
        3 * 2**20,
        "forward pass",
        (ProbeBlock(2 * 2**20, shape=(1024, 1024), buffer="MLP gate_up output"), ProbeBlock(2**20, op="aten::mul")),
        (PredictedBuffer("MLP gate_up output", (1024, 1024), 2 * 2**20, "right"),),
    )
    probe = ProbeRecord(
        "2026-01-01T00:00:01Z",
        boot_id,
        plan_id,
        "recorded",
        platform="cuda",
        peak_bytes=3 * 2**20,
        allocator_peak_bytes=3 * 2**20,
        logged_peak_bytes=3 * 2**20,
        peak_phase="_dummy_run",
        phases=(phase,),
    )
    probe_id = store.put(probe)
    result = run_cli("report", "--records", str(store.root), "--out", str(tmp_path / "out"), "--json")
    assert result.returncode == 0, result.stderr
    written = json.loads(result.stdout)
    assert written["num_probes"] == 1 and written["skipped"] == []
    page = Path(written["index"]).read_text()
    section = page.split('<section id="probes">')[1].split("</section>")[0]
    assert probe_id[:12] in section and boot_id[:12] in section
    assert "3.00 MiB in _dummy_run" in section and "2.00 MiB (forward pass)" in section and "1.00 MiB" in section
    own = (tmp_path / "out" / "records" / f"{probe_id}.html").read_text()
    assert "MLP gate_up output" in own and "unmatched" in own
