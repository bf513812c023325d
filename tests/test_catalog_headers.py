"""The bundled catalog is read without the per-tensor header checks (checkpoint/snapshot.py
is_trusted): so every entry must pass those checks, and the trusted read must give the same
tensors, in the same order, as the checked one (read with gzip, where the catalog reads with zlib)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from apron.checkpoint import files as cf
from apron.checkpoint.catalog import CATALOG, catalog_index, load_from_catalog
from apron.checkpoint.snapshot import load_snapshot


@pytest.mark.parametrize("repo_id", sorted(catalog_index()))
def test_a_catalog_entry_passes_the_header_checks_and_reads_the_same_trusted(repo_id):
    entry = catalog_index()[repo_id]
    document = cf.parse_json(gzip.decompress(Path(CATALOG, entry["file"]).read_bytes()), entry["file"])
    checked = load_snapshot(f"catalog:{repo_id}", source_kind="catalog", source=repo_id, document=document)
    trusted = load_from_catalog(repo_id)
    assert trusted.tensors == checked.tensors
    assert trusted.config == checked.config
