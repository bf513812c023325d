"""Every config key the planner reads is declared, so checked at the door; and every key of every
fixture config is read, declared irrelevant by its family, or on the reviewed KV-neutral list (unknown
by default). Found by planning each fixture with a config that records every key read from it."""

from __future__ import annotations

from typing import Any

import pytest

from apron.checkpoint.snapshot import load_snapshot
from apron.hardware import resolve_gpu
from apron.plan import config_schema as schema
from apron.plan.kv.families import all_families, family_for
from apron.plan.kv.unknowns import BASE_READS, KV_NEUTRAL
from apron.plan.model_config import ModelConfig
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings
from conftest import snapshot_document, snapshot_names

# Keys read for what they are, not as numbers: the config's own structure.
STRUCTURE = {"text_config", "llm_config", "language_config", "vision_config", "audio_config", "architectures"}


class Recording(dict):
    """A config that notes the path of every key read from it."""

    def __init__(self, table: dict, path: str, seen: set[str]):
        super().__init__()
        self._path, self._seen = path, seen
        for key, value in table.items():
            dict.__setitem__(self, key, Recording(value, f"{path}{key}.", seen) if isinstance(value, dict) else value)

    def get(self, key: Any, default: Any = None) -> Any:
        self._seen.add(self._path + str(key))
        return dict.get(self, key, default)

    def __getitem__(self, key: Any) -> Any:
        self._seen.add(self._path + str(key))
        return dict.__getitem__(self, key)

    def __contains__(self, key: Any) -> bool:
        self._seen.add(self._path + str(key))
        return dict.__contains__(self, key)


def declared(path: str, text_prefix: str) -> bool:
    parts = path.split(".")
    if text_prefix and path.startswith(text_prefix):
        parts = parts[1:]
    if len(parts) == 1:
        return parts[0] in schema.TEXT_KEYS or parts[0] in schema.TOP_KEYS or parts[0] in STRUCTURE
    head, key = parts[0], parts[-1]
    if head == "vision_config":
        return key in schema.VISION_KEYS
    if head == "quantization_config":
        return key in schema.QUANT_KEYS
    return key in schema.NESTED_KEYS.get(head, {}) or head in ("compress_rates",)


def recording_configs(monkeypatch, seen: set[str]) -> None:
    """ModelConfig.from_config, whose result records every read: it copies the config (leaving its
    nulls out), so a recording config.json alone would miss every read after the check."""
    parse = ModelConfig.from_config.__func__  # type: ignore[attr-defined]

    def from_config(cls, config: dict[str, Any], file: str = "config.json") -> ModelConfig:
        parsed = parse(cls, config, file)
        raw = Recording(parsed.raw, "", seen)
        text = next(
            (
                dict.get(raw, k)
                for k in ("text_config", "llm_config", "language_config")
                if dict.get(parsed.raw, k) is parsed.text
            ),
            raw,
        )
        return cls(raw=raw, text=text, unknowns=parsed.unknowns)

    monkeypatch.setattr(ModelConfig, "from_config", classmethod(from_config))


@pytest.mark.parametrize("name", snapshot_names())
def test_every_key_the_planner_reads_is_checked(name, apron_home_with_facts, monkeypatch):
    document = snapshot_document(name)
    seen: set[str] = set()
    document["files"]["config.json"] = Recording(document["files"]["config.json"], "", seen)
    recording_configs(monkeypatch, seen)
    checkpoint = load_snapshot(f"{name}.json", document=document)
    plan_checkpoint(checkpoint, resolve_gpu("H100"), UserSettings(max_model_len=4096))
    assert len(seen) > 10  # the planner's reads were recorded
    prefix = next((f"{k}." for k in ("text_config", "llm_config", "language_config") if f"{k}." in str(seen)), "")
    undeclared = sorted(path for path in seen if not declared(path, prefix))
    assert not undeclared, f"read but never checked: {undeclared}"


@pytest.mark.parametrize("name", snapshot_names())
def test_every_key_of_every_fixture_is_accounted_for(name):
    config = ModelConfig.from_config(snapshot_document(name)["files"]["config.json"])
    arch = (config.raw.get("architectures") or ["?"])[0]
    family = family_for(arch, config)
    allowed = BASE_READS | KV_NEUTRAL | family.READS | getattr(family, "IRRELEVANT", frozenset())
    assert not sorted(k for k in config.text if k not in allowed and config.text[k] not in (None, False, 0, [], {}))


def test_every_family_key_has_a_kind():
    for family in all_families():
        assert not sorted(family.READS - set(schema.TEXT_KEYS) - {"compress_rates"}), family.NAME
