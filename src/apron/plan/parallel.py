"""Every check vLLM runs on a parallel layout, as proven constraints with the line that enforces them.

A tensor-parallel degree must pass the model config's validation (config/model.py
verify_with_parallel_config, called from VllmConfig.__post_init__) and then the construction of every
layer, which splits heads, vocabulary and feature dimensions with distributed/utils.py divide() (an
assert) or asserts of its own. A degree that fails any of them never boots, whatever the memory. Each
check below names what it reads, the stage, and its sources (file relative to `vllm/`, the exact line
of code, and that line in every release Apron ships facts for: LINES, written by
scripts/parallel_sources.py from the unpacked wheels).

What the checks read comes from the config and the checkpoint's headers (ParallelShape), never from
the memory plan. Apron plans tensor parallelism only (`--tp`); the pipeline- and expert-parallel checks
are listed for a layout that sets them (Layout), and a plan's layout never does.

Read and left out, because they never refuse a degree: expert parallelism splits experts unevenly
(fused_moe/expert_map_manager.py determine_expert_map gives the remainder to the first ranks); GPTQ/AWQ
MoE layers that Marlin cannot take fall back to the WNA16 kernels, and dense GPTQ/AWQ layers whose
quantization group straddles a shard are refused by Marlin but taken by other kernels on some
settings (kernels/linear/__init__.py choose_mp_linear_kernel): kernel-dependent, not modelled here;
merged column layers (QKV, gate/up) with block-FP8 partitions off the block are allowed
(linear.py _maybe_allow_fp8_block_shape_mismatch); vision towers that fall back to data parallelism
when their heads do not divide (models/vision.py is_vit_use_data_parallel(num_heads)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache, lru_cache

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts, version_key
from apron.frozen import field, frozen
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Problem, ProblemKind

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# Degrees a plan's refusal lists as passing, and the test walks: machines are rented with up to 8 GPUs.
MAX_LISTED_TP = 8


@frozen
class Source:
    file: str  # relative to the vllm/ package
    anchor: str  # the line of code, exactly (stripped of indentation)
    occurrence: int = 0  # which of the file's lines holding the anchor


# The sources the checks cite; keys are what LINES is indexed by.
SOURCES: dict[str, Source] = {
    "heads": Source("config/model.py", "if total_num_attention_heads % tensor_parallel_size != 0:"),
    "pipeline": Source("config/model.py", "if pipeline_parallel_size > 1 and not self.registry.is_pp_supported_model("),
    "expert_parallel": Source("config/model.py", "def _verify_with_expert_parallelism"),
    "vocab": Source(
        "model_executor/layers/vocab_parallel_embedding.py",
        "per_partition_vocab_size = divide(global_vocab_size, world_size)",
    ),
    "qkv_heads": Source("model_executor/layers/linear.py", "self.num_heads = divide(self.total_num_heads, tp_size)"),
    "kv_split": Source(
        "model_executor/layers/linear.py", "self.num_kv_heads = divide(self.total_num_kv_heads, tp_size)"
    ),
    "kv_replicate": Source(
        "model_executor/layers/linear.py", "self.num_kv_head_replicas = divide(tp_size, self.total_num_kv_heads)"
    ),
    "column": Source(
        "model_executor/layers/linear.py", "self.output_size_per_partition = divide(output_size, self.tp_size)"
    ),
    "merged_column": Source(
        "model_executor/layers/linear.py",
        "assert all(output_size % self.tp_size == 0 for output_size in output_sizes)",
    ),
    "row": Source(
        "model_executor/layers/linear.py", "self.input_size_per_partition = divide(input_size, self.tp_size)"
    ),
    "moe": Source("model_executor/layers/fused_moe/config.py", "assert self.intermediate_size % tp_size == 0"),
    "gdn_heads": Source(
        "model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py", "divide(self.num_v_heads, self.tp_size),"
    ),
    "mamba2_heads": Source("model_executor/layers/mamba/mamba_mixer2.py", "assert num_heads % self.tp_size == 0"),
    "mamba2_groups": Source(
        "model_executor/layers/mamba/mamba_mixer2.py", "assert (n_groups % self.tp_size) == 0 or n_groups == 1"
    ),
    "fp8_row": Source(
        "model_executor/layers/quantization/utils/fp8_utils.py", "and input_size_per_partition % block_k != 0"
    ),
    "fp8_column": Source(
        "model_executor/layers/quantization/utils/fp8_utils.py", "if output_partition_size % block_n != 0:"
    ),
    "fp8_moe_refine": Source(
        "model_executor/layers/fused_moe/oracle/fp8.py", "refine = math.gcd(block_n, block_k, ispp, config.hidden_dim)"
    ),
    "fp8_moe_check": Source("model_executor/layers/quantization/fp8.py", "if self.weight_scale_refine is None:"),
    "vision_heads": Source(
        "model_executor/models/qwen2_5_vl.py", "self.num_attention_heads_per_partition = dist_utils.divide("
    ),
}

# scripts/parallel_sources.py over the unpacked wheels of each release (its --check keeps this in step).
LINES: dict[str, dict[str, int | None]] = {
    "column": {"0.29.0": 485, "0.30.0": 490, "0.31.0": 494, "0.32.0": 494, "0.33.0": 497},
    "expert_parallel": {"0.29.0": 1360, "0.30.0": 1373, "0.31.0": 1451, "0.32.0": 1485, "0.33.0": 1498},
    "fp8_column": {"0.29.0": 1240, "0.30.0": 1252, "0.31.0": 1255, "0.32.0": 1339, "0.33.0": 1339},
    "fp8_moe_check": {"0.29.0": 567, "0.30.0": 583, "0.31.0": 549, "0.32.0": 549, "0.33.0": 554},
    "fp8_moe_refine": {"0.29.0": 299, "0.30.0": 299, "0.31.0": 311, "0.32.0": 314, "0.33.0": 318},
    "fp8_row": {"0.29.0": 1223, "0.30.0": 1235, "0.31.0": 1238, "0.32.0": 1322, "0.33.0": 1322},
    "gdn_heads": {"0.29.0": 463, "0.30.0": 472, "0.31.0": 475, "0.32.0": 557, "0.33.0": 651},
    "heads": {"0.29.0": 1413, "0.30.0": 1426, "0.31.0": 1504, "0.32.0": 1546, "0.33.0": 1559},
    "kv_replicate": {"0.29.0": 1045, "0.30.0": 1051, "0.31.0": 1055, "0.32.0": 1055, "0.33.0": 1068},
    "kv_split": {"0.29.0": 1047, "0.30.0": 1053, "0.31.0": 1057, "0.32.0": 1057, "0.33.0": 1070},
    "mamba2_groups": {"0.29.0": 293, "0.30.0": 309, "0.31.0": 307, "0.32.0": 319, "0.33.0": 320},
    "mamba2_heads": {"0.29.0": 289, "0.30.0": 305, "0.31.0": 303, "0.32.0": 315, "0.33.0": 316},
    "merged_column": {"0.29.0": 707, "0.30.0": 713, "0.31.0": 718, "0.32.0": 718, "0.33.0": 731},
    "moe": {"0.29.0": 1349, "0.30.0": 1350, "0.31.0": 1322, "0.32.0": 1341, "0.33.0": 1352},
    "pipeline": {"0.29.0": 1424, "0.30.0": 1437, "0.31.0": 1515, "0.32.0": 1557, "0.33.0": 1570},
    "qkv_heads": {"0.29.0": 1042, "0.30.0": 1048, "0.31.0": 1052, "0.32.0": 1052, "0.33.0": 1065},
    "row": {"0.29.0": 1670, "0.30.0": 1676, "0.31.0": 1681, "0.32.0": 1681, "0.33.0": 1708},
    "vision_heads": {"0.29.0": 369, "0.30.0": 370, "0.31.0": 374, "0.32.0": 374, "0.33.0": 374},
    "vocab": {"0.29.0": 104, "0.30.0": 110, "0.31.0": 110, "0.32.0": 111, "0.33.0": 111},
}


@cache  # every plan cites every check (parallel_details): a few dozen (key, release) pairs in all
def cite(key: str, version: str) -> str:
    """`file.py 0.33.0:1070`; for a release the table does not hold, the nearest older one it does."""
    source, lines = SOURCES[key], LINES[key]
    known = sorted((v for v, line in lines.items() if line is not None), key=version_key)
    older = [v for v in known if version_key(v) <= version_key(version)]
    pick = version if version in known else (older[-1] if older else known[0])
    return f"{source.file} {pick}:{lines[pick]}"


@frozen
class Layout:
    tensor_parallel_size: int
    pipeline_parallel_size: int = 1
    is_expert_parallel: bool = False


@frozen
class ParallelShape:
    """What the checks read, from the config and the checkpoint's headers; 0 / None / () where the
    model builds no such layer."""

    num_heads: int = 0
    qkv_kv_heads: tuple[int, ...] = ()  # KV heads of each kind of QKVParallelLinear the model builds
    padded_vocab: int = 0  # vocab_size padded to the release's padding (64)
    vocab_padding: int = 64
    mlp_intermediate: int = 0  # a dense MLP's (or Mamba mixer's) intermediate size, split by the MLP's linears
    moe_intermediate: int = 0  # each routed expert's intermediate size (FusedMoE)
    shared_intermediate: int = 0  # a shared expert's MLP, built as its own parallel linears
    hidden_size: int = 0
    fp8_block: tuple[int, int] | None = None  # weight_block_size [n, k] of a block-FP8 checkpoint
    fp8_row_inputs: tuple[tuple[str, int], ...] = ()  # block-FP8 row-parallel layers: (name, input features)
    fp8_column_outputs: tuple[tuple[str, int], ...] = ()  # block-FP8 single-output column layers: (name, outputs)
    is_fp8_moe: bool = False
    gdn: tuple[int, int, int] | None = None  # gated delta net: (value heads, key dim, value dim)
    mamba2: tuple[int, int] | None = None  # Mamba-2 mixer: (heads, groups)
    vision: tuple[int, int, int] | None = None  # a tensor-parallel vision tower: (heads, MLP width, merger width)
    is_moe: bool = False
    supports_pp: bool | None = None
    notes: tuple[str, ...] = field(default=())


@frozen
class Check:
    name: str
    kind: ProblemKind
    stage: str  # "config validation" | "model construction"
    what: str
    sources: tuple[str, ...]  # keys of SOURCES
    failure: Callable[[ParallelShape, Layout], str | None]  # what fails, in words, or None

    def to_json(self, version: str) -> dict[str, Any]:
        return {"check": self.name, "stage": self.stage, "what": self.what, "sources": self.cite(version)}

    def cite(self, version: str) -> list[str]:
        return [cite(key, version) for key in self.sources]


def _indivisible(what: str, size: int, tp: int) -> str | None:
    return None if not size or size % tp == 0 else f"{what} {size:,} is not divisible by {tp}"


def _heads(shape: ParallelShape, layout: Layout) -> str | None:
    tp = layout.tensor_parallel_size
    if shape.num_heads % tp == 0:
        return None
    return f"Total number of attention heads ({shape.num_heads}) must be divisible by tensor parallel size ({tp})"


def _pipeline(shape: ParallelShape, layout: Layout) -> str | None:
    if layout.pipeline_parallel_size == 1 or shape.supports_pp is not False:
        return None
    return "Pipeline parallelism is not supported for this model (it does not implement SupportsPP)"


def _expert_parallel(shape: ParallelShape, layout: Layout) -> str | None:
    if not layout.is_expert_parallel or shape.is_moe:
        return None
    return "expert parallelism needs a mixture-of-experts model"


def _vocab(shape: ParallelShape, layout: Layout) -> str | None:
    reason = _indivisible("the padded vocabulary", shape.padded_vocab, layout.tensor_parallel_size)
    return None if reason is None else f"{reason} (vocab_size padded to a multiple of {shape.vocab_padding})"


def _kv_heads(shape: ParallelShape, layout: Layout) -> str | None:
    tp = layout.tensor_parallel_size
    for kv in shape.qkv_kv_heads:
        if tp >= kv and tp % kv:
            return f"{kv} KV heads cannot be replicated evenly over {tp} GPUs ({tp} is not a multiple of {kv})"
        if tp < kv and kv % tp:
            return f"{kv} KV heads cannot be split over {tp} GPUs ({kv} is not divisible by {tp})"
    return None


def _linear_attention(shape: ParallelShape, layout: Layout) -> str | None:
    if shape.gdn is None:
        return None
    v_heads, key_dim, value_dim = shape.gdn
    tp = layout.tensor_parallel_size
    return (
        _indivisible("the gated delta net's value heads", v_heads, tp)
        or _indivisible("its key projection width", key_dim, tp)
        or _indivisible("its value projection width", value_dim, tp)
    )


def _mamba(shape: ParallelShape, layout: Layout) -> str | None:
    if shape.mamba2 is None:
        return None
    heads, groups = shape.mamba2
    tp = layout.tensor_parallel_size
    if heads % tp:
        return f"the Mamba-2 mixer's {heads} heads are not divisible by {tp}"
    if groups % tp and groups != 1:
        return f"the Mamba-2 mixer's {groups} groups are neither divisible by {tp} nor 1"
    return None


def _mlp(shape: ParallelShape, layout: Layout) -> str | None:
    tp = layout.tensor_parallel_size
    return _indivisible("intermediate_size", shape.mlp_intermediate, tp) or _indivisible(
        "the shared expert's intermediate size", shape.shared_intermediate, tp
    )


def _moe(shape: ParallelShape, layout: Layout) -> str | None:
    # Under expert parallelism the experts are not split by TP (moe_parallel_config.tp_size is 1).
    if layout.is_expert_parallel:
        return None
    return _indivisible("each expert's intermediate size", shape.moe_intermediate, layout.tensor_parallel_size)


def _fp8_linear(shape: ParallelShape, layout: Layout) -> str | None:
    tp = layout.tensor_parallel_size
    if shape.fp8_block is None or tp == 1:
        return None
    block_n, block_k = shape.fp8_block
    for name, inputs in shape.fp8_row_inputs:
        if inputs % tp == 0 and (inputs // tp) % block_k:
            return (
                f"{name}: Weight input_size_per_partition = {inputs // tp} is not divisible by "
                f"weight quantization block_k = {block_k}"
            )
    for name, outputs in shape.fp8_column_outputs:
        if outputs % tp == 0 and (outputs // tp) % block_n:
            return (
                f"{name}: Weight output_partition_size = {outputs // tp} is not divisible by "
                f"weight quantization block_n = {block_n}"
            )
    return None


def _fp8_moe(shape: ParallelShape, layout: Layout) -> str | None:
    """fused_moe/oracle/fp8.py refine_fp8_moe_block_shape: an expert shard off the checkpoint's blocks
    is refined to gcd(block_n, block_k, shard, hidden) when that is at least 32 (Triton kernels take
    it); otherwise Fp8MoEMethod.create_weights refuses."""
    tp = layout.tensor_parallel_size
    if not shape.is_fp8_moe or shape.fp8_block is None or layout.is_expert_parallel:
        return None
    if not shape.moe_intermediate or shape.moe_intermediate % tp:
        return None  # refused by the MoE split itself
    block_n, block_k = shape.fp8_block
    shard = shape.moe_intermediate // tp
    if shard % block_n == 0 and (tp == 1 or shard % block_k == 0):
        return None
    refine = math.gcd(block_n, block_k, shard, shape.hidden_size)
    if refine >= 32:
        return None
    side = f"block_n = {block_n}" if shard % block_n else f"block_k = {block_k}"
    return (
        f"each expert's shard of {shard} is not divisible by weight quantization {side}, and no finer "
        f"block of at least 32 divides it (gcd {refine})"
    )


def _vision(shape: ParallelShape, layout: Layout) -> str | None:
    if shape.vision is None:
        return None
    heads, width, merger = shape.vision
    tp = layout.tensor_parallel_size
    return (
        _indivisible("the vision tower's heads", heads, tp)
        or _indivisible("the vision tower's MLP width", width, tp)
        or _indivisible("the vision merger's width", merger, tp)
    )


_CONFIG, _BUILD = "config validation", "model construction"
# In the order vLLM meets them: the config first, then the layers as the model builds them.
CHECKS: tuple[Check, ...] = (
    Check("attention_heads", "tensor_parallel_heads", _CONFIG, "attention heads % TP", ("heads",), _heads),
    Check("pipeline", "pipeline_parallel", _CONFIG, "PP > 1 needs a SupportsPP model", ("pipeline",), _pipeline),
    Check("expert_parallel", "expert_parallel", _CONFIG, "EP needs experts", ("expert_parallel",), _expert_parallel),
    Check(
        "vision_tower",
        "tensor_parallel_vision",
        _BUILD,
        "vision heads, MLP and merger % TP",
        ("vision_heads", "column"),
        _vision,
    ),
    Check("vocabulary", "tensor_parallel_vocab", _BUILD, "padded vocabulary % TP", ("vocab",), _vocab),
    Check(
        "kv_heads",
        "tensor_parallel_kv_heads",
        _BUILD,
        "KV heads % TP when split, TP % KV heads when replicated (QKVParallelLinear)",
        ("kv_split", "kv_replicate"),
        _kv_heads,
    ),
    Check(
        "linear_attention",
        "tensor_parallel_linear_attention",
        _BUILD,
        "gated delta net value heads and projection widths % TP",
        ("gdn_heads", "merged_column"),
        _linear_attention,
    ),
    Check(
        "mamba",
        "tensor_parallel_linear_attention",
        _BUILD,
        "Mamba-2 heads % TP; groups % TP or one group",
        ("mamba2_heads", "mamba2_groups"),
        _mamba,
    ),
    Check(
        "mlp_intermediate",
        "tensor_parallel_intermediate",
        _BUILD,
        "dense MLP / mixer / shared expert intermediate size % TP",
        ("merged_column", "row", "column"),
        _mlp,
    ),
    Check("moe_intermediate", "tensor_parallel_intermediate", _BUILD, "expert intermediate size % TP", ("moe",), _moe),
    Check(
        "fp8_block_linear",
        "tensor_parallel_quant_block",
        _BUILD,
        "block-FP8 row-parallel input shard % block_k, single column output shard % block_n",
        ("fp8_row", "fp8_column"),
        _fp8_linear,
    ),
    Check(
        "fp8_block_moe",
        "tensor_parallel_quant_block",
        _BUILD,
        "block-FP8 expert shard % block, else a refined block >= 32",
        ("fp8_moe_refine", "fp8_moe_check"),
        _fp8_moe,
    ),
)


@frozen
class Failure:
    check: Check
    reason: str


def failures(shape: ParallelShape, layout: Layout) -> list[Failure]:
    return [Failure(check, reason) for check in CHECKS if (reason := check.failure(shape, layout)) is not None]


@lru_cache(maxsize=64)  # fit plans one shape at many sizes and asks for every plan
def passing_tensor_parallel_sizes(shape: ParallelShape, up_to: int = MAX_LISTED_TP) -> tuple[int, ...]:
    return tuple(tp for tp in range(1, up_to + 1) if not failures(shape, Layout(tp)))


def parallel_problems(shape: ParallelShape, layout: Layout, version: str) -> list[Problem]:
    """One proven-constraint problem per failing check, naming it, its source lines and the degrees
    (up to 8) that pass every check."""
    found = failures(shape, layout)
    if not found:
        return []
    passing = passing_tensor_parallel_sizes(shape)
    shown = ", ".join(map(str, passing)) if passing else "none up to 8"
    return [
        Problem(
            f.check.kind,
            f"vLLM {version} refuses --tensor-parallel-size {layout.tensor_parallel_size} at {f.check.stage} "
            f"(check {f.check.name}): {f.reason} ({'; '.join(f.check.cite(version))}). "
            f"Tensor-parallel sizes that pass every parallel check: {shown}",
            "proven_constraint",
        )
        for f in found
    ]


def parallel_details(shape: ParallelShape, layout: Layout, version: str) -> dict[str, Any]:
    """For `--json` and the correction rules: the degrees that pass, and every check with its source."""
    found = {f.check.name: f.reason for f in failures(shape, layout)}
    return {
        "passing_tensor_parallel_sizes": list(passing_tensor_parallel_sizes(shape)),
        "checks": [{**c.to_json(version), "failure": found.get(c.name)} for c in CHECKS],
    }


# --- the shape, from the config and the headers --------------------------------------------------

# Row-parallel linears (linear.py RowParallelLinear) and single-output column-parallel linears by
# module name; experts are the MoE check's, merged column layers are allowed off-block.
_ROW_MODULES = ("o_proj", "down_proj", "out_proj")
_COLUMN_MODULES = ("q_b_proj", "kv_b_proj")


def fp8_layers(checkpoint: Checkpoint) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
    """(row inputs, column outputs) of the checkpoint's FP8 weights in the modules above, one entry per
    distinct (module, size); read once per checkpoint."""
    cached = checkpoint.extra.get("_parallel_fp8_layers")
    if cached is None:
        rows: dict[tuple[str, int], None] = {}
        columns: dict[tuple[str, int], None] = {}
        for tensor in checkpoint.tensors:
            if not tensor.dtype.startswith("F8") or len(tensor.shape) != 2 or ".experts." in tensor.name:
                continue
            parts = tensor.name.rsplit(".", 2)
            if len(parts) != 3 or parts[2] != "weight":
                continue
            module = ("shared_expert." if "shared_expert" in parts[0] else "") + parts[1]
            if parts[1] in _ROW_MODULES:
                rows[(module, tensor.shape[1])] = None
            elif parts[1] in _COLUMN_MODULES:
                columns[(module, tensor.shape[0])] = None
        cached = (tuple(rows), tuple(columns))
        checkpoint.extra["_parallel_fp8_layers"] = cached
    return cached


def _fp8_block(config: ModelConfig) -> tuple[int, int] | None:
    q = config.quantization_config or {}
    block = q.get("weight_block_size")
    if config.quant_method != "fp8" or not isinstance(block, list) or len(block) != 2:
        return None
    return int(block[0]), int(block[1])


def _kv_heads_of(config: ModelConfig, is_attention_free: bool) -> tuple[int, ...]:
    """The QKVParallelLinear layers: standard attention (not MLA's projections, none when attention-free);
    Gemma-style global layers may have KV heads of their own."""
    if is_attention_free or config.is_mla or not config.num_heads:
        return ()
    heads = [config.num_kv_heads]
    global_kv = config.get("num_global_key_value_heads")
    if global_kv:
        heads.append(count(global_kv))
    return tuple(dict.fromkeys(heads))


def count(value: object) -> int:
    """A config's whole number as the checks read it; 0 for a value that is none (a list, text, a
    flag): config_schema already records it among the config's unknowns, so the plan says unknown
    rather than failing here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value)


