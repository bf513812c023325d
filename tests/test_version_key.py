"""engine/facts.py version_key orders vLLM releases exactly as packaging.version does (it reads plain
releases itself and leaves the rest to packaging, imported only then)."""

from __future__ import annotations

import itertools

import pytest
from packaging.version import Version

from apron.engine.facts import version_key
from apron.errors import BadInput

VERSIONS = [
    "0.9.1", "0.10.0", "0.29.0", "0.30.0", "0.30", "0.30.0.0", "0.30.0.post1", "0.30.1", "0.33.0",
    "0.34.0rc1", "0.34.0rc2", "0.34.0", "0.34.0.dev3", "0.34.0.dev3+g1234", "1.0.dev1", "1.0a1.dev1", "1.0a1",
    "1.0b2", "1.0rc1", "1.0", "1.0+cpu", "1.0.post1.dev2", "1.0.post1", "2.0.0a0", "10", "v1.2",
]  # fmt: skip


def test_every_pair_compares_as_packaging_compares_it():
    for a, b in itertools.product(VERSIONS, repeat=2):
        assert (version_key(a) < version_key(b)) == (Version(a) < Version(b)), (a, b)
        assert (version_key(a) == version_key(b)) == (Version(a) == Version(b)), (a, b)


def test_a_version_that_is_not_one_is_bad_input():
    with pytest.raises(BadInput, match="not a release number"):
        version_key("latest")
