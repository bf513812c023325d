"""plan/weights.py tries a named role's pattern only on a name that holds one of its needles (so a plan
of a model none of them names compiles none of them): every match of every pattern in the fixtures'
tensor names (31 real checkpoints, the newest models and the vision towers among them) must hold a
needle, or the prefilter would drop a role the pattern gives."""

from __future__ import annotations

import functools
import re

from apron.plan import weights
from conftest import loaded_snapshot, snapshot_names


@functools.cache
def _all_names() -> frozenset[str]:
    names: set[str] = set()
    for snapshot in snapshot_names():
        # a layer's or an expert's index as 0: the patterns and needles read no particular index
        names.update(re.sub(r"(?<=\.)\d+(?=\.)", "0", tensor.name) for tensor in loaded_snapshot(snapshot).tensors)
    # Names a checkpoint may lack the prefix of (the patterns anchor on a leading dot or ^)
    return frozenset(names | {name.split(".", 1)[1] for name in names if "." in name})


def test_every_match_of_a_named_role_holds_one_of_its_needles():
    names = _all_names()
    matched = 0
    for needles, pattern, role in weights._NAMED_ROLES:
        hits = [name for name in names if re.search(pattern, name)]
        missing = [name for name in hits if not any(needle in name for needle in needles)]
        assert not missing, (pattern, role, missing[:5])
        matched += bool(hits)
    # The check is not vacuous: most patterns match some real tensor of the fixtures.
    assert matched >= 15, matched


def test_the_host_tables_prefilter_keeps_every_match():
    hits = [name for name in _all_names() if re.search(weights._HOST_TABLES, name)]
    assert hits  # DeepSeek-V4.1's Engram and Qwen3.8-Flash-Next's n-gram tables are in the fixtures
    assert all(weights.is_host_table(name) for name in hits)


def test_a_plan_of_a_model_no_pattern_names_compiles_none_of_them():
    """The point of the needles: a Qwen3 plan leaves the role patterns uncompiled."""
    import subprocess
    import sys

    code = (
        "import re, sys\n"
        "from apron.checkpoint import load_checkpoint\n"
        "from apron.hardware import resolve_gpu\n"
        "from apron.plan.planner import plan_checkpoint\n"
        "from apron.plan.settings import UserSettings\n"
        "from apron.plan import weights\n"
        "plan_checkpoint(load_checkpoint('Qwen/Qwen3-8B'), resolve_gpu('H100'), UserSettings(), None)\n"
        # re's compiled-pattern caches: _cache (3.11), _cache and _cache2 (3.12+)
        "def compiled():\n"
        "    keys = [*getattr(re, '_cache', {}), *getattr(re, '_cache2', {})]\n"
        "    return sum(any(key[1] == p for key in keys) for _, p, _ in weights._NAMED_ROLES)\n"
        "print(compiled())\n"
        # the control: the same reading sees a role pattern once one is compiled
        "re.search(weights._NAMED_ROLES[0][1], 'x')\n"
        "print(compiled())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "1"], done.stderr[-2000:]