def _gdn(config: ModelConfig) -> tuple[int, int, int] | None:
    v_heads = config.get("linear_num_value_heads")
    # Qwen3-Next lays out its delta-net layers by full_attention_interval, Qwen3.5 by layer_types.
    has_layers = "linear_attention" in (config.layer_types or []) or bool(config.get("full_attention_interval"))
    if not v_heads or not has_layers:
        return None
    k_heads = count(config.get("linear_num_key_heads"))
    key_dim = k_heads * count(config.get("linear_key_head_dim"))
    value_dim = count(v_heads) * count(config.get("linear_value_head_dim"))
    return count(v_heads), key_dim, value_dim


def _mamba2(config: ModelConfig) -> tuple[int, int] | None:
    heads, groups = config.get("mamba_num_heads"), config.get("n_groups")
    return (count(heads), count(groups)) if heads and groups else None


def _tower(config: ModelConfig, tower_family: str | None, is_tower_sharded: bool) -> tuple[int, int, int] | None:
    """The Qwen3-VL tower (models/qwen3_vl.py, used by the Qwen3-VL, Qwen3.5 and Qwen4-Exp models):
    Qwen2_5_VisionAttention divides its heads and its MLP and patch merger are column/row parallel,
    unless --mm-encoder-tp-mode data builds it with disable_tp. Other towers are not read here."""
    if tower_family != "qwen3_vl" or not is_tower_sharded:
        return None
    vision = config.vision
    hidden, merge = count(vision.get("hidden_size")), count(vision.get("spatial_merge_size")) or 2
    return count(vision.get("num_heads")), count(vision.get("intermediate_size")), hidden * merge * merge


