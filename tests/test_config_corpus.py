"""Inputs checked at the door: every config key the planner reads, every kind of wrongness, and the
exact line Apron answers with (tests/fixtures/config-cases.json.gz, written by tests/config_corpus.py
and reviewed); a sample through the real CLI, where bad input is one line on stderr and exit 2."""

from __future__ import annotations

import json
import math
import time

import pytest

from apron.cli import main
from apron.plan import config_schema as schema
from config_corpus import BASE, outcome, read

CASES = read()


def test_every_case_gives_its_line():
    differ = {name: (case, outcome(case["config"])) for name, case in CASES.items()}
    differ = {k: v for k, v in differ.items() if {key: v[0][key] for key in v[1]} != v[1]}
    assert not differ, list(differ.items())[:3]


def test_every_key_the_planner_reads_has_its_cases():
    covered: dict[str, set[str]] = {}
    for name in CASES:
        if not name.startswith("consistency"):
            key, wrong = name.rsplit(" ", 1)
            covered.setdefault(key, set()).add(wrong)
    expected = {
        *schema.TEXT_KEYS,
        *schema.TOP_KEYS,
        *(f"{table}.{key}" for table, keys in schema.NESTED_KEYS.items() for key in keys),
        *(f"quantization_config.{key}" for key in schema.QUANT_KEYS),
        *(f"vision_config.{key}" for key in schema.VISION_KEYS),
    }
    assert expected <= set(covered)
    assert all(len(covered[key]) >= 2 for key in expected)
    assert all("error" in case or case["unknown"] for case in CASES.values())  # none is accepted


def folder_with(tmp_path, config: dict):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    return folder


# One case of each kind of wrongness, through `apron plan` itself.
THROUGH_THE_CLI = [
    "hidden_size string",
    "text_config.num_key_value_heads below_range",
    "num_hidden_layers fraction",
    "max_position_embeddings below_range",
    "rope_theta nan",
    "vocab_size infinity",
    "num_hidden_layers past_any_model",
    "tie_word_embeddings number",
    "layer_types numbers",
    "vision_config.patch_size bool",
    "consistency: heads not a multiple of kv heads",
]


@pytest.mark.parametrize("name", THROUGH_THE_CLI)
def test_bad_config_is_one_line_and_exit_2(name, tmp_path, capsys, apron_home_with_facts):
    folder = folder_with(tmp_path, CASES[name]["config"])
    started = time.monotonic()
    code = main(["plan", str(folder), "--gpu", "H100", "--json"])
    out, err = capsys.readouterr()
    assert time.monotonic() - started < 2
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "apron: error: " + CASES[name]["error"].replace("config.json", f"{folder}/config.json", 1)
    ]


def test_a_per_layer_list_where_one_value_is_read_is_unknown(tmp_path, capsys, apron_home_with_facts):
    folder = folder_with(tmp_path, {**BASE, "sliding_window": [4096, None]})
    assert main(["plan", str(folder), "--gpu", "H100", "--json"]) == 1  # a verdict other than fits
    plan = json.loads(capsys.readouterr().out)
    assert plan["verdict"] == "unknown"
    assert any("'sliding_window' is a per-layer list" in u for u in plan["unknowns"])


def test_the_values_the_issue_names(tmp_path):
    """A string hidden_size, zero KV heads, a fractional layer count, a negative length, NaN, 1e400,
    2^70 layers: each refused in one line, none an internal error, none a hang."""
    for patch in (
        {"hidden_size": "4096"},
        {"num_key_value_heads": 0},
        {"num_hidden_layers": 2.5},
        {"max_position_embeddings": -1},
        {"rope_theta": math.nan},
        {"vocab_size": json.loads("1e400")},
        {"num_hidden_layers": 2**70},
    ):
        result = outcome({**BASE, **patch})
        assert "error" in result and result["error"].startswith(f"config.json: {next(iter(patch))} is "), result
