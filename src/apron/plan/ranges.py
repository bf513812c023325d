"""How sure the plan is: the stated range of every predicted term of the KV budget.

A term's range comes from its components (docs/memory.md section 7):
- a **derived** component (shapes read from the release's source) is exact; the term it belongs to
  carries half of the log's 0.01 GiB step on each side (vLLM prints every figure through
  utils/mem_utils.py format_gib, so no derivation was ever checked finer than that);
- an **observed** component (a constant only boots support) carries the spread of its observations:
  the leave-one-out error on the training boots it was observed on (tests/test_ranges.py recomputes
  every figure below from tests/fixtures/boots-training.json);
- a component **carried** to a GPU class or a layer family it was never observed on says so in its
  basis and gets a wider range by one rule (`carried`): twice its observed spread, widened by a
  quarter of its value on the side that favours the KV cache and half of it on the side that costs it.
  An observation of a single boot is carried as well; with two, the spread is their whole difference.

The budget subtracts every term, so the low end of the KV budget takes each term's high end.
"""

from __future__ import annotations

from apron.frozen import frozen

GIB = 2**30
# Half of format_gib's 0.01 GiB step (utils/mem_utils.py): the resolution a derived term was checked at.
RESOLUTION_BYTES = int(0.005 * GIB)

# Compute-capability classes the training boots ran on, named as a plan names them.
GPU_CLASSES = {
    (8, 0): "sm80 (A100 class)",
    (8, 6): "sm86 (Ampere workstation and consumer)",
    (8, 7): "sm87 (Jetson Orin)",
    (8, 9): "sm89 (Ada)",
    (9, 0): "sm90 (Hopper)",
    (10, 0): "sm100 (datacenter Blackwell)",
    (10, 3): "sm103 (Blackwell Ultra)",
    (11, 0): "sm110 (Thor)",
    (12, 0): "sm120 (consumer Blackwell)",
    (12, 1): "sm121 (DGX Spark)",
}


def gpu_class(capability: tuple[int, int]) -> str:
    return GPU_CLASSES.get(capability, f"sm{capability[0]}{capability[1]}")


@frozen
class Observation:
    """A constant only boots support: where it was seen, how far each boot strays from the rest
    (as a fraction of the component's value)."""

    key: str
    capabilities: frozenset[tuple[int, int]]  # the GPUs of the boots it rests on
    traits: frozenset[str]  # the layer kinds of those boots (layer_traits)
    num_boots: int
    below_fraction: float  # leave-one-out: the most a boot fell below the value the others give
    above_fraction: float  # ... and rose above it
    settle: str  # the measurement that would settle it


@frozen
class Spread:
    low_bytes: int
    high_bytes: int
    note: str


# One boot gives no leave-one-out spread at all: the observation is carried. With two, each boot is
# predicted from the other, so the spread is their whole difference.
MIN_BOOTS_FOR_SPREAD = 2
# The carrying rule's widening, on top of twice the observed spread: a quarter of the value on the side
# that favours the KV cache, half of it on the side that costs it.
CARRIED_BELOW_FRACTION = 0.25
CARRIED_ABOVE_FRACTION = 0.5


def observed_range(
    observations: Observation | tuple[Observation, ...],
    value_bytes: int,
    capability: tuple[int, int],
    traits: frozenset[str],
) -> Spread:
    """The component's range where the plan's GPU and layer kinds are among the observations (one
    per GPU class where the constant was observed on several); `carried` from the first where they
    are not."""
    group = observations if isinstance(observations, tuple) else (observations,)
    obs = next((o for o in group if capability in o.capabilities), group[0])
    where = []
    if obs.num_boots < MIN_BOOTS_FOR_SPREAD:
        where.append(f"observed on only {obs.num_boots} boots")
    if capability not in obs.capabilities:
        where.append(f"never observed on {gpu_class(capability)}")
    unseen = sorted(traits - obs.traits)
    if unseen:
        where.append(f"never observed with {', '.join(unseen)} layers")
    if not where:
        return Spread(
            max(int(value_bytes * (1 - obs.below_fraction)), 0),
            int(value_bytes * (1 + obs.above_fraction)),
            f"observed on {obs.num_boots} boots, leave-one-out spread "
            f"-{100 * obs.below_fraction:.0f}%/+{100 * obs.above_fraction:.0f}%",
        )
    return carried(obs, value_bytes, " and ".join(where))


def carried(obs: Observation, value_bytes: int, why: str) -> Spread:
    """The carrying rule: twice the observed spread, widened by a quarter of the value below and half
    of it above."""
    below = 2 * obs.below_fraction + CARRIED_BELOW_FRACTION
    above = 2 * obs.above_fraction + CARRIED_ABOVE_FRACTION
    return Spread(
        max(int(value_bytes * (1 - below)), 0),
        int(value_bytes * (1 + above)),
        f"{why}: carried from {obs.num_boots} boots, range -{100 * min(below, 1):.0f}%/+{100 * above:.0f}% "
        f"(twice the spread, plus a quarter below and half above); {obs.settle}",
    )


