"""What a GPU holds after loading that no source read explains: observed, counted, and labelled so.

One term so far. On compute capability 9.0 a block-FP8 checkpoint's "Model loading took" is above its
tensors: an H100 boot of Qwen3-0.6B-FP8 (issue 21, which does not name its release) read about 3.9%
above Apron's count of 763,623,424 B, that is the same 0.74 GiB its RTX 4090 boot logs
(tests/fixtures/boots-training.json), 29.5 MiB more (24.4-34.7 MiB at the log's 0.01 GiB step).
The Ada boot is derived (Marlin's expanded scales and repack blocks, plan/weights_repack.py); on
cc 9.0 block FP8 takes FlashInfer+DeepGEMM, DeepGEMM or CUTLASS (kernels/linear/__init__.py
0.30.0:454-466), which keep the loaded tensors (docs/memory.md section 5, "not found", for what was
read and ruled out). It is not a Hopper cost of every model: the bf16 Qwen3-32B H100 training boot
logs its tensors to 5 MiB, so a cuBLAS workspace made in the load window of every model is ruled out.

Counted as a fixed amount per GPU on cc 9.0 wherever the checkpoint is block FP8: whether it grows
with the model or with TP is not known (one boot). Not counted on 10.x, where the same DeepGEMM
post-processing runs but no boot was read. The range lets it be absent below and half the log's step (5.1 MiB,
ranges.RESOLUTION_BYTES) larger above. `torch.cuda.memory_snapshot()` at the end of `load_model` on an H100 or H200 would settle it.
"""

from __future__ import annotations

from apron.plan.allocator import MIB

# 0.74 GiB (the boot's log, as boots-training.json stores 0.74 GiB) less the 763,623,424 B Apron
# counts for Qwen3-0.6B-FP8 on an H100 (tensors, allocator rounding, rotary cache).
HOPPER_BLOCK_FP8_RESIDUAL_BYTES = 794_568_949 - 763_623_424
OBSERVED_CAPABILITY = (9, 0)
LINE = "observed load residual (block FP8 on cc 9.0)"


def hopper_block_fp8_residual(quant_method: str | None, block_n: int, capability: tuple[int, int]) -> int:
    """The observed residual for a block-FP8 checkpoint on cc 9.0; 0 elsewhere."""
    if quant_method == "fp8" and block_n > 0 and capability == OBSERVED_CAPABILITY:
        return HOPPER_BLOCK_FP8_RESIDUAL_BYTES
    return 0


def note(residual_bytes: int) -> str:
    return (
        f"plus {residual_bytes / MIB:.1f} MiB observed, not derived: an H100 boot of Qwen3-0.6B-FP8 loaded that "
        "much more than its tensors (one boot; cause not found in the release's source: DeepGEMM and "
        "CUTLASS keep the loaded tensors on cc 9.0); taken as a fixed amount per GPU; an allocator snapshot "
        "at the end of load_model on a Hopper GPU would settle it"
    )
