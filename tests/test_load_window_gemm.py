"""The weights term books no cuBLAS workspace: no GEMM runs while a model loads (docs/memory.md section 5,
the cuBLAS row). Every model builds a rotary cache with torch.einsum("i,j -> ij")
(model_executor/layers/rotary_embedding/base.py 0.30.0:99, the same line in 0.31-0.33) on the GPU, under
the loader's device context; were that outer product a GEMM, the default stream's cuBLAS workspace
(8.125 MiB, 32 MiB on Hopper) would be made inside "Model loading took" for every model. einsum is a
CompositeImplicit op, so the aten ops it dispatches to are the same on CUDA as on the CPU build's torch."""

from __future__ import annotations

import json
import subprocess

from engine_env import vllm_python

# Each expression's aten ops, recorded below the autograd layer with a TorchDispatchMode.
TRACE = """
import json, torch
from torch.utils._python_dispatch import TorchDispatchMode

class Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))

t = torch.arange(4096, dtype=torch.float)
inv_freq = 1.0 / (10000 ** (torch.arange(0, 128, 2, dtype=torch.float) / 128))
cases = {
    "rotary outer product": lambda: torch.einsum("i,j -> ij", t, inv_freq),
    "a contraction": lambda: torch.einsum("ij,jk -> ik", torch.ones(8, 4), torch.ones(4, 8)),
}
out = {}
for name, fn in cases.items():
    with Ops() as ops:
        fn()
    out[name] = ops.names
print(json.dumps({"torch": torch.__version__, "ops": out}))
"""

GEMMS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "dot", "mv", "_scaled_mm"}


def test_the_rotary_outer_product_is_a_multiply_and_a_contraction_is_a_gemm():
    result = subprocess.run([vllm_python(), "-c", TRACE], capture_output=True, text=True, timeout=300, check=True)
    traced = json.loads(result.stdout.strip().splitlines()[-1])
    outer, contraction = traced["ops"]["rotary outer product"], traced["ops"]["a contraction"]
    # The trace sees GEMMs where there are some, so an empty intersection below means none ran.
    assert GEMMS & set(contraction), (traced["torch"], contraction)
    assert not GEMMS & set(outer), (traced["torch"], outer)
    assert "mul" in outer, (traced["torch"], outer)