def layer_traits(
    *, is_moe: bool, is_mla: bool, has_state: bool, has_sliding: bool, is_attention_free: bool = False
) -> frozenset[str]:
    """The layer kinds an observation is kept per: what changes the kernels a layer runs."""
    traits = set()
    if is_moe:
        traits.add("MoE")
    if not is_attention_free:
        traits.add("MLA" if is_mla else "attention")
    if has_state:
        traits.add("state-space")
    if has_sliding:
        traits.add("sliding-window")
    return frozenset(traits)


# What the training boots cover (tests/fixtures/boots-training.json): the 17 consumer boots (cc 8.6 and
# 8.9) and the two H100 boots; an observed constant names the set it was read on.
CONSUMER_CAPABILITIES = frozenset({(8, 6), (8, 9)})
CONSUMER_TRAITS = frozenset({"attention", "sliding-window", "MoE", "state-space"})
HOPPER_CAPABILITIES = frozenset({(9, 0)})
HOPPER_TRAITS = frozenset({"attention", "sliding-window", "MoE"})


# The compile transient's two [T, H] outputs (plan/activation.py compile_transient): the peak of every
# training boot it sets, to vLLM's 0.01 GiB.
COMPILE_OUTPUTS = Observation(
    "compile transient's outputs",
    capabilities=CONSUMER_CAPABILITIES | HOPPER_CAPABILITIES,
    traits=CONSUMER_TRAITS,
    num_boots=19,
    below_fraction=0.01,
    above_fraction=0.01,
    settle="an allocator history of the cold compile (apron probe on a GPU) would settle it",
)
# Weights where Apron reads every tensor's layout: the largest under- and over-count of the 18 training
# boots (tests/test_ranges.py) are absolute, not relative (allocator rounding and small tensors): the
# plan is at most 33 MiB short (gpt-oss-20b) and 5 MiB over (Qwen3-32B); a relative 0.03% (gpt-oss-120b's
# miss on 61 GiB) scales the bound with larger checkpoints.
WEIGHTS_BELOW_BYTES = 5 * 2**20
WEIGHTS_ABOVE_BYTES = 33 * 2**20
WEIGHTS_RELATIVE_FRACTION = 0.0003
# Quantized layouts whose load-time re-layout is not read (scales expanded, repacked tiles): the
# largest such miss on the training boots, Qwen3-0.6B-FP8 at 3.1% once Marlin's expanded scales were
# read (one boot; its repack's allocator blocks, plan/weights_repack.py, now close it to 0.1%). Block
# FP8 keeps the bound: on cc 9.0 DeepGEMM / CUTLASS keep the loaded tensors as read, and the miss an
# H100 boot shows there is counted as observed (plan/weights_observed.py), its cause not found.
UNREAD_LAYOUT_ABOVE_FRACTION = 0.035
READ_QUANT_LAYOUTS = frozenset({None, "mxfp4", "gpt_oss_mxfp4", "gptq", "awq"})


def weights_spread(num_bytes: int, quant_method: str | None, unknown_tensors: int, observed_bytes: int = 0) -> Spread:
    """OBSERVED_BYTES: the part counted from an observation alone (plan/weights_observed.py); the low end
    lets it be absent, the high end lets it be as large as its one boot allows."""
    relative = int(num_bytes * WEIGHTS_RELATIVE_FRACTION)
    below, above = WEIGHTS_BELOW_BYTES + relative, WEIGHTS_ABOVE_BYTES + relative
    note = "observed: -5/+33 MiB and 0.03%, the largest misses of the 18 training boots whose layouts are read"
    if quant_method not in READ_QUANT_LAYOUTS or unknown_tensors:
        above = max(above, int(num_bytes * UNREAD_LAYOUT_ABOVE_FRACTION))
        what = f"{quant_method} layout" if quant_method not in READ_QUANT_LAYOUTS else "tensors of unread layout"
        note = (
            f"{what} not read at load time: up to +3.5% (observed: Qwen3-0.6B-FP8's 3.1% miss); reading the "
            "release's process_weights_after_loading for it would settle it"
        )
        if quant_method == "fp8":
            note = (
                "block FP8 read (Marlin's scales and repack below cc 9.0; DeepGEMM / CUTLASS on cc 9.0 keep "
                "the loaded tensors), still up to +3.5% (observed: Qwen3-0.6B-FP8's 3.1% miss before Marlin's "
                "repack blocks were read)"
            )
    if observed_bytes:
        below += observed_bytes
        above += RESOLUTION_BYTES  # as large as the one boot's log allows
        note += f"; the low end without the {observed_bytes / 2**20:.1f} MiB observed residual, which one boot supports"
    return Spread(max(num_bytes - below, 0), num_bytes + above, note)


def peak_spread(moments: tuple[tuple[str, int], ...], capability: tuple[int, int], traits: frozenset[str]) -> Spread:
    """The largest moment's range: the compile transient's observed spread, derived moments exact."""
    lows, highs, notes = [], [], []
    for name, size in moments:
        if name == "compile transient":
            spread = observed_range(COMPILE_OUTPUTS, size, capability, traits)
            lows.append(spread.low_bytes)
            highs.append(spread.high_bytes)
            notes.append(f"compile transient: {spread.note}")
        else:
            lows.append(size)
            highs.append(size)
    return Spread(max(lows, default=0), max(highs, default=0), "; ".join(notes) or "derived moments")
