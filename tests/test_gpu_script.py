"""scripts/gpu/probe_allocator.py without a GPU: it imports (torch only on the measured side), and its
predicted side is the planner's own numbers - the same retained segments, load-window slack and cuBLAS
workspace `apron plan` puts in its details for the same model, GPU and release."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from apron.checkpoint import load_checkpoint
from apron.hardware import resolve_gpu
from apron.plan import graphs as graph_terms
from apron.plan import overheads
from apron.plan.allocator import load_block_bytes
from apron.plan.planner import plan_checkpoint
from apron.plan.settings import UserSettings

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu" / "probe_allocator.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("probe_allocator", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["probe_allocator"] = module
    had_torch = "torch" in sys.modules
    spec.loader.exec_module(module)
    assert had_torch or "torch" not in sys.modules  # torch is the measured side's, imported in main()
    return module


def component(plan, term: str, name: str) -> int:
    return next(c["num_bytes"] for c in plan.details[term] if c["name"] == name)


@pytest.mark.parametrize("model", ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "openai/gpt-oss-20b"])
@pytest.mark.parametrize("gpu", ["RTX 4090", "H100"])
@pytest.mark.parametrize("release", ["0.29.0", "0.33.0"])
def test_predicted_side_is_the_planners(script, model, gpu, release, apron_home_with_facts):
    case = script.windows(model, gpu, release)
    load, profile = script.predicted_replays([case])[case.label]
    plan = plan_checkpoint(load_checkpoint(model), resolve_gpu(gpu), UserSettings(), release)
    assert profile.retained_free_bytes == component(plan, "non_torch", "retained allocator segments")
    # the load window's slack as the plan counts it: reserved less the parameters' blocks and the buffers
    params = [e.num_bytes for e in case.load if e.op == "alloc" and e.tag.startswith("param")]
    others = [e.num_bytes for e in case.load if e.op == "alloc" and not e.tag.startswith("param")]
    slack = load.final.reserved_bytes - sum(load_block_bytes(n) for n in params) - sum(others)
    assert max(slack, 0) == component(plan, "non_torch", "load-window allocator slack")
    if release == "0.29.0":
        assert component(plan, "non_torch", "cuBLAS workspace (default stream)") == (
            overheads.cublas_workspace(resolve_gpu(gpu).compute_capability).num_bytes
        )


def test_predicted_only_run_prints_one_table_and_writes_the_rows(script, tmp_path, capsys, apron_home_with_facts):
    out = tmp_path / "rows.json"
    assert script.main(["--predicted-only", "--json", str(out), "--models", "Qwen/Qwen3-0.6B"]) == 0
    printed = capsys.readouterr().out
    assert "predicted" in printed and "measured" in printed and "difference" in printed
    rows = json.loads(out.read_text())
    assert {r["section"] for r in rows} >= {"device", "cuBLAS", "CUDA graphs"}
    assert all(r["measured"] is None and r["difference"] is None for r in rows)
    graphs = next(r for r in rows if r["section"] == "CUDA graphs")
    predicted, settings, config = script.graph_prediction("RTX 4090", "0.33.0")
    assert (
        graphs["predicted"]
        == predicted
        == int(
            graph_terms.CUDAGRAPH_BASE_BYTES
            + graph_terms.CUDAGRAPH_PER_LAYER_GRAPH_BYTES * config.num_layers * len(settings.cudagraph_capture_sizes)
        )
    )
