"""`apron fit`: every configuration it calls feasible is one `apron plan` says fits with concurrency >= N,
the cheapest feasible one comes first, unknown plans stay unknown, and the exit code says whether
anything serves the load."""

from __future__ import annotations

import json

import pytest

from apron.cli import main
from conftest import snapshot_document

SCENARIOS = [
    # (model, context tokens, users, extra arguments): dense GQA with fp8 and max-num-seqs choices,
    # a sliding-window MoE with MXFP4 weights, an attention-free state-space model.
    ("Qwen/Qwen3-8B", 32768, 32, []),
    ("openai/gpt-oss-20b", 65536, 48, ["--gpus", "L4,L40S,A100,H100,H200,4090,T4"]),
    ("state-spaces/mamba-2.8b-hf", 2048, 600, ["--gpus", "L4,A10G,H100", "--max-gpus", "2"]),
]


def run(capsys, *args: str) -> tuple[int, dict | str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in args and out.strip() else out), err


def effective_max_num_seqs(plan: dict) -> int:
    seqs = plan["settings"]["max_num_seqs"]
    for flag in plan["flags"]:
        words = flag.split()
        if words[0] == "--max-num-seqs":
            seqs = int(words[1])
    return seqs


@pytest.mark.parametrize("model,context,users,extra", SCENARIOS, ids=[s[0].split("/")[1] for s in SCENARIOS])
def test_every_feasible_configuration_is_a_plan_that_fits(model, context, users, extra, capsys, apron_home_with_facts):
    code, doc, _ = run(capsys, "fit", model, "--context", str(context), "--users", str(users), *extra, "--json")
    assert code == 0 and doc["schema"] == "apron.fit/1"
    feasible = [r for r in doc["configurations"] if r["status"] == "feasible"]
    assert feasible and doc["num_feasible"] == len(feasible)
    for row in feasible:
        assert row["apron_plan"][:3] == ["apron", "plan", model]
        plan_code, plan, _ = run(capsys, *row["apron_plan"][1:], "--json")
        assert plan_code == 0 and plan["verdict"] == "fits", row["apron_plan"]
        assert plan["quantities"]["max_concurrency"]["value"] >= users, row["apron_plan"]
        assert effective_max_num_seqs(plan) >= users, row["apron_plan"]
        assert plan["hardware"]["gpu"] == row["gpu"] and plan["hardware"]["count"] == row["count"]
        assert plan["command"] == row["command"]
        assert plan["settings"]["max_model_len"] == context
    priced = [r for r in feasible if r["cost_per_hour_usd"] is not None]
    assert doc["best"] == feasible[0] == priced[0]
    assert [r["cost_per_hour_usd"] for r in priced] == sorted(r["cost_per_hour_usd"] for r in priced)
    assert feasible[: len(priced)] == priced  # a GPU with no price is ranked after every priced one
    for row in priced:
        assert row["cost_per_hour_usd"] == pytest.approx(row["price"]["usd_per_gpu_hour"] * row["count"])
        assert row["price"]["source"] and row["price"]["date"]


def test_infeasible_rows_say_why_and_what_was_tried(capsys, apron_home_with_facts):
    code, doc, _ = run(capsys, "fit", "Qwen/Qwen3-8B", "--context", "32768", "--users", "32", "--json")
    assert code == 0
    rows = {(r["gpu"], r["count"]): r for r in doc["configurations"]}
    t4 = rows[("Tesla T4", 1)]
    assert t4["status"] == "infeasible" and t4["reason"].startswith("weights do not fit")
    assert t4["tried"] == []  # more KV memory cannot fix weights that do not fit
    h100 = rows[("NVIDIA H100 80GB HBM3", 1)]
    assert h100["status"] == "infeasible" and h100["reason"].startswith("KV holds only")
    strongest = h100["tried"][0]
    assert strongest["change"] == "--max-num-seqs 32 --kv-cache-dtype fp8"
    assert h100["max_concurrency"] < strongest["max_concurrency"] < 32
    v100 = rows[("Tesla V100-SXM2-32GB", 4)]
    assert any("compute capability 7.0" in (t["result"] or "") for t in v100["tried"])  # fp8 not tried there
    chosen = [r for r in doc["configurations"] if any("--kv-cache-dtype fp8" in c for c in r["changes"])]
    assert chosen, "some configuration becomes feasible only with an fp8 KV cache"
    for row in chosen:
        assert "--kv-cache-dtype fp8" in row["flags"] and row["settings"]["kv_cache_dtype"] == "fp8"


def test_nothing_serves_the_load_exit_1_with_reasons(capsys, apron_home_with_facts):
    code, doc, err = run(
        capsys, "fit", "Qwen/Qwen3-32B", "--context", "32768", "--users", "64", "--gpus", "T4,L4", "--json"
    )
    assert code == 1 and doc["num_feasible"] == 0 and doc["best"] is None
    assert len(doc["configurations"]) == 8 and all(r["reason"] for r in doc["configurations"])
    assert "no configuration serves 64 users" in err
    code, text, _ = run(capsys, "fit", "Qwen/Qwen3-32B", "--context", "32768", "--users", "64", "--gpus", "T4,L4")
    assert code == 1 and "does not serve the load:" in text and "1 x Tesla T4: weights do not fit" in text


