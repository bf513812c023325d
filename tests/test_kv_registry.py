"""The KV family registry: one module per layout family, each architecture claimed by at most one."""

from __future__ import annotations

from apron.engine.facts import known_versions, load_facts
from apron.plan.kv.families import all_families, fallback, matching
from apron.plan.model_config import ModelConfig
from conftest import loaded_snapshot, snapshot_names


def test_every_family_module_declares_what_it_reads_and_where_it_comes_from():
    names = [m.NAME for m in all_families()]
    assert len(names) == len(set(names)), names
    for module in all_families():
        assert isinstance(module.READS, frozenset) and all(isinstance(k, str) for k in module.READS), module
        assert module.SOURCES and all(isinstance(v, str) and v for v in module.SOURCES.values()), module
        assert callable(module.matches) and callable(module.layer_specs), module
    assert fallback().NAME == "decoder"


def test_no_snapshot_is_claimed_by_two_families():
    for name in snapshot_names():
        checkpoint = loaded_snapshot(name)
        config = ModelConfig.from_config(checkpoint.config)
        found = [m.NAME for m in matching(checkpoint.architecture, config)]
        assert len(found) <= 1, (name, found)


def test_no_registered_architecture_is_claimed_by_two_families():
    """Every architecture any shipped release registers, under a plain decoder config (families
    keyed by model type are checked on the snapshots above, each under its own architecture)."""
    plain = ModelConfig.from_config({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64})
    architectures = set().union(*(load_facts(v).architectures for v in known_versions()))
    for arch in sorted(architectures):
        found = [m.NAME for m in matching(arch, plain)]
        assert len(found) <= 1, (arch, found)
