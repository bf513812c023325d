#!/usr/bin/env python3
"""Settle the allocator questions of docs/memory.md on a real GPU: plain PyTorch, no vLLM.

    pip install -e .                       # Apron (pure Python) in a Python that has CUDA PyTorch
    python scripts/gpu/probe_allocator.py  # one GPU (device 0); a few minutes on an H100 / H200
    python scripts/gpu/probe_allocator.py --json out.json --predicted-only

Every "predicted" figure comes from Apron's planner itself (its catalog, plan/allocator.py's replay of
plan/retained.py's event sequences, plan/overheads.py's terms); every "measured" one from PyTorch on
this GPU. It measures, in this order (the replays first: they need an allocator nothing else has used):
  1. the total bytes PyTorch reports, against the GPU catalog (hardware/gpus.json);
  2. the caching allocator replaying the load and profiling windows Apron writes for Qwen3-0.6B (tied),
     Qwen3-8B (untied) and gpt-oss-20b (MoE workspace) at consumer (RTX 4090) and datacenter (H100)
     defaults on vLLM 0.29 and 0.33: every event fed to torch.cuda.caching_allocator_alloc/delete,
     empty_cache and the split limit, read back from torch.cuda.memory_stats and memory_snapshot;
  3. cuBLAS workspace growth: the first GEMM on the default stream and on a new stream;
  4. CUDA graphs: one graph per capture size over Qwen3-0.6B's decoder layers (its shapes, random
     weights, attention left out as vLLM's piecewise graphs leave it), against the planner's graph term;
  5. memory outside PyTorch before anything is allocated (the CUDA context).
It prints one table (predicted, measured, difference) and, with --json, writes the rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # run from a checkout without installing

from apron.checkpoint import load_checkpoint  # noqa: E402
from apron.engine.facts import load_facts  # noqa: E402
from apron.hardware import Gpu, resolve_gpu  # noqa: E402
from apron.plan import graphs as graph_terms  # noqa: E402
from apron.plan import memory, overheads  # noqa: E402
from apron.plan.activation import estimate_activation  # noqa: E402
from apron.plan.allocator import Event, Replay, allocation_size, replay  # noqa: E402
from apron.plan.model_config import ModelConfig  # noqa: E402
from apron.plan.retained import (  # noqa: E402
    WindowInputs,
    lands_in_copy,
    load_window_events,
    profile_window_events,
    runner_buffer_bytes,
    sampler_buffer_bytes,
)
from apron.plan.settings import EngineSettings, UserSettings, resolve_settings  # noqa: E402
from apron.plan.weights import WeightSettings, estimate_weights, is_tied  # noqa: E402

MIB = 2**20
MODELS = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "openai/gpt-oss-20b")
DEFAULTS = ("RTX 4090", "H100")  # consumer (256 sequences, 2,048 tokens) and datacenter (1,024, 8,192)
RELEASES = ("0.29.0", "0.33.0")
GRAPH_MODEL = "Qwen/Qwen3-0.6B"


@dataclass(frozen=True)
class Row:
    section: str
    name: str
    predicted: float | None
    measured: float | None = None
    unit: str = "bytes"
    basis: str = ""

    @property
    def difference(self) -> float | None:
        if self.predicted is None or self.measured is None:
            return None
        return self.measured - self.predicted


# -- the predicted side: the planner's own functions ------------------------------------------------------


@dataclass(frozen=True)
class Windows:
    label: str
    load: tuple[Event, ...]
    profile: tuple[Event, ...]
    account: str


def planner_inputs(model: str, gpu_alias: str, release: str) -> tuple[ModelConfig, EngineSettings, Any, Gpu, Any]:
    checkpoint = load_checkpoint(model)
    config = ModelConfig.from_config(checkpoint.config)
    facts = load_facts(release)
    gpu = resolve_gpu(gpu_alias)
    settings = resolve_settings(checkpoint, config, gpu, facts, UserSettings())
    return config, settings, facts, gpu, checkpoint


def windows(model: str, gpu_alias: str, release: str) -> Windows:
    """The load and profile windows as plan/memory.py builds them for this model, GPU and release."""
    config, settings, facts, gpu, checkpoint = planner_inputs(model, gpu_alias, release)
    weights = estimate_weights(
        checkpoint,
        config,
        WeightSettings(
            tensor_parallel_size=1,
            runtime_dtype=settings.dtype,
            capability=gpu.compute_capability,
            vocab_padding_size=facts.defaults.get("vocab_padding_size", 64),
        ),
    )
    load = load_window_events(
        runner_buffer_bytes(settings.max_num_seqs, settings.max_num_batched_tokens),
        weights.param_bytes,
        sampler_buffer_bytes(settings.max_num_seqs, config.vocab_size),
    )
    _, moe, _ = memory.moe_terms(config, settings, gpu)
    cublas = 0 if facts.at_least("0.33.0") else overheads.cublas_workspace(gpu.compute_capability).num_bytes
    quantized = config.quant_method not in (None, "mxfp4", "gpt_oss_mxfp4")
    activation = estimate_activation(config, settings, facts, is_multimodal=False, is_attention_free=False)
    inputs = WindowInputs(
        has_compile_copy=any(m.name == "compile transient" for m in activation.moments),
        cublas_workspace_bytes=cublas,
        moe_workspace_bytes=moe,
        is_first_gemm_quantized=quantized,
        lands_in_copy=lands_in_copy(
            config,
            is_tied=is_tied(checkpoint, config),
            is_quantized=quantized,
            moe_workspace_bytes=moe,
            cublas_workspace_bytes=cublas,
        ),
    )
    profile, account = profile_window_events(config, settings, facts, inputs)
    label = f"{model.split('/')[-1]} {gpu_alias} defaults vLLM {release}"
    return Windows(label, tuple(load), tuple(profile), account)


def predicted_replays(cases: list[Windows]) -> dict[str, tuple[Replay, Replay]]:
    return {c.label: (replay(c.load), replay(c.profile)) for c in cases}


def graph_prediction(gpu_alias: str, release: str) -> tuple[int, EngineSettings, ModelConfig]:
    """The planner's graph term for one piecewise graph per capture size over Qwen3-0.6B's layers:
    plan/graphs.py's intercept and per-layer-and-graph slope (its first component, without the FULL
    graph; the FULL extrapolation is vLLM's arithmetic, not memory)."""
    config, settings, _, _, _ = planner_inputs(GRAPH_MODEL, gpu_alias, release)
    count = len(settings.cudagraph_capture_sizes)
    predicted = (
        graph_terms.CUDAGRAPH_BASE_BYTES + graph_terms.CUDAGRAPH_PER_LAYER_GRAPH_BYTES * config.num_layers * count
    )
    return int(predicted), settings, config


