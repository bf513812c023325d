"""`apron fit`: every configuration it calls feasible is one `apron plan` says fits with concurrency >= N,
the cheapest feasible one comes first, unknown plans stay unknown, and the exit code says whether
anything serves the load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apron.cli import main
from apron.errors import BadInput
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
        assert row["price"]["source"] and row["price"]["date"] and row["price_note"] is None
    assert all(r["price_note"] for r in feasible if r["price"] is None)  # a row without a price says why


def test_infeasible_rows_say_why_and_what_was_tried(capsys, apron_home_with_facts):
    code, doc, _ = run(capsys, "fit", "Qwen/Qwen3-8B", "--context", "32768", "--users", "32", "--json")
    assert code == 0
    rows = {(r["gpu"], r["count"]): r for r in doc["configurations"]}
    t4 = rows[("Tesla T4", 1)]
    assert t4["status"] == "infeasible" and t4["reason"].startswith("weights do not fit")
    assert t4["tried"] == []  # more KV memory cannot fix weights that do not fit
    h100 = rows[("NVIDIA H100 80GB HBM3", 1)]
    assert h100["status"] == "infeasible" and h100["reason"].startswith("KV holds only")
    strongest, offer = h100["tried"][:2]
    assert strongest["change"] == "--max-num-seqs 32" and not strongest["needs_consent"]
    # fp8 KV is planned to say what it would hold, never chosen without --allow-fp8-kv
    assert offer["change"] == "--max-num-seqs 32 --kv-cache-dtype fp8" and offer["needs_consent"]
    assert h100["max_concurrency"] < strongest["max_concurrency"] < offer["max_concurrency"] < 32
    assert "not chosen without --allow-fp8-kv" in offer["result"]
    v100 = rows[("Tesla V100-SXM2-32GB", 4)]
    assert any("compute capability 7.0" in (t["result"] or "") for t in v100["tried"])  # fp8 not tried there
    assert not any(any("--kv-cache-dtype fp8" in c for c in r["changes"]) for r in doc["configurations"])
    assert not any(r["settings"]["kv_cache_dtype"] == "fp8" for r in doc["configurations"])


def test_fp8_kv_only_with_consent_and_the_table_says_what_changed(capsys, apron_home_with_facts):
    args = ["fit", "Qwen/Qwen3-8B", "--context", "32768", "--users", "32", "--gpus", "H100,L40S,4090"]
    _, without, _ = run(capsys, *args, "--json")
    code, doc, _ = run(capsys, *args, "--allow-fp8-kv", "--json")
    assert code == 0 and doc["request"]["allow_fp8_kv"] and not without["request"]["allow_fp8_kv"]
    chosen = [r for r in doc["configurations"] if any("--kv-cache-dtype fp8" in c for c in r["changes"])]
    assert chosen, "some configuration becomes feasible only with an fp8 KV cache"
    assert len(doc["configurations"]) == len(without["configurations"])
    before = {(r["gpu"], r["count"]): r["status"] for r in without["configurations"]}
    assert any(before[(r["gpu"], r["count"])] == "infeasible" for r in chosen)
    for row in chosen:
        assert "--kv-cache-dtype fp8" in row["flags"] and row["settings"]["kv_cache_dtype"] == "fp8"
        assert any("uncalibrated scale of 1.0" in c and "attention backend" in c for c in row["changes"])
    _, text, _ = run(capsys, *args, "--allow-fp8-kv", "--top", "20")
    table = text.split("top choice:")[0]
    assert "--kv-cache-dtype fp8*" in table and "uncalibrated scale of 1.0" in table  # in the table itself


def test_each_row_shows_its_interconnect_and_a_decode_bound(capsys, apron_home_with_facts):
    args = ["fit", "Qwen/Qwen3-8B", "--context", "8192", "--users", "16", "--gpus", "H100,4090,L40S"]
    code, doc, _ = run(capsys, *args, "--json")
    assert code == 0
    feasible = {(r["gpu"], r["count"]): r for r in doc["configurations"] if r["status"] == "feasible"}
    assert feasible[("NVIDIA H100 80GB HBM3", 8)]["interconnect"] == "NVLink/NVSwitch"
    assert feasible[("NVIDIA GeForce RTX 4090", 4)]["interconnect"] == "PCIe, no P2P"
    assert feasible[("NVIDIA L40S", 2)]["interconnect"] == "PCIe P2P"
    for row in feasible.values():
        bound = row["decode_bound"]
        assert bound["label"] == "predicted" and "memory bandwidth" in bound["formula"]
        terms = bound["terms"]
        assert bound["tokens_per_second_per_user"] == pytest.approx(
            1 / (terms["memory_seconds"] + terms["allreduce_seconds"]), rel=1e-3
        )
        assert (terms["allreduce_bytes"] == 0) == (row["count"] == 1)
    # more GPUs of the same kind read fewer bytes each: the bound rises with TP
    h100 = [feasible[("NVIDIA H100 80GB HBM3", n)]["decode_bound"]["tokens_per_second_per_user"] for n in (1, 2, 4, 8)]
    assert h100 == sorted(h100)
    _, text, _ = run(capsys, *args)
    assert "link" in text and "tok/s/user <=" in text and "PCIe, no P2P" in text and "not a benchmark" in text


def test_min_tokens_per_second_drops_the_slow_rows(capsys, apron_home_with_facts):
    args = ["fit", "Qwen/Qwen3-8B", "--context", "8192", "--users", "16", "--gpus", "H100,L4", "--json"]
    _, everything, _ = run(capsys, *args)
    speeds = sorted(
        r["decode_bound"]["tokens_per_second_per_user"]
        for r in everything["configurations"]
        if r["status"] == "feasible"
    )
    floor = speeds[len(speeds) // 2]
    code, doc, _ = run(capsys, *args, "--min-tokens-per-second", str(floor))
    assert code == 0 and doc["request"]["min_tokens_per_second"] == floor
    kept = [r for r in doc["configurations"] if r["status"] == "feasible"]
    assert kept and all(r["decode_bound"]["tokens_per_second_per_user"] >= floor for r in kept)
    assert len(kept) == sum(s >= floor for s in speeds)
    dropped = [r for r in doc["configurations"] if "--min-tokens-per-second" in (r["reason"] or "")]
    assert len(dropped) == len(speeds) - len(kept)
    assert run(capsys, *args, "--min-tokens-per-second", "0")[0] == 2


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
    assert table.rows and all(p.gpu_name in catalog and p.source and p.date and p.provider for p in table.rows)
    for price in table.rows:
        if price.tier == "spot":  # spot is the cheaper tier of the same card on the same list
            on_demand = table.price(price.gpu_name, "on-demand", price.provider)
            assert price.usd_per_gpu_hour < on_demand.usd_per_gpu_hour
    # every catalog GPU is priced or says why not
    unpriced = dict(table.unpriced)
    for gpu in catalog:
        assert (table.price(gpu, "on-demand") is not None) != (gpu in unpriced), gpu


def test_the_bundled_table_is_what_a_users_copy_of_it_reads_in_full(tmp_path):
    """The bundled table is read trusted (its dates unchecked, its digest recorded in prices.py): a
    user's copy of the same file, checked in full and hashed, must read the same, digest included."""
    import hashlib

    from apron.hardware import prices

    raw = Path(prices.BUNDLED).read_bytes()
    assert prices.BUNDLED_SHA256 == hashlib.sha256(raw).hexdigest(), "prices.json changed: update BUNDLED_SHA256"
    copy = tmp_path / "prices.json"
    copy.write_bytes(raw)
    bundled, checked = prices.load_prices(), prices.load_prices(str(copy))
    assert (bundled.rows, bundled.unpriced, bundled.sha256) == (checked.rows, checked.unpriced, checked.sha256)