def parallel_shape(
    checkpoint: Checkpoint,
    config: ModelConfig,
    facts: EngineFacts,
    *,
    tower_family: str | None,
    is_tower_sharded: bool,
) -> ParallelShape:
    entry = facts.architecture(checkpoint.architecture) or {}
    padding = int(facts.defaults.get("vocab_padding_size", 64))
    vocab = config.vocab_size
    dense = config.intermediate_size if not config.is_moe or count(config.get("first_k_dense_replace")) else 0
    block = _fp8_block(config)
    rows, columns = fp8_layers(checkpoint) if block else ((), ())
    return ParallelShape(
        num_heads=config.num_heads,
        qkv_kv_heads=_kv_heads_of(config, bool(entry.get("is_attention_free"))),
        padded_vocab=-(-vocab // padding) * padding if vocab else 0,
        vocab_padding=padding,
        mlp_intermediate=dense,
        moe_intermediate=config.moe_intermediate_size if config.is_moe else 0,
        shared_intermediate=count(config.get("shared_expert_intermediate_size")) if config.is_moe else 0,
        hidden_size=config.hidden_size,
        fp8_block=block,
        fp8_row_inputs=rows,
        fp8_column_outputs=columns,
        is_fp8_moe=block is not None and config.is_moe,
        gdn=_gdn(config),
        mamba2=_mamba2(config),
        vision=_tower(config, tower_family, is_tower_sharded),
        is_moe=config.is_moe,
        supports_pp=entry.get("supports_pp"),
    )
