"""The documents Apron stores: a plan record and a boot record, and how they compare.

A boot record holds only what was observed: every number under "measured" comes from a line of the
engine's log (its basis names the line) and is labelled measured; a number the log did not print is
absent, never estimated. Host faults are kept as what they are (outcome "host_fault") and are never
counted against the model.
"""

from __future__ import annotations

from apron.measure.logparse import GIB, GIB_RESOLUTION_BYTES, ParsedLog

GIB_PRINTED = "printed by vLLM in GiB with two decimals: exact to +-0.005 GiB"
# Parsed log field -> (name in the record, unit). Names shared with the plan use the plan's names,
# so `compare` lines them up.
MEASURED_FIELDS: dict[str, tuple[str, str]] = {
    "weights_bytes": ("weights_bytes_per_gpu", "bytes"),
    "activation_peak_bytes": ("activation_peak_bytes", "bytes"),
    "cudagraph_estimate_bytes": ("cudagraph_bytes", "bytes"),
    "cudagraph_bytes": ("cudagraph_actual_bytes", "bytes"),
    "non_torch_bytes": ("non_torch_bytes", "bytes"),
    "requested_bytes": ("requested_bytes", "bytes"),
    "available_kv_bytes": ("available_kv_bytes", "bytes"),
    "num_gpu_blocks": ("num_kv_blocks", "blocks"),
    "kv_tokens": ("kv_tokens", "tokens"),
    "max_concurrency": ("max_concurrency", "sequences"),
    "total_memory_bytes": ("total_memory_bytes", "bytes"),
    "consumed_bytes": ("consumed_bytes", "bytes"),
    "non_kv_bytes": ("non_kv_bytes", "bytes"),
    "max_model_len": ("max_model_len", "tokens"),
    "block_size": ("block_size", "tokens"),
}
TIMING_FIELDS = (
    "weights_load_seconds",
    "model_load_seconds",
    "torch_compile_seconds",
    "graph_capture_seconds",
    "init_engine_seconds",
)
OUTCOMES = ("healthy", "failed", "host_fault", "harness_fault")


def plan_record(plan: dict) -> dict:
    """A plan as a record. No timestamp: the same plan is the same record."""
    return {"kind": "plan", "plan": plan}


def measured_quantities(parsed: ParsedLog) -> dict:
    out = {}
    for name, (record_name, unit) in MEASURED_FIELDS.items():
        value = getattr(parsed, name)
        if value is None:
            continue
        if record_name == "cudagraph_bytes" and parsed.cudagraph_estimate_bytes is None:
            continue
        basis = "vLLM log " + parsed.sources.get(name, "(derived from logged lines)")
        entry = {"value": value, "unit": unit, "label": "measured", "basis": basis[:400]}
        if unit == "bytes":
            entry["resolution_bytes"] = GIB_RESOLUTION_BYTES
        if name in parsed.per_rank:
            entry["per_rank"] = parsed.per_rank[name]
        out[record_name] = entry
    return out


def log_timings(parsed: ParsedLog) -> dict:
    return {name: getattr(parsed, name) for name in TIMING_FIELDS if getattr(parsed, name) is not None}


def compare(plan_doc: dict, boot_doc: dict) -> dict:
    """Predicted beside measured, with the error (predicted - measured) in GiB and in % of measured."""
    predicted = plan_doc.get("quantities", {})
    measured = boot_doc.get("measured", {})
    rows = []
    for name in sorted(set(predicted) | set(measured), key=_order(predicted)):
        p, m = predicted.get(name), measured.get(name)
        if m is None and (p is None or p.get("value") is None):
            continue
        rows.append(_row(name, p, m))
    warnings = []
    hardware = boot_doc.get("hardware", {})
    planned_gpu = plan_doc.get("hardware", {}).get("gpu")
    if hardware.get("platform") == "cpu":
        warnings.append(
            f"this boot ran on a CPU ({hardware.get('cpu_model') or 'unknown model'}), the plan on "
            f"{planned_gpu}: memory numbers are not comparable, only the way they are read"
        )
    elif hardware.get("gpu_name") and planned_gpu and hardware["gpu_name"] != planned_gpu:
        warnings.append(f"the plan was for {planned_gpu}, the boot ran on {hardware['gpu_name']}")
    if boot_doc.get("outcome") == "host_fault":
        warnings.append("a host fault: nothing here is counted against the model")
    return {
        "plan_id": boot_doc.get("plan_id"),
        "outcome": boot_doc.get("outcome"),
        "engine": {
            "planned": plan_doc.get("engine", {}).get("version"),
            "booted": boot_doc.get("engine", {}).get("version"),
        },
        "rows": rows,
        "warnings": warnings,
    }


def _row(name: str, p: dict | None, m: dict | None) -> dict:
    pv = p.get("value") if p else None
    mv = m.get("value") if m else None
    unit = (m or p or {}).get("unit")
    row = {
        "name": name,
        "unit": unit,
        "predicted": pv,
        "predicted_label": p.get("label") if p else None,
        "measured": mv,
        "error": None,
        "error_gib": None,
        "error_pct": None,
    }
    if pv is not None and mv is not None:
        row["error"] = pv - mv
        if unit == "bytes":
            row["error_gib"] = round((pv - mv) / GIB, 3)
        row["error_pct"] = round((pv - mv) / mv * 100, 2) if mv else None
    return row


def _order(predicted: dict):
    names = list(predicted)
    return lambda n: (names.index(n) if n in names else len(names), n)
