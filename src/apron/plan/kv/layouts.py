"""From config.json to the KV spec of every layer: find the architecture's family, let it build its
layers' specs, and say out loud what it could not model.

A config key the family does not read makes the KV side unknown unless it was reviewed as unable to
change the cache (see `unknowns`), and so does a value the planner does not understand (a per-layer
list where one number is read, an unmodelled layer kind: apron.plan.config_schema). Apron never borrows
a number from another layout.
"""

from __future__ import annotations

from apron.engine.facts import EngineFacts
from apron.frozen import replace
from apron.plan.kv.backends import CPU_FAMILIES, Backend, BackendChoice, NoBackend, choose_backend, cpu_backend
from apron.plan.kv.families import family_for
from apron.plan.kv.families.base import FamilyContext, KVLayout, Refusal
from apron.plan.kv.unknowns import unmodelled_layer_kinds, unread_fields
from apron.plan.model_config import ModelConfig
from apron.plan.settings import EngineSettings

__all__ = ["KVLayout", "build_layout"]


def build_layout(
    arch: str,
    config: ModelConfig,
    settings: EngineSettings,
    facts: EngineFacts,
    *,
    capability: tuple[int, int],
    is_attention_free: bool,
    cpu_flags: frozenset[str] | None = None,
) -> KVLayout:
    """CPU_FLAGS: None on a GPU; on vLLM's CPU platform, the CPU's platform flags (apron.hardware.cpu)."""
    ctx = FamilyContext(
        arch, config, settings, facts, capability=capability, is_attention_free=is_attention_free, cpu_flags=cpu_flags
    )
    entry = facts.architecture(arch) or {}
    family = family_for(arch, config)
    if cpu_flags is not None and family.NAME not in CPU_FAMILIES:
        return _empty(ctx, f"the {family.NAME} layout on vLLM's CPU platform is not modelled")
    unread = (
        list(config.unknowns)
        + unmodelled_layer_kinds(config, family)
        + [
            f"config field '{key}' is not one the {family.NAME} layout reads, nor one known to leave the KV cache alone"
            for key in unread_fields(config, family)
        ]
    )
    minimum = getattr(family, "MIN_RELEASE", None)
    if minimum and not facts.at_least(minimum):
        unread.append(f"the {family.NAME} layout is not modelled for vLLM {facts.version} (from {minimum})")
    try:
        if config.unknowns:  # a value the family would misread: it builds nothing from it
            raise _NotUnderstood()
        layout: KVLayout = family.layer_specs(ctx)
    except _NotUnderstood:
        layout = _empty(ctx, "the config holds values the layout does not read (listed above)")
    except KeyError as exc:
        layout = _empty(ctx, f"config lacks {exc} needed for this model family's cache layout")
    except Refusal as exc:
        if exc.kind == "tp":
            layout = _empty(
                ctx, f"tensor parallel size does not divide the {exc.what} ({exc}); vLLM refuses at start-up"
            )
        elif exc.kind == "not_modelled":  # a configuration Apron cannot count yet: unknown, not refused
            layout = _empty(ctx, f"{exc} (vLLM {facts.version})")
        else:
            layout = replace(
                _empty(ctx, f"vLLM {facts.version} refuses this {exc.what}: {exc}"), refusals=((exc.kind, str(exc)),)
            )
    except NoBackend as exc:
        layout = _empty(ctx, f"attention backend unknown: {exc}")
    name = layout.family
    unknowns = unread + list(layout.unknowns)
    if name == "decoder" and (entry.get("is_hybrid") or entry.get("is_attention_free") or entry.get("has_inner_state")):
        unknowns.append(
            f"vLLM {facts.version} registers {arch} as a model with recurrent state, whose "
            "state layout Apron does not model"
        )
    if config.is_mla and name != "unknown" and "kv_lora_rank" not in family.READS:
        unknowns.append(
            f"kv_lora_rank on a {config.text_model_type!r} model: vLLM's MLA path is keyed by "
            "model type, and Apron does not know which cache this model builds"
        )
    return replace(layout, unknowns=tuple(unknowns))


class _NotUnderstood(Exception):
    """The config holds a value of a shape the planner does not read."""


def _empty(ctx: FamilyContext, why: str) -> KVLayout:
    ctx.unknowns.append(why)
    if ctx.cpu_flags is not None:
        return _nothing(ctx, cpu_backend(ctx.facts, is_mla=False, cpu_flags=ctx.cpu_flags)[0])
    try:
        choice = choose_backend(
            ctx.facts,
            ctx.capability,
            is_mla=False,
            has_sinks=False,
            mixed_head_sizes=False,
            kv_cache_dtype=ctx.settings.kv_cache_dtype,
        )
    except NoBackend:
        choice = BackendChoice(Backend("none"), "no attention backend chosen")
    return _nothing(ctx, choice)


def _nothing(ctx: FamilyContext, choice: BackendChoice) -> KVLayout:
    return KVLayout(
        specs=(),
        block_size=16,
        backend=choice,
        mamba_cache_mode="none",
        is_hybrid=False,
        is_attention_free=False,
        notes=tuple(dict.fromkeys(ctx.notes)),
        unknowns=tuple(ctx.unknowns),
        family="unknown",
    )
