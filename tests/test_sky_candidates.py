"""SkyPilot task files as `--from` candidates, checked against SkyPilot's own parser.

SkyPilot lives in its own venv (scripts/test.sh makes .cache/sky-venv, as for tests/test_sky.py), so
tests/sky_candidates_check.py runs there. Where that venv is missing the test skips and says why, except
under scripts/test.sh (APRON_REQUIRE_SKY=1), where a missing SkyPilot fails. The PyYAML reading of the
same files is tested everywhere in tests/test_candidates.py.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import FIXTURES
from test_sky import ROOT, sky_python

SKY_FILES = sorted((FIXTURES / "candidates").glob("sky-*.yaml"))


def test_apron_reads_what_skypilot_reads(tmp_path):
    python = sky_python()
    if python is None:
        message = "no SkyPilot venv (scripts/test.sh makes .cache/sky-venv; or set APRON_SKY_VENV)"
        if os.environ.get("APRON_REQUIRE_SKY") == "1":
            pytest.fail(message)
        pytest.skip(message)
    assert SKY_FILES
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
        "APRON_HOME": str(tmp_path / "home"),
    }
    done = subprocess.run(
        [str(python), str(ROOT / "tests" / "sky_candidates_check.py"), *map(str, SKY_FILES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("ok ") == len(SKY_FILES)