def predicted_rows(gpu_name: str | None, cases: list[Windows]) -> list[Row]:
    """Every row with its predicted side; the measured side is filled in on the GPU."""
    rows = []
    try:
        catalog = resolve_gpu(gpu_name) if gpu_name else None
    except Exception:  # noqa: BLE001 - a GPU the catalog does not hold: nothing to predict
        catalog = None
    rows.append(Row("device", "total bytes", catalog.total_bytes if catalog else None, basis="hardware/gpus.json"))
    rows.append(
        Row("device", "outside torch before any allocation", overheads.PRE_SNAPSHOT_BYTES, basis="PRE_SNAPSHOT_BYTES")
    )
    for label, (load, profile) in predicted_replays(cases).items():
        rows += [
            Row(label, "load: reserved", load.final.reserved_bytes, basis="plan/allocator.py replay"),
            Row(label, "load: allocated", load.final.allocated_bytes),
            Row(label, "load: segments (cudaMalloc)", load.num_cuda_mallocs, unit="count"),
            Row(label, "profile: retained free", profile.retained_free_bytes),
            Row(label, "profile: reserved at the end", profile.final.reserved_bytes),
        ]
    capability = catalog.compute_capability if catalog else (9, 0)
    workspace = overheads.cublas_workspace(capability).num_bytes
    rows += [
        Row("cuBLAS", "default stream: allocated", workspace, basis="overheads.cublas_workspace"),
        Row("cuBLAS", "new stream: reserved", allocation_size(workspace), basis="allocator segment of it"),
    ]
    for alias in DEFAULTS:
        predicted, settings, _ = graph_prediction(alias, "0.33.0")
        rows.append(
            Row(
                "CUDA graphs",
                f"{GRAPH_MODEL.split('/')[-1]}: {len(settings.cudagraph_capture_sizes)} graphs ({alias} sizes)",
                predicted,
                basis="CUDAGRAPH_BASE_BYTES + CUDAGRAPH_PER_LAYER_GRAPH_BYTES x layers x graphs",
            )
        )
    return rows


