"""A record store that gathers the records of the suite's real engine boots, for the report tests.

tests/test_boot.py and tests/test_readme_walkthrough.py boot the real vLLM CPU engine (20-90 s a boot); each adds
its store to the session's pool right after booting, so the report is drawn from real boots without
booting again. Run on its own, the report test first runs those boot tests in a child pytest that
fills the same pool (APRON_TEST_BOOT_POOL names it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from apron.records.store import RecordStore

ROOT = Path(__file__).resolve().parent.parent
POOL_VARIABLE = "APRON_TEST_BOOT_POOL"
# The tests whose boots fill the pool: GPU plans booted on the CPU (ssh with the serving test, a refusal)
# and the README's CPU-platform plans (healthy, refused, fixed).
BOOT_TESTS = (
    "tests/test_boot.py::test_boot_ssh_real_engine_through_the_cli",
    "tests/test_boot.py::test_boot_records_a_real_engine_refusal",
    "tests/test_readme_walkthrough.py::test_the_readme_walkthrough_runs_as_written",
)


class BootPool:
    def __init__(self, root: Path) -> None:
        self.store = RecordStore(root)

    def add(self, store: RecordStore) -> None:
        """Copy every record of STORE (content-addressed: the same id here)."""
        for record in store.all():
            self.store.put(record.document)

    def num_boots(self) -> int:
        return sum(record.kind == "boot" for record in self.store.all())

    def fill(self, min_boots: int) -> None:
        """Run the boot tests in a child pytest when this session has not run them."""
        if self.num_boots() >= min_boots:
            return
        env = {**os.environ, POOL_VARIABLE: str(self.store.root)}
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *BOOT_TESTS],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert result.returncode == 0, "the boot tests failed:\n" + result.stdout[-4000:]


def pool_root(default: Path) -> Path:
    return Path(os.environ.get(POOL_VARIABLE) or default)
