"""Measure a served model: deployment checks (will it answer) and the serving test (how fast)."""
from __future__ import annotations

from apron.measure.checks import CheckReport, CheckResult, run_checks, template_reads_reasoning_effort
from apron.measure.servetest import ServeReport, run_serve_test

__all__ = ["CheckReport", "CheckResult", "ServeReport", "run_checks", "run_serve_test",
           "template_reads_reasoning_effort"]
