"""The report of real records, rendered by a real headless Chromium with the network off.

The store holds the suite's real CPU-engine boots (gathered by the `boot_pool` fixture from
tests/test_boot.py and tests/test_boot_fix.py: healthy over local and ssh, refused, failed then fixed)
and plan records of catalog models. The browser is driven over the DevTools protocol
(tests/chromium.py): the page must load with no console error and no request leaving file://, every
chart must be an SVG with marks, axis labels and record ids must be in the DOM, and no screenshot
may be blank. APRON_REPORT_SCREENSHOT=FILE keeps the page's screenshot (docs/report.png comes from it).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apron.plan.result import Plan
from apron.records.documents import PlanRecord
from apron.records.store import RecordStore
from apron.report.charts import MEMORY_AXIS
from apron.report.rows import BootRow, select
from chromium import Browser
from engine_env import vllm_venv

CATALOG = (
    ("Qwen/Qwen3-8B", "H100"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "H100"),
    ("google/gemma-2-2b-it", "L4"),
    ("state-spaces/mamba-2.8b-hf", "4090"),
)
CHARTS = {  # chart -> axis labels that must be in its SVG
    "predicted-vs-measured": ("predicted (GiB)", "measured (GiB)", "predicted (tokens)", "measured (tokens)"),
    "memory": (MEMORY_AXIS,),
    "kv-by-layout": ("KV cache tokens per GiB of KV memory (at each record's settings)",),
    "time-to-first-token": ("time to first token (s)",),
}
MIN_STDDEV = 8.0  # grey levels: a blank or single-colour picture has ~0


def apron(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.fixture(scope="module")
def store(boot_pool, tmp_path_factory) -> RecordStore:
    vllm_venv()  # the boots come from the real engine: without it these skip, as every engine test does
    boot_pool.fill(min_boots=5)
    store = RecordStore(tmp_path_factory.mktemp("report-store"))
    for record in boot_pool.store.all():
        store.put(record.document)
    for model, gpu in CATALOG:
        result = apron("plan", model, "--gpu", gpu, "--json")
        assert result.returncode == 0, result.stderr
        store.put(PlanRecord(Plan.from_json(json.loads(result.stdout))))
    return store


@pytest.fixture(scope="module")
def report(store, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    # Relative paths, as a user in their project folder types them (and what the page shows).
    result = apron("report", "--records", store.root.name, "--out", out.name, cwd=out.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{out.name}/index.html"
    return out


@pytest.fixture(scope="module")
def boots(store) -> list[BootRow]:
    return select(store).boots


@pytest.fixture(scope="module")
def browser(report, tmp_path_factory):
    chrome = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        chrome.open((report / "index.html").as_uri(), offline=True)
        yield chrome
    finally:
        chrome.close()


def stddev(png: bytes) -> float:
    from PIL import Image, ImageStat

    return ImageStat.Stat(Image.open(io.BytesIO(png)).convert("L")).stddev[0]


def test_the_store_holds_real_boots_and_catalog_plans(store, boots):
    kinds = [r.kind for r in store.all()]
    assert kinds.count("boot") >= 5 and kinds.count("plan") >= 3 + 1 and kinds.count("fix") >= 1
    assert {b.outcome for b in boots} >= {"healthy", "failed"}
    assert all(b.platform == "cpu" and b.engine_version.startswith("0.32.0") for b in boots)
    assert all(b.plan is not None for b in boots)  # each boot's own plan, recorded before it


def test_page_loads_offline_with_no_errors(browser):
    assert browser.problems() == []
    urls = browser.requested_urls()
    assert urls and all(url.startswith("file://") for url in urls), urls
    assert browser.evaluate("document.scripts.length") == 0


def test_every_chart_is_an_svg_with_marks_and_axis_labels(browser):
    for name, labels in CHARTS.items():
        found = browser.evaluate(
            f"""(() => {{
                const svg = document.querySelector('#chart-{name} figure svg');
                if (!svg) return null;
                const box = svg.getBoundingClientRect();
                return {{elements: svg.querySelectorAll('*').length, width: box.width, height: box.height,
                         texts: [...svg.querySelectorAll('text')].map(t => t.textContent),
                         marks: svg.querySelectorAll('.mark').length}};
            }})()"""
        )
        assert found is not None, name
        assert found["elements"] > 20 and found["width"] > 300 and found["height"] > 100, (name, found)
        for label in labels:
            assert label in found["texts"], (name, label)
        assert found["marks"] > 0, name


def test_record_ids_are_in_the_dom(browser, boots, store):
    text = browser.evaluate("document.body.textContent")
    titles = browser.evaluate("[...document.querySelectorAll('svg title')].map(t => t.textContent).join('\\n')")
    links = browser.evaluate("[...document.querySelectorAll('#boots a')].map(a => a.getAttribute('href'))")
    memory = browser.evaluate("document.querySelector('#chart-memory svg').textContent")
    for boot in boots:
        assert boot.record_id[:12] in text and f"records/{boot.record_id}.html" in links
        assert f"· {boot.record_id[:8]} measured (CPU)" in memory  # every boot has its bar, even an empty one
        if boot.measured.get("available_kv_bytes") or boot.serving:
            assert boot.record_id[:12] in titles  # and its marks name it
    for rid in store.ids():
        assert rid[:12] in text, rid


def test_what_the_page_says_about_real_boots(browser, boots):
    # Chart 1: CPU boots of GPU plans are not comparable: listed with the reason, not drawn; boots of plans
    # made for the CPU platform (the README's walkthrough) are drawn, a mark per quantity both sides have.
    notes = browser.evaluate(
        "[...document.querySelectorAll('#chart-predicted-vs-measured .notes li')].map(l => l.textContent)"
    )
    titles = browser.evaluate(
        "[...document.querySelectorAll('#chart-predicted-vs-measured svg .mark title')].map(t => t.textContent)"
    )
    on_gpu_plans = [b for b in boots if b.plan is not None and b.plan.gpu_name != "cpu"]
    on_cpu_plans = [b for b in boots if b.plan is not None and b.plan.gpu_name == "cpu"]
    assert len(on_cpu_plans) >= 3 and len(notes) == len(on_gpu_plans)
    for boot in on_gpu_plans:
        assert any(boot.record_id[:12] in n and "ran on a CPU, planned for NVIDIA L4" in n for n in notes)
    for boot in on_cpu_plans:  # the KV budget, and the KV tokens where the engine got to log them
        marks = sum(boot.record_id[:8] in t for t in titles)
        assert marks >= (2 if boot.outcome == "healthy" else 1), boot.record_id
    # Chart 4 and its sentence: the ssh boot ran vllm bench serve with 8 requests.
    served = [b for b in boots if b.serving]
    assert served and all(b.serving.num_requests == 8 for b in served)
    reading = browser.evaluate("document.querySelector('#chart-time-to-first-token .reading').textContent")
    assert "With 50 requests, p99 is the slowest one or two" in reading and "ran 8 requests each" in reading
    # Chart 5: verdicts, flags beyond defaults, checks.
    rows = browser.evaluate(
        "[...document.querySelectorAll('#boots tbody tr')].map(r => [...r.cells].map(c => c.textContent))"
    )
    by_id = {row[0]: row for row in rows}
    ssh = next(b for b in served)
    row = by_id[ssh.record_id[:12]]
    assert row[5:9] == ["yes", "yes", "no", "yes"]  # booted, responded, answered (random weights), served
    assert "--enforce-eager" in row[9] and "--port" not in row[9] and "--host" not in row[9]
    assert row[10] == "0 of 3" and row[11].endswith(" s")
    refused = next(b for b in boots if "--max-model-len 999999" in b.flags)
    assert by_id[refused.record_id[:12]][5] == "no" and "failed" in by_id[refused.record_id[:12]][4]


def test_screenshots_are_not_blank(browser):
    page = browser.screenshot()
    assert stddev(page) > MIN_STDDEV
    if os.environ.get("APRON_REPORT_SCREENSHOT"):
        Path(os.environ["APRON_REPORT_SCREENSHOT"]).write_bytes(page)
    for name in CHARTS:
        box = browser.evaluate(
            f"(() => {{ const b = document.querySelector('#chart-{name} svg').getBoundingClientRect();"
            " return {x: b.x + window.scrollX, y: b.y + window.scrollY, width: b.width, height: b.height}; })()"
        )
        assert stddev(browser.screenshot(box)) > MIN_STDDEV, name


def test_a_boot_page_renders_offline(report, boots, tmp_path):
    boot = next(b for b in boots if b.serving)
    chrome = Browser(tmp_path / "profile")
    try:
        chrome.open((report / "records" / f"{boot.record_id}.html").as_uri())
        assert chrome.problems() == []
        text = chrome.evaluate("document.body.textContent")
        assert boot.record_id in text and "Predicted beside measured" in text and "not logged" in text
        href = chrome.evaluate("document.querySelector('a[href$=\".html\"]').getAttribute('href')")
        assert (report / "records" / href).exists()  # the plan's page, beside it
    finally:
        chrome.close()


def test_the_checks_catch_a_broken_page(tmp_path):
    """The same checks on a page that throws and reaches for the network: both are seen."""
    page = tmp_path / "broken.html"
    page.write_text('<img src="http://example.invalid/x.png"><script>undefined_function()</script>')
    chrome = Browser(tmp_path / "profile")
    try:
        chrome.open(page.as_uri())
        assert any("undefined_function" in p for p in chrome.problems())
        assert "http://example.invalid/x.png" in chrome.requested_urls()
    finally:
        chrome.close()


def test_records_show_html_of_a_real_boot_and_fix(store, boots, tmp_path):
    boot = next(b for b in boots if b.serving)
    page = tmp_path / "boot.html"
    result = apron("records", "show", boot.record_id[:12], "--records", str(store.root), "--html", str(page))
    assert result.returncode == 0 and result.stdout.strip() == str(page), result.stderr
    html = page.read_text()
    # Its plan's six pieces and the one piece the CPU build logs (the KV cache), each a mark.
    assert 'id="chart-memory-boot"' in html and html.count('class="mark"') == 7
    assert boot.record_id in html and "not logged: weights" in html
    assert "href=" not in html  # a page on its own links nowhere
    fix = next(r for r in store.all() if r.kind == "fix" and r.document.corrected_boot)
    result = apron("records", "show", fix.id, "--records", str(store.root), "--html", str(tmp_path / "fix.html"))
    html = (tmp_path / "fix.html").read_text()
    assert result.returncode == 0 and fix.document.rule in html
    for rid in (fix.document.failed_boot, fix.document.corrected_boot):
        assert rid[:12] in html
