"""KV layout families: one module each in this package (see `base` for what a module defines). Adding a
layout is adding a module and its line in CLAIMS; an architecture two families claim is an error.

A plan imports only the family it uses: CLAIMS says which architectures (or model types) each module
may claim, so only the candidates are imported and asked (their own `matches` decides); the fallback
answers when none matches. tests/test_kv_registry.py checks CLAIMS against every module's ARCHITECTURES
and MODEL_TYPES, and that asking the candidates finds what asking every module finds.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import ModuleType

from apron.plan.model_config import ModelConfig

_NOT_FAMILIES = {"base"}
FALLBACK = "decoder"  # the module with FALLBACK = True: the plain decoder

# module -> (the architectures it claims: its ARCHITECTURES, the model types it may claim: its MODEL_TYPES)
CLAIMS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "deepseek_v4": (frozenset({"DeepseekV4ForCausalLM"}), frozenset()),
    "deepseek_v41": (frozenset({"DeepseekV41ForCausalLM"}), frozenset()),
    "dsa": (frozenset({"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"}), frozenset()),
    "gated_delta_net": (
        frozenset(
            {
                "Qwen3NextForCausalLM",
                "Qwen3_5ForConditionalGeneration",
                "Qwen3_5MoeForConditionalGeneration",
                "Qwen3_5ForCausalLM",
                "Qwen3_5MoeForCausalLM",
            }
        ),
        frozenset(),
    ),
    "gemma4": (frozenset({"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"}), frozenset()),
    "glm5_next": (frozenset({"Glm5NextForConditionalGeneration", "Glm5NextForCausalLM"}), frozenset()),
    "gpt_oss": (frozenset({"GptOssForCausalLM"}), frozenset()),
    "jamba": (frozenset({"JambaForCausalLM"}), frozenset()),
    "mamba1": (frozenset({"MambaForCausalLM", "FalconMambaForCausalLM"}), frozenset()),
    "mamba2": (frozenset({"Mamba2ForCausalLM"}), frozenset()),
    "minimax_m3": (
        frozenset({"MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3SparseForCausalLM"}),
        frozenset(),
    ),
    "mla": (
        frozenset(),
        frozenset(
            {
                "deepseek_v2",
                "deepseek_v3",
                "glm4_moe_lite",
                "kimi_k2",
                "longcat_flash",
                "pangu_ultra_moe",
                "deepseek_vl_v2",
                "kimi_vl",
            }
        ),
    ),
    "nemotron_h": (frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"}), frozenset()),
    "qwen4_exp": (frozenset({"Qwen4ExpForConditionalGeneration", "Qwen4ExpForCausalLM"}), frozenset()),
    "short_conv": (frozenset({"Lfm2ForCausalLM"}), frozenset()),
}


def family_module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def module_names() -> list[str]:
    """Every family module in the package, in name order (the fallback included)."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_FAMILIES)


@lru_cache(maxsize=1)
def all_families() -> tuple[ModuleType, ...]:
    """Every family module, in name order (the fallback included): imports them all."""
    return tuple(family_module(name) for name in module_names())


def fallback() -> ModuleType:
    return family_module(FALLBACK)


def candidates(arch: str, config: ModelConfig) -> list[str]:
    """The modules CLAIMS says may claim ARCH under CONFIG, in name order."""
    model_type = config.text_model_type
    return sorted(name for name, (archs, types) in CLAIMS.items() if arch in archs or model_type in types)


def matching(arch: str, config: ModelConfig) -> list[ModuleType]:
    return [m for m in map(family_module, candidates(arch, config)) if m.matches(arch, config)]


class AmbiguousFamily(Exception):
    """Two family modules claim one architecture: a registry bug, never a silent first-wins."""


def family_for(arch: str, config: ModelConfig) -> ModuleType:
    found = matching(arch, config)
    if len(found) > 1:
        raise AmbiguousFamily(f"{arch}: families {', '.join(m.NAME for m in found)} all match")
    return found[0] if found else fallback()
