"""The KV family registry: one module per layout family, each architecture claimed by at most one, and
CLAIMS (what lets a plan import only the family it uses) saying what the modules themselves say."""

from __future__ import annotations

import subprocess
import sys

from apron.engine.facts import known_versions, load_facts
from apron.plan.kv import families
from apron.plan.kv.families import CLAIMS, FALLBACK, all_families, fallback, family_for, matching, module_names
from apron.plan.model_config import ModelConfig
from conftest import loaded_snapshot, snapshot_names

PLAIN = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64}


def asked_all(arch: str, config: ModelConfig) -> list[str]:
    """The families that claim ARCH when every module is asked, not only CLAIMS' candidates."""
    return [m.NAME for m in all_families() if m.matches(arch, config)]


def cases() -> list[tuple[str, ModelConfig]]:
    """Every snapshot under its own config; every architecture a shipped release registers under a
    plain decoder config; every model type a family claims, under an MLA config and under a plain one."""
    out = []
    for name in snapshot_names():
        checkpoint = loaded_snapshot(name)
        out.append((checkpoint.architecture, ModelConfig.from_config(checkpoint.config)))
    plain = ModelConfig.from_config(PLAIN)
    architectures = set().union(*(load_facts(v).architectures for v in known_versions()))
    out += [(arch, plain) for arch in sorted(architectures)]
    for _, types in CLAIMS.values():
        for model_type in sorted(types):
            for extra in ({"kv_lora_rank": 512, "qk_rope_head_dim": 64}, {}):
                out.append(("SomeForCausalLM", ModelConfig.from_config({**PLAIN, "model_type": model_type, **extra})))
    return out


def test_every_family_module_declares_what_it_reads_and_where_it_comes_from():
    names = [m.NAME for m in all_families()]
    assert len(names) == len(set(names)), names
    for module in all_families():
        assert isinstance(module.READS, frozenset) and all(isinstance(k, str) for k in module.READS), module
        assert module.SOURCES and all(isinstance(v, str) and v for v in module.SOURCES.values()), module
        assert callable(module.matches) and callable(module.layer_specs), module
    assert fallback().NAME == "decoder"
    assert [m.__name__.rsplit(".", 1)[1] for m in all_families() if getattr(m, "FALLBACK", False)] == [FALLBACK]


def test_claims_name_every_module_but_the_fallback_and_say_what_each_declares():
    assert sorted(CLAIMS) == [name for name in module_names() if name != FALLBACK]
    for name, (architectures, model_types) in CLAIMS.items():
        module = families.family_module(name)
        assert module.NAME == name
        assert architectures == getattr(module, "ARCHITECTURES", frozenset()), name
        assert model_types == getattr(module, "MODEL_TYPES", frozenset()), name
        assert architectures or model_types, f"{name} claims nothing"


def test_asking_the_candidates_finds_what_asking_every_module_finds():
    """A module whose `matches` claims more than its ARCHITECTURES / MODEL_TYPES would be missed by a
    plan; here every module is asked."""
    for arch, config in cases():
        assert [m.NAME for m in matching(arch, config)] == asked_all(arch, config), arch


def test_no_architecture_is_claimed_by_two_families():
    for arch, config in cases():
        found = asked_all(arch, config)
        assert len(found) <= 1, (arch, found)


def test_a_family_claimed_by_name_and_one_by_model_type():
    assert family_for("GptOssForCausalLM", ModelConfig.from_config(PLAIN)).NAME == "gpt_oss"
    mla = ModelConfig.from_config({**PLAIN, "model_type": "deepseek_v3", "kv_lora_rank": 512})
    assert family_for("DeepseekV3ForCausalLM", mla).NAME == "mla"
    assert family_for("LlamaForCausalLM", ModelConfig.from_config(PLAIN)).NAME == "decoder"


def test_finding_a_family_imports_that_family_only():
    code = (
        "import sys\n"
        "from apron.plan.kv.families import family_for\n"
        "from apron.plan.model_config import ModelConfig\n"
        "config = ModelConfig.from_config({'model_type': 'gpt_oss', 'num_hidden_layers': 2, 'hidden_size': 64})\n"
        "family_for('GptOssForCausalLM', config)\n"
        "print(sorted(m for m in sys.modules if m.startswith('apron.plan.kv.families.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["apron.plan.kv.families.base", "apron.plan.kv.families.gpt_oss"]  # noqa: S307
