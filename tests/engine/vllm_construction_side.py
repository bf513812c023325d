"""Runs inside the vLLM CPU build: construct a model on the meta device (vllm_build.py) and list the
tensors it holds that are not parameters: buffers and plain tensor attributes, reached from the
modules and the objects they keep (attention impls, their index groups, the forward context).

Reads build cases as JSON lines on stdin (vllm_build.build's fields), one process for all of them
(vLLM's import is most of a case's time), and answers each with one line on stdout: RESULT, then a
JSON list of [name, shape, element size], each tensor once; or FAILED, then the traceback as JSON.
Other stdout lines (vLLM's own messages) are not answers. 0-d tensors (per-layer scale scalars) and
empty ones (the KV cache placeholders, a zero-width rotary cache) are left out, and so is a tower
vLLM skips (StageMissingLayer: built on the meta device, models/utils.py no_init_weights). The MoE experts are not built here (vllm_build.STAND_INS), so their tensors are not listed.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vllm_build  # noqa: E402

MAX_DEPTH = 4  # attribute hops from a module to a tensor (impl -> index group -> tensor is two)


def construct(case: dict):
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state

    vllm_build.use_case_backends(case)
    vllm_build._set_capability(tuple(case["capability"]))
    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(json.dumps(case["config"]))
    vc = vllm_build.vllm_config_for(case, folder)
    vllm_build._init_distributed(vc)
    vc.parallel_config.tensor_parallel_size = case["tp"]
    module_name, class_name = case["model_class"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module_name), class_name)
    vllm_build._patch_module_functions(case["tp"])
    parallel_state.get_tp_group().world_size = case["tp"]
    from vllm.utils.torch_utils import set_default_torch_dtype

    # model_loader/base_loader.py load_model (0.30.0:66, 0.32.0:73): the model is built under the
    # model dtype, which is what get_rope's caches take (dtype None: torch.get_default_dtype()).
    with set_current_vllm_config(vc), set_default_torch_dtype(vc.model_config.dtype), torch.device("meta"):
        return cls(vllm_config=vc, prefix="")


def non_parameters(model) -> list[list]:
    import torch

    found: dict[int, list] = {}

    def visit(obj, path: str, depth: int) -> None:
        if isinstance(obj, torch.Tensor):
            if not isinstance(obj, torch.nn.Parameter) and obj.dim() > 0 and obj.numel() and id(obj) not in found:
                name = re.sub(r"\.\d+\.", ".N.", path)
                found[id(obj)] = [name, list(obj.shape), obj.element_size()]
            return
        if depth > MAX_DEPTH:
            return
        if type(obj).__name__ == "StageMissingLayer":
            return  # a skipped tower (--language-model-only): vLLM builds it on the meta device
        if isinstance(obj, torch.nn.Module):
            for key, buf in obj._buffers.items():
                if buf is not None:
                    visit(buf, f"{path}.{key}", depth)
            for key, value in vars(obj).items():
                if key not in ("_parameters", "_buffers", "_modules"):
                    visit(value, f"{path}.{key}", depth + 1)
            for key, sub in obj._modules.items():
                if sub is not None:
                    visit(sub, f"{path}.{key}", depth)
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                visit(value, f"{path}[]", depth + 1)
        elif isinstance(obj, dict):
            for key, value in obj.items():
                visit(value, f"{path}[{key}]", depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type) and type(obj).__module__.startswith("vllm"):
            for key, value in vars(obj).items():
                visit(value, f"{path}.{key}", depth + 1)

    visit(model, "model", 0)
    return list(found.values())


RESULT, FAILED = "APRON-RESULT ", "APRON-FAILED "


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        try:
            vllm_build.install_stand_ins(tuple(case["capability"]))
            answer = RESULT + json.dumps(non_parameters(construct(case)))
        except Exception:  # one case's failure is that case's answer; the next may still build
            answer = FAILED + json.dumps(traceback.format_exc())
        print(answer, flush=True)


if __name__ == "__main__":
    main()