def test_unknown_plans_are_reported_not_ranked(tmp_path, capsys, apron_home_with_facts):
    doc = snapshot_document("Qwen/Qwen3-8B")
    doc["files"]["config.json"]["compress_ratios"] = [4, 4, 128]  # a compressed KV layout no family reads
    snapshot = tmp_path / "compressed.json"
    snapshot.write_text(json.dumps(doc))
    code, fit, _ = run(
        capsys, "fit", str(snapshot), "--context", "8192", "--users", "4", "--gpus", "H100,B200", "--json"
    )
    assert code == 1 and fit["num_feasible"] == 0
    unknown = [r for r in fit["configurations"] if r["status"] == "unknown"]
    assert len(unknown) == 8 and all("compress_ratios" in r["reason"] for r in unknown)
    assert all(r["verdict"] == "unknown" and r["max_concurrency"] is None for r in unknown)
    _, plan, _ = run(capsys, *unknown[0]["apron_plan"][1:], "--json")
    assert plan["verdict"] == "unknown"


def test_user_prices_replace_the_table_and_unpriced_gpus_go_last(tmp_path, capsys, apron_home_with_facts):
    prices = {
        "schema": "apron.prices/1",
        "rows": [
            {
                "gpu": "H200",
                "tier": "on-demand",
                "usd_per_gpu_hour": 0.5,
                "source": "our contract",
                "date": "2026-06-01",
            }
        ],
    }
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(prices))
    args = ["fit", "Qwen/Qwen3-8B", "--context", "8192", "--users", "8", "--gpus", "L4,H200", "--max-gpus", "2"]
    code, doc, _ = run(capsys, *args, "--prices", str(path), "--json")
    assert code == 0
    assert doc["best"]["gpu"] == "NVIDIA H200" and doc["best"]["cost_per_hour_usd"] == 0.5
    assert doc["best"]["price"]["source"] == "our contract" and doc["prices"]["file"] == str(path)
    l4 = [r for r in doc["configurations"] if r["gpu"] == "NVIDIA L4" and r["status"] == "feasible"]
    assert l4 and all(r["price"] is None and r["cost_per_hour_usd"] is None for r in l4)
    _, text, _ = run(capsys, *args, "--prices", str(path))
    assert "no price" in text and "our contract, 2026-06-01" in text
    _, spot, _ = run(capsys, *args, "--tier", "spot", "--json")
    assert spot["best"]["price"]["tier"] == "spot" and spot["request"]["tier"] == "spot"


@pytest.mark.parametrize(
    "row,field",
    [
        ({"gpu": "H100", "tier": "on-demand", "source": "s", "date": "2026-01-01"}, "usd_per_gpu_hour"),
        ({"gpu": "H100", "tier": "hourly", "usd_per_gpu_hour": 2, "source": "s", "date": "2026-01-01"}, "tier"),
        ({"gpu": "H900", "tier": "spot", "usd_per_gpu_hour": 2, "source": "s", "date": "2026-01-01"}, "gpu"),
        ({"gpu": "H100", "tier": "spot", "usd_per_gpu_hour": 2, "source": "s", "date": "March"}, "date"),
        ({"gpu": "H100", "tier": "spot", "usd_per_gpu_hour": -1, "source": "s", "date": "2026-01-01"}, "usd_per"),
        ({"gpu": "H100", "tier": "spot", "usd_per_gpu_hour": 2, "date": "2026-01-01"}, "source"),
    ],
)
def test_a_bad_price_file_is_exit_2_naming_the_field(row, field, tmp_path, capsys, apron_home_with_facts):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"schema": "apron.prices/1", "rows": [row]}))
    code, out, err = run(capsys, "fit", "Qwen/Qwen3-8B", "--context", "8192", "--users", "1", "--prices", str(path))
    assert code == 2 and out == ""
    assert f"rows[0].{field}" in err and len(err.strip().splitlines()) == 1


def test_bad_fit_arguments_are_exit_2(capsys, apron_home_with_facts):
    assert run(capsys, "fit", "Qwen/Qwen3-8B", "--users", "4")[0] == 2  # no --context
    assert run(capsys, "fit", "Qwen/Qwen3-8B", "--context", "8192", "--users", "0")[0] == 2
    code, _, err = run(capsys, "fit", "Qwen/Qwen3-8B", "--context", "8192", "--users", "4", "--gpus", "H900")
    assert code == 2 and "--gpu 'H900'" in err


def test_the_bundled_price_table_is_dated_and_sourced():
    from apron.hardware import all_gpus
    from apron.hardware.prices import load_prices

    table = load_prices()
    catalog = {g.name for g in all_gpus()}
    assert table.rows and all(p.gpu_name in catalog and p.source and p.date for p in table.rows)
    for price in table.rows:
        if price.tier == "spot":  # spot is the cheaper tier of the same card on the same list
            assert price.usd_per_gpu_hour < table.price(price.gpu_name, "on-demand").usd_per_gpu_hour