# -- the measured side: PyTorch on this GPU ------------------------------------------------------------------


class Allocator:
    """Feeds allocator events to PyTorch's caching allocator on device 0."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.live: dict[str, int] = {}

    def set_max_split(self, num_bytes: int) -> None:
        # vLLM's _scoped_allocator_max_split (v1/worker/gpu_worker.py 0.33.0:420-446); "" restores the default
        setter = getattr(self.torch._C, "_accelerator_setAllocatorSettings", None) or (
            self.torch.cuda.memory._set_allocator_settings
        )
        setter(f"max_split_size_mb:{num_bytes // MIB}" if num_bytes else "")

    def run(self, events: tuple[Event, ...]) -> dict[str, Any]:
        torch = self.torch
        start = torch.cuda.memory_stats()
        for event in events:
            if event.op == "alloc":
                self.live[event.tag] = torch.cuda.caching_allocator_alloc(max(event.num_bytes, 1), 0)
            elif event.op == "free":
                torch.cuda.caching_allocator_delete(self.live.pop(event.tag))
            elif event.op == "empty_cache":
                torch.cuda.empty_cache()
            elif event.op == "max_split":
                self.set_max_split(event.num_bytes)
            elif event.op == "reset_peak":
                torch.cuda.reset_peak_memory_stats()
        end = torch.cuda.memory_stats()
        return {
            "reserved": end["reserved_bytes.all.current"],
            "allocated": end["allocated_bytes.all.current"],
            "mallocs": end["segment.all.allocated"] - start["segment.all.allocated"],
            "segments": sorted(s["total_size"] for s in torch.cuda.memory_snapshot()),
        }

    def clear(self) -> None:
        for ptr in self.live.values():
            self.torch.cuda.caching_allocator_delete(ptr)
        self.live.clear()
        self.set_max_split(0)
        self.torch.cuda.empty_cache()


def measure_replays(torch: Any, cases: list[Windows]) -> dict[str, dict[str, Any]]:
    allocator, out = Allocator(torch), {}
    for case in cases:
        allocator.clear()
        load = allocator.run(case.load)
        allocator.clear()
        profile = allocator.run(case.profile)
        profile["retained_free"] = profile["reserved"] - profile["allocated"]
        out[case.label] = {"load": load, "profile": profile}
        allocator.clear()
    return out


def measure_cublas(torch: Any) -> dict[str, int]:
    """Allocator growth at the first GEMM on the default stream, then on a new stream."""
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    before = torch.cuda.memory_stats()
    a @ a
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a @ a
    torch.cuda.synchronize()
    later = torch.cuda.memory_stats()
    return {
        "default_allocated": after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"],
        "new_stream_reserved": later["reserved_bytes.all.current"] - after["reserved_bytes.all.current"],
    }


def measure_graphs(torch: Any, sizes: tuple[int, ...], config: ModelConfig) -> int:
    """Free device memory used by capturing one graph per size over the decoder layers' GEMMs and
    element-wise work (no attention: vLLM's piecewise graphs split it out), into one shared pool."""
    hidden, inter, layers = config.hidden_size, config.intermediate_size, config.num_layers
    qkv = (config.num_heads + 2 * config.num_kv_heads) * config.head_dim
    dtype = torch.bfloat16
    weights = [
        (
            torch.randn(hidden, qkv, device="cuda", dtype=dtype) * 0.01,
            torch.randn(config.num_heads * config.head_dim, hidden, device="cuda", dtype=dtype) * 0.01,
            torch.randn(hidden, 2 * inter, device="cuda", dtype=dtype) * 0.01,
            torch.randn(inter, hidden, device="cuda", dtype=dtype) * 0.01,
        )
        for _ in range(layers)
    ]
    static = torch.zeros(max(sizes), hidden, device="cuda", dtype=dtype)

    def forward(x: Any) -> Any:
        for wqkv, wo, wgu, wd in weights:
            h = torch.nn.functional.rms_norm(x, (hidden,))
            q = (h @ wqkv)[:, : wo.shape[0]]
            x = x + q @ wo
            h = torch.nn.functional.rms_norm(x, (hidden,))
            gate, up = (h @ wgu).chunk(2, dim=-1)
            x = x + (torch.nn.functional.silu(gate) * up) @ wd
        return x

    for size in sizes:  # warm-up outside capture, as vLLM does
        forward(static[:size])
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    pool, graphs = torch.cuda.graph_pool_handle(), []
    for size in sorted(sizes, reverse=True):  # vLLM captures the largest first
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            forward(static[:size])
        graphs.append(graph)
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    return int(free_before - free_after)


def measure(torch: Any, rows: list[Row], cases: list[Windows]) -> list[Row]:
    free, total = torch.cuda.mem_get_info()
    outside = total - free - torch.cuda.memory_reserved()
    replays = measure_replays(torch, cases)
    cublas = measure_cublas(torch)
    graphs = {}
    for alias in DEFAULTS:
        _, settings, config = graph_prediction(alias, "0.33.0")
        graphs[alias] = measure_graphs(torch, settings.cudagraph_capture_sizes, config)
        torch.cuda.empty_cache()
    measured: dict[tuple[str, str], float] = {
        ("device", "total bytes"): torch.cuda.get_device_properties(0).total_memory,
        ("device", "outside torch before any allocation"): outside,
        ("cuBLAS", "default stream: allocated"): cublas["default_allocated"],
        ("cuBLAS", "new stream: reserved"): cublas["new_stream_reserved"],
    }
    for label, result in replays.items():
        measured[(label, "load: reserved")] = result["load"]["reserved"]
        measured[(label, "load: allocated")] = result["load"]["allocated"]
        measured[(label, "load: segments (cudaMalloc)")] = result["load"]["mallocs"]
        measured[(label, "profile: retained free")] = result["profile"]["retained_free"]
        measured[(label, "profile: reserved at the end")] = result["profile"]["reserved"]
    for row in rows:
        if row.section == "CUDA graphs":
            alias = row.name.split("(")[1].split(" sizes")[0]
            measured[(row.section, row.name)] = graphs[alias]
    return [replace(r, measured=measured.get((r.section, r.name))) for r in rows]


# -- output ------------------------------------------------------------------------------------------------


def render(rows: list[Row], device: str) -> str:
    lines = [f"apron probe_allocator on {device}", ""]
    head = f"{'section':<44} {'quantity':<40} {'predicted':>16} {'measured':>16} {'difference':>14}"
    lines += [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.section[:44]:<44} {r.name[:40]:<40} {_fmt(r.predicted, r.unit):>16} "
            f"{_fmt(r.measured, r.unit):>16} {_fmt(r.difference, r.unit, signed=True):>14}"
        )
    return "\n".join(lines)


def _fmt(value: float | None, unit: str, signed: bool = False) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / MIB:{'+' if signed else ''},.2f} MiB"
    return f"{value:{'+' if signed else ''},.0f}"


def cases_for(models: tuple[str, ...]) -> list[Windows]:
    return [windows(m, g, r) for m in models for g in DEFAULTS for r in RELEASES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--predicted-only", action="store_true", help="no GPU: print the predicted side only")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args(argv)
    started = time.monotonic()
    cases = cases_for(tuple(args.models))
    torch = None
    device = "no GPU (predicted only)"
    if not args.predicted_only:
        import torch  # noqa: F811 - the measured side only

        if not torch.cuda.is_available():
            print("no CUDA device: run with --predicted-only, or on a machine with a GPU", file=sys.stderr)
            return 2
        device = torch.cuda.get_device_name(0)
    rows = predicted_rows(None if torch is None else device, cases)
    if torch is not None:
        rows = measure(torch, rows, cases)
    print(render(rows, device))
    print(f"\n{time.monotonic() - started:.1f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "difference": r.difference} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
