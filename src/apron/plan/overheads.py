"""Memory vLLM charges to the request besides weights and the activation peak.

"non-torch" here is what the engine's summary line calls consumed memory minus the weights: the
driver-level free-memory drop from the start-up snapshot to the end of profiling. It holds
persistent buffers made after the snapshot (sampler penalty state, MoE workspaces), lazily loaded
kernels and library workspaces, and allocator segments that empty_cache() cannot release.
The CUDA-graph term is vLLM's own estimate (profile_cudagraph_memory), which it subtracts.
"""

from __future__ import annotations

from dataclasses import dataclass

from apron.engine.facts import EngineFacts
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings
from apron.plan.weights import DTYPE_BYTES, pad_to

GIB = 2**30
# Median of (consumed - weights - penalty state - MoE workspace) over the 12 dense-attention
# training boots (tests/fixtures/boots-training.json; range 0.07-0.17 GiB): kernel modules, cuBLAS
# handles and small runner buffers that the source does not size. Observed, not derived.
BASE_NON_TORCH_BYTES = int(0.12 * GIB)
# CUDA-graph estimate: least-squares fit of a + b * layers * graphs / 86 over the same 12 boots
# (RMS residual 0.019 GiB). Dense attention only; MoE and Mamba boots missed it by 0.2-0.4 GiB.
CUDAGRAPH_BASE_BYTES = int(0.0143 * GIB)
CUDAGRAPH_PER_LAYER_GRAPH_BYTES = 0.0123 * GIB / 86
# Memory in use before vLLM's start-up snapshot at TP=1 (CUDA context): total - initial free on the
# RTX 4090 training boots. Not charged to the request, but it must fit beside it.
PRE_SNAPSHOT_BYTES = 418_759_311


@dataclass(frozen=True)
class Component:
    name: str
    num_bytes: int
    label: str  # derived | predicted
    basis: str


@dataclass(frozen=True)
class Overhead:
    components: tuple[Component, ...]

    @property
    def num_bytes(self) -> int:
        return sum(c.num_bytes for c in self.components)

    @property
    def label(self) -> str:
        return "predicted"

    @property
    def basis(self) -> str:
        return "; ".join(f"{c.name} {c.num_bytes / GIB:.2f} GiB ({c.basis})" for c in self.components)


def non_torch(
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    *,
    is_tied: bool,
    is_quantized: bool,
    moe_workspace_bytes: int,
) -> Overhead:
    seqs, vocab = settings.max_num_seqs, config.vocab_size
    parts = [
        Component(
            "sampler penalty state",
            4 * seqs * vocab + 4 * seqs * -(-vocab // 32),
            "derived",
            "gpu/sample/penalties.py: int32 [max_num_seqs, vocab] counts and bit mask",
        )
    ]
    if moe_workspace_bytes:
        parts.append(
            Component(
                "MoE workspace",
                moe_workspace_bytes,
                "derived",
                "fused_moe modular kernel workspace13 + workspace2 over max_num_batched_tokens",
            )
        )
    parts.append(
        Component(
            "kernels, handles, small buffers",
            BASE_NON_TORCH_BYTES,
            "predicted",
            "median observed on 12 dense training boots",
        )
    )
    pin = pinned_table_bytes(
        config, settings, facts, is_tied=is_tied, is_quantized=is_quantized, moe_workspace_bytes=moe_workspace_bytes
    )
    if pin:
        parts.append(pin)
    return Overhead(tuple(parts))


def pinned_table_bytes(
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    *,
    is_tied: bool,
    is_quantized: bool,
    moe_workspace_bytes: int,
) -> Component | None:
    """Before 0.31 nothing limits block splitting around profile_run; a persistent allocation made
    there can land in the freed random copy of the embedding table and pin it past empty_cache()
    (0.31 added _scoped_allocator_max_split(20) around profile_run for exactly this). Seen in the
    training boots of tied unquantized models (4 of 5; not gemma-2) and of gpt-oss (its MoE
    workspace). Observed, not derived: the allocator's choice of block cannot be read statically;
    the Gemma family (gemma-2, two boots) kept no such block, so it is left out."""
    if facts.at_least("0.31.0") or settings.enforce_eager or settings.tensor_parallel_size > 1:
        return None
    tied_pin = is_tied and not is_quantized and not config.text_model_type.startswith("gemma")
    if not (tied_pin or moe_workspace_bytes):
        return None
    table = pad_to(config.vocab_size, 64) * config.hidden_size * DTYPE_BYTES[settings.dtype]
    extra = max(table - moe_workspace_bytes, 0)
    return Component(
        "pinned embedding-table copy",
        extra,
        "predicted",
        "vLLM < 0.31 can keep the freed compile-time copy of the embedding table reserved; "
        "seen on Qwen3/Mamba tied-embedding boots and a gpt-oss boot, not on gemma-2",
    )


def cudagraph_estimate(config: ModelConfig, settings: EngineSettings) -> Component:
    if not settings.uses_cudagraphs:
        return Component("CUDA graphs", 0, "derived", "eager mode captures no graphs")
    piecewise, full = graph_counts(settings)
    layers = config.num_layers
    size = int(CUDAGRAPH_BASE_BYTES + CUDAGRAPH_PER_LAYER_GRAPH_BYTES * layers * (piecewise + full))
    return Component(
        "CUDA graphs",
        size,
        "predicted",
        f"{piecewise} piecewise + {full} full graphs over {layers} layers at ~0.15 MiB per "
        "layer and graph (fit on dense-attention boots; MoE and Mamba boots differed by up to 0.4 GiB)",
    )


def graph_counts(settings: EngineSettings) -> tuple[int, int]:
    """FULL_AND_PIECEWISE (the O2 default): one piecewise graph per capture size and one full graph
    per size up to max_num_seqs (decode batches; v1/cudagraph_dispatcher.py)."""
    sizes = settings.cudagraph_capture_sizes
    return len(sizes), sum(1 for s in sizes if s <= settings.max_num_seqs)


def moe_workspace_bytes(config: ModelConfig, settings: EngineSettings, *, mxfp4_padding: tuple[int, int] | None) -> int:
    """Persistent workspace the modular fused-MoE kernel takes from the workspace manager on its first
    call (get_simultaneous): max(ws13, output) + ws2, in the activation dtype, M = max_num_batched_tokens.
    Marlin experts (MXFP4 below Hopper): ws13 (M*topk, max(N, K)), ws2 (M*topk*max(2N, K)).
    Triton experts: ws13 (M, topk, max(N, K)), ws2 (M, topk, max(N, K)) with N the per-rank w13 width."""
    if not config.is_moe:
        return 0
    tokens, topk = settings.max_num_batched_tokens, max(config.num_experts_per_tok, 1)
    dsz = DTYPE_BYTES[settings.dtype]
    if mxfp4_padding is not None:
        inter, hidden = mxfp4_padding
        ws13 = tokens * topk * max(inter, hidden)
        ws2 = tokens * topk * max(2 * inter, hidden)
    else:
        inter = 2 * config.moe_intermediate_size // settings.tensor_parallel_size
        hidden = config.hidden_size
        ws13 = tokens * topk * max(inter, hidden)
        ws2 = tokens * topk * max(inter, hidden)
    output = tokens * hidden
    return (max(ws13, output) + ws2) * dsz
