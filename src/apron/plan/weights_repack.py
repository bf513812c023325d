"""What the caching allocator adds when a kernel re-lays its weights after loading.

vLLM builds every parameter on the GPU (initialize_model), loads the checkpoint into them, then runs
each layer's process_weights_after_loading in module order (model_loader/utils.py 0.29.0:97-145).
A kernel that re-lays a weight allocates the new tensor while the old one and a transposed transient
are still live, then frees both. All of it happens under max_split_size_mb:20 (gpu_worker.py
0.29.0:488-495). A 1-10 MiB request lands in a free block of a 20 MiB segment, and when the
remainder is 1 MiB or less the allocator does not split it (CUDACachingAllocator.cpp should_split:
a large-pool block is split only when more than kSmallSize remains). The re-laid tensor then owns the
whole block, and memory_allocated() - what vLLM reports as "Model loading took" - counts all of it.
Counting each parameter in a fresh segment (allocator.load_block_bytes) cannot see this: it depends on
which free blocks earlier layers left, so the load is replayed (plan/allocator.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from apron.frozen import frozen
from apron.plan.allocator import MIB, Event, load_block_bytes, replay

LOAD_MAX_SPLIT_BYTES = 20 * MIB  # gpu_worker.py 0.29.0:488-495 (_scoped_allocator_max_split), 0.30.0:500-506


@frozen
class MarlinFp8Linear:
    """One block-FP8 linear as MarlinFP8ScaledMMLinearKernel re-lays it (per rank).

    weight: its fp8 parameter's tag in the construction list; n, k: output and input size; padded_n,
    padded_k: marlin_padded_nk of them; scale_bytes: the old fp32 block scale parameter's bytes;
    dtype_bytes: the activation dtype's size; block_k: the scale group along K."""

    weight: str
    scale: str
    n: int
    k: int
    padded_n: int
    padded_k: int
    block_k: int
    dtype_bytes: int


