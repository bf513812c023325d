"""The environment a deployment gives the engine, sorted by what it does to the plan.

Planned: VLLM_ALLOW_LONG_MAX_MODEL_LEN (config/model.py 0.33.0:2677 lets a max_model_len above the
derived one through) and, on vLLM's CPU platform, VLLM_CPU_KVCACHE_SPACE (platforms/cpu.py
0.33.0:341: the KV cache size in GiB). A VLLM_ variable the release's envs.py does not define is
not read at all (the platform warns "Unknown vLLM environment variable detected",
platforms/interface.py 0.33.0:1466). The rest is listed: not planned where it can change memory or
kernels, no effect where it only names paths, tokens, logging or ports.
"""

from __future__ import annotations

import re

from apron.deploy.options import ReleaseOptions
from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

PLANNED = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_CPU_KVCACHE_SPACE"}
_WHY = {
    "PYTORCH_CUDA_ALLOC_CONF": "the caching allocator's settings (expandable segments, split sizes) are not modelled",
    "VLLM_USE_FLASHINFER_MOE_FP8": "the FlashInfer FP8 MoE kernels' workspace is not modelled",
}
_NO_EFFECT = re.compile(
    r"(HF_|HUGGING_FACE_|TRANSFORMERS_|HF_HUB_|XDG_|AWS_|GOOGLE_|AZURE_|S3_|UV_|PIP_|CONDA_)|"
    r"(PATH|HOME|USER|LANG|LC_ALL|TZ|TERM|PYTHONPATH|PYTHONUNBUFFERED|LD_LIBRARY_PATH|SHELL|PWD|HOSTNAME)$|"
    r"VLLM_(LOGGING_\w+|CONFIGURE_LOGGING|LOG_\w+|API_KEY|HOST_IP|PORT|NO_USAGE_STATS|DO_NOT_TRACK|"
    r"CACHE_ROOT|CONFIG_ROOT|RPC_TIMEOUT|ENGINE_READY_TIMEOUT_S|ENGINE_ITERATION_TIMEOUT_S|"
    r"HTTP_TIMEOUT_KEEP_ALIVE|SERVER_DEV_MODE|DEBUG_LOG_API_SERVER_RESPONSE|USAGE_SOURCE)$|"
    r"NCCL_DEBUG\w*$|OMP_NUM_THREADS$|CUDA_DEVICE_ORDER$|TOKENIZERS_PARALLELISM$"
)
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|API_KEY|ACCESS_KEY|CREDENTIAL", re.I)


@frozen
class EnvVar:
    name: str
    value: str
    where: str
    use: str  # planned | no_memory_effect | not_planned | not_read
    why: str | None = None

    @property
    def is_secret(self) -> bool:
        return bool(_SECRET.search(self.name))

    @property
    def shown(self) -> str:
        return f"{self.name}=…" if self.is_secret else f"{self.name}={self.value}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": None if self.is_secret else self.value,
            "where": self.where,
            "use": self.use,
            "why": self.why,
        }


def classify(name: str, value: str, where: str, options: ReleaseOptions, unresolved: bool = False) -> EnvVar:
    if name.startswith("VLLM_") and name not in options.env:
        return EnvVar(name, value, where, "not_read", _not_read(name, options))
    if _NO_EFFECT.match(name) or name == "CUDA_VISIBLE_DEVICES":
        return EnvVar(name, value, where, "no_memory_effect")
    if unresolved:
        return EnvVar(name, value, where, "not_planned", f"{value} is set outside the file")
    if name in PLANNED:
        return EnvVar(name, value, where, "planned")
    if name in _WHY:
        return EnvVar(name, value, where, "not_planned", _WHY[name])
    if name.startswith(("VLLM_", "PYTORCH_", "TORCH_", "NCCL_", "CUDA_", "NVIDIA_")):
        return EnvVar(name, value, where, "not_planned", "its effect on memory or kernels is not modelled")
    return EnvVar(name, value, where, "no_memory_effect")


def _not_read(name: str, options: ReleaseOptions) -> str:
    option = options.long_name(name.removeprefix("VLLM_").lower())
    instead = f"; the option {option} took its place" if option else ""
    return f"vLLM {options.version}'s envs.py does not define it, so the engine ignores it{instead}"


def planned_settings(env: tuple[EnvVar, ...]) -> dict[str, Any]:
    """The UserSettings fields the planned variables set (the GPU-independent ones)."""
    allowed = next((v for v in env if v.name == "VLLM_ALLOW_LONG_MAX_MODEL_LEN" and v.use == "planned"), None)
    if allowed is None:
        return {}
    # envs.py 0.33.0:1115: "1" or "true", case-insensitive, after strip
    return {"env": (("VLLM_ALLOW_LONG_MAX_MODEL_LEN", allowed.value),)}


def cpu_kv_cache_bytes(env: tuple[EnvVar, ...]) -> int | None:
    """VLLM_CPU_KVCACHE_SPACE in GiB (platforms/cpu.py 0.33.0:341, int(), empty means unset)."""
    space = next((v for v in env if v.name == "VLLM_CPU_KVCACHE_SPACE" and v.use == "planned"), None)
    if space is None or not space.value.strip().isdigit() or int(space.value) == 0:
        return None
    return int(space.value) * 2**30
