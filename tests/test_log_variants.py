"""One reader for every log as people paste it: each fixture log (the CPU engine's real output) in
its prefixed, prefix-stripped, Ray, container, coloured-CRLF and 0.6-era forms reads back to the same
accounting, and `apron log parse` and `apron diagnose` agree on its decisive error, release and
settings (both run through the CLI, in process)."""

from __future__ import annotations

import json
from functools import cache

import pytest
from click.testing import CliRunner

from apron.cli import cli
from apron.measure.logparse import parse_log
from apron.rules.diagnose import settings_flags, settings_from_args
from apron.rules.formats import FORMATS
from log_variants import VARIANTS
from rules_text import LOGS

FIXTURES = sorted(p.stem for p in LOGS.glob("*.log"))
# What a prefix may change: which process printed a line, and so how many copies count as one; and
# which lines were recognised by their message alone.
PROCESS_KEYS = ("per_rank", "sources", "processes", "template_lines")


@cache
def original(name: str) -> str:
    return (LOGS / f"{name}.log").read_text()


def accounting(text: str) -> dict:
    document = parse_log(text, FORMATS).to_json()
    return {k: v for k, v in document.items() if k not in PROCESS_KEYS}


def run_json(tmp_path, *args: str) -> dict:
    result = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", FIXTURES)
def test_every_variant_reads_back_the_same(name, variant):
    text = VARIANTS[variant](original(name))
    assert text != original(name) or variant == "ray"  # a log of the API server alone has no Ray worker
    assert accounting(text) == accounting(original(name))


@pytest.mark.parametrize("variant", ["prefixed", *sorted(VARIANTS)])
@pytest.mark.parametrize("name", FIXTURES)
def test_log_parse_and_diagnose_agree(name, variant, tmp_path, apron_home):
    text = original(name) if variant == "prefixed" else VARIANTS[variant](original(name))
    path = tmp_path / f"{name}.log"
    path.write_bytes(text.encode())
    parsed = run_json(tmp_path, "log", "parse", str(path))
    diagnosis = run_json(tmp_path, "diagnose", str(path))
    found = diagnosis["fingerprint"]
    decisive = parsed["decisive_error"]
    if found is None:
        assert decisive is None
    else:
        error = f"{found['exception']}: {found['message']}" if found["exception"] else found["message"]
        assert decisive == {
            "error": error,
            "line_number": found["line_number"],
            "process": found["process"],
            "family": found["family"],
            "blame": found["blame"],
        }
    assert parsed["engine_version"] == diagnosis["engine_version"] == "0.32.0"
    logged = settings_flags(settings_from_args(parsed["settings"])) if parsed["settings"] else []
    assert diagnosis["settings"]["flags"] == logged
    if parsed["settings"]:
        assert diagnosis["settings"]["source"] == "log (non-default args)"
    # The same decision as on the log as the engine wrote it.
    unprefixed = same_decision(original(name))
    assert same_decision(text) == unprefixed


@cache
def _decision(text: str) -> tuple | None:
    from apron.rules.fingerprint import fingerprint

    found = fingerprint(text)
    if found is None:
        return None
    return (found.family, found.blame, found.exception, found.message, tuple(sorted(found.fields.items(), key=str)))


def same_decision(text: str) -> tuple | None:
    return _decision(text)