def marlin_fp8_events(linear: MarlinFp8Linear, index: int) -> list[Event]:
    """prepare_fp8_layer_for_marlin (quantization/utils/marlin_utils_fp8.py 0.29.0:107-221) as
    allocator events, in the order its statements run:
    - pack_fp8_to_int32 with size_k_first False (block quant, scaled_mm/marlin.py 0.29.0:58) is a view
      of the weight; `qweight.T.contiguous()` a transient copy T (0.29.0:141-142); marlin_pad_qweight a
      padded copy P when the shape needs padding (marlin_utils.py 0.29.0:255-265);
    - gptq_marlin_repack's output R (kept; [K/16, N x 16/4] int32 for 8 bits, the weight's bytes:
      its fake, _custom_ops.py 0.29.0:1166-1182), then replace_parameter frees the loaded weight;
    - the scales: `.to(orig_dtype)` and `.T.contiguous()` of the [N/128, K/128] block scales;
      repeat_interleave (its int64 index of N rows, then the [K/128, N] copy S1); marlin_pad_scales;
      marlin_permute_scales' indexed copy S2 (marlin_utils.py 0.29.0:470-480);
      fp8_fused_exponent_bias_into_scales' ones_like, `* 2`, `** bias`, `scales * s` (the kept S3,
      marlin_utils_fp8.py 0.29.0:35-46); replace_parameter frees the fp32 block scales;
    - on return the locals go: T (or P), S1 (or its padded copy).
    The layer's workspace (marlin_make_workspace_new: one int32 per SM, kept; gone from 0.31) is a
    small-pool block and leaves the large pool alone; it is left out. Otherwise the same through 0.33."""
    w = f"{index}:"
    n, k, pn, pk = linear.n, linear.k, linear.padded_n, linear.padded_k
    dtype = linear.dtype_bytes
    block_scales = -(-n // 128) * -(-k // linear.block_k) * dtype
    expanded = k // linear.block_k * n * dtype
    kept_scales = pk // linear.block_k * pn * dtype
    padded = (pn, pk) != (n, k)
    events = [Event("alloc", n * k, w + "T")]
    if padded:
        events += [Event("alloc", pn * pk, w + "P"), Event("free", 0, w + "T")]
    events += [Event("alloc", pn * pk, w + "R"), Event("free", 0, linear.weight)]
    events += [
        Event("alloc", block_scales, w + "S0"),
        Event("alloc", block_scales, w + "S0T"),
        Event("free", 0, w + "S0"),
    ]
    events += [Event("alloc", 8 * n, w + "idx"), Event("alloc", expanded, w + "S1"), Event("free", 0, w + "idx")]
    events.append(Event("free", 0, w + "S0T"))
    if padded:
        events.append(Event("alloc", kept_scales, w + "S1p"))
    events += [Event("alloc", kept_scales, w + "S2"), Event("alloc", kept_scales, w + "ones")]
    events += [Event("alloc", kept_scales, w + "two"), Event("free", 0, w + "ones")]
    events += [Event("alloc", kept_scales, w + "pow"), Event("free", 0, w + "two")]
    events += [Event("alloc", kept_scales, w + "S3"), Event("free", 0, w + "pow"), Event("free", 0, w + "S2")]
    events.append(Event("free", 0, linear.scale))
    events += [Event("free", 0, w + ("P" if padded else "T")), Event("free", 0, w + "S1")]
    if padded:
        events.append(Event("free", 0, w + "S1p"))
    return events


def repack_block_bytes(construction: Sequence[tuple[str, int]], process: Sequence[Event]) -> int:
    """Bytes memory_allocated() holds beyond each kept tensor's own fresh-segment block
    (load_block_bytes) after building CONSTRUCTION - (tag, bytes) in the order vLLM allocates the
    parameters - and running PROCESS, all under the load's 20 MiB split limit."""
    events = [Event("max_split", LOAD_MAX_SPLIT_BYTES)]
    events += [Event("alloc", n, tag) for tag, n in construction]
    events += list(process)
    events.append(Event("empty_cache"))
    live: dict[str, int] = {}
    for event in events:
        if event.op == "alloc":
            live[event.tag] = event.num_bytes
        elif event.op == "free":
            live.pop(event.tag)
    allocated = replay(events).final.allocated_bytes
    return max(allocated - sum(load_block_bytes(n) for n in live.values()), 0)


@frozen
class MacheteAwqLinear:
    """One AWQ linear as AutoAWQMarlinLinearMethod hands it to MacheteLinearKernel (per rank): the
    tags of its qweight [K, N/8] and qzeros [K/g, N/8] int32 parameters, K, N, the group size and
    the activation dtype's size."""

    qweight: str
    qzeros: str
    k: int
    n: int
    group_size: int
    dtype_bytes: int


def machete_awq_events(linear: MacheteAwqLinear, index: int) -> list[Event]:
    """AutoAWQMarlinLinearMethod.process_weights_after_loading (quantization/auto_awq.py 0.30.0:502-511,
    the same in 0.29-0.33) as allocator events:
    - _convert_awq_to_standard_format (auto_awq.py 0.30.0:93-168): `(qw.unsqueeze(-1) >> shifts) & mask`
      makes two [K, N/8, 8] int32 tensors (8x the qweight; the first freed), the reverse_order gather a
      third (the second freed; it lives to the function's end), `<< shifts` a fourth, `.sum` the new
      [K/8, N] qweight (the fourth freed). The zero points the same way at their size, plus the copy
      `.T.reshape(N/8, 8, G)` makes. The loaded qweight and zero points stay referenced by the locals
      `qw` and `qz` until the function returns, when they go with the gathered tensors;
    - MacheteLinearKernel.process_weights_after_loading (mixed_precision/machete.py 0.30.0:60-95):
      `x.data.t().contiguous()` a transient copy, machete_prepack_B's output kept (empty_like its
      input: its fake, _custom_ops.py 0.30.0:1367-1376), then the copy and the standard qweight
      freed; the scales keep their storage (`.contiguous()` of a contiguous tensor); the zero points: unpack_quantized_values_into_int32's zero-filled [K/g, N] int32 result
      and its eight `(w >> 4i) & mask` pairs (quant_utils.py 0.30.0:591-609), `-1.0 * w_s`, the
      `.to(w_s.dtype)` copy, their product kept; the standard zero points and the unpacked result freed.
    Small tensors (the shift and order tables) are small-pool blocks and are left out."""
    w = f"{index}:"
    k, n, groups = linear.k, linear.n, linear.k // linear.group_size
    q, z = k * n // 2, groups * n // 2  # int4 values, 8 to an int32
    events: list[Event] = []
    for size, tag in ((q, "q"), (z, "z")):
        t = w + tag
        events += [Event("alloc", 8 * size, t + "1"), Event("alloc", 8 * size, t + "2"), Event("free", 0, t + "1")]
        events += [Event("alloc", 8 * size, t + "3"), Event("free", 0, t + "2")]
        if tag == "z":  # unpacked_zp.T.reshape(N // 8, 8, G) copies the transposed view
            events += [Event("alloc", 8 * size, t + "T"), Event("free", 0, t + "3")]
        events += [Event("alloc", 8 * size, t + "4"), Event("alloc", size, t + "std"), Event("free", 0, t + "4")]
    # the locals `qw` and `qz` hold the loaded tensors past setattr: all four go on return, in order
    events += [Event("free", 0, linear.qweight), Event("free", 0, w + "q3")]
    events += [Event("free", 0, linear.qzeros), Event("free", 0, w + "zT")]
    events += [Event("alloc", q, w + "copy"), Event("alloc", q, w + "prepacked"), Event("free", 0, w + "copy")]
    events.append(Event("free", 0, w + "qstd"))
    events.append(Event("alloc", 4 * groups * n, w + "unpacked"))
    for i in range(8):
        events += [Event("alloc", z, f"{w}s{i}"), Event("alloc", z, f"{w}m{i}"), Event("free", 0, f"{w}s{i}")]
        events.append(Event("free", 0, f"{w}m{i}"))
    half = groups * n * linear.dtype_bytes
    events += [Event("alloc", half, w + "neg"), Event("alloc", half, w + "cast"), Event("alloc", half, w + "zp")]
    events += [Event("free", 0, w + "neg"), Event("free", 0, w + "cast"), Event("free", 0, w + "zstd")]
    events.append(Event("free", 0, w + "unpacked"))
    return events