def test_a_users_table_has_its_dates_checked(tmp_path):
    from apron.hardware import prices

    document = json.loads(Path(prices.BUNDLED).read_text())
    document["rows"][0]["date"] = "2026-02-30"
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps(document))
    with pytest.raises(BadInput, match=r"rows\[0\]\.date must be an ISO date"):
        prices.load_prices(str(bad))


def test_provider_picks_one_providers_prices_and_unpriced_rows_say_why(capsys, apron_home_with_facts):
    args = ["fit", "Qwen/Qwen3-8B", "--context", "8192", "--users", "8", "--gpus", "L40S,A10G", "--max-gpus", "2"]
    _, cheapest, _ = run(capsys, *args, "--json")
    code, aws, _ = run(capsys, *args, "--provider", "aws", "--json")
    assert code == 0 and aws["request"]["provider"] == "AWS"
    assert "AWS" in cheapest["prices"]["providers"] and "RunPod" in cheapest["prices"]["providers"]
    l40s = {r["count"]: r for r in aws["configurations"] if r["gpu"] == "NVIDIA L40S"}
    assert l40s[1]["price"]["provider"] == "AWS" and l40s[1]["price"]["usd_per_gpu_hour"] == 1.861
    cheap = next(r for r in cheapest["configurations"] if r["gpu"] == "NVIDIA L40S" and r["count"] == 1)
    assert cheap["price"]["usd_per_gpu_hour"] <= 1.861  # without --provider: the cheapest listed
    a10g = [r for r in aws["configurations"] if r["gpu"] == "NVIDIA A10G"]
    assert all(r["price"] is None and "AWS" in r["price_note"] for r in a10g)
    code, _, err = run(capsys, *args, "--provider", "Lambda")
    assert code == 2 and "--provider 'Lambda'" in err and "RunPod" in err


def test_ranking_reads_the_low_end_of_the_concurrency_range_where_there_is_one(apron_home_with_facts):
    from dataclasses import replace

    from apron.checkpoint import load_checkpoint
    from apron.hardware import resolve_gpu
    from apron.hardware.prices import load_prices
    from apron.plan.fit import FitRequest, FitRow, Outcome, fit, low_end

    class Ranged:  # a Quantity with the stated range the integrator's issue 20 adds
        def __init__(self, value, low):
            self.value, self.low = value, low

    assert low_end(Ranged(10.0, 8.0)) == 8.0 and low_end(Ranged(10.0, None)) is None
    row = fit(load_checkpoint("Qwen/Qwen3-8B"), FitRequest(4, 4096, (resolve_gpu("H100"),), 1), load_prices()).rows[0]
    wide = replace(
        row, outcome=Outcome("feasible", None, False, 12.0, 5.0)
    )  # more spare KV centrally, less at the low end
    narrow = replace(row, outcome=Outcome("feasible", None, False, 10.0, 9.0))
    plain = replace(row, outcome=Outcome("feasible", None, False, 10.0))  # no range: the value
    assert wide.headroom > narrow.headroom and wide.headroom_low < narrow.headroom_low
    assert sorted([wide, narrow], key=FitRow.rank_key) == [narrow, wide]
    assert plain.headroom_low == plain.headroom
