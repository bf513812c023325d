"""Short readable views of engine facts for `apron engine list | show | diff`."""

from __future__ import annotations

from typing import Any

from apron.engine.facts import EngineFacts, facts_origin, known_versions, load_facts


def summary(facts: EngineFacts) -> dict[str, Any]:
    data = facts.full_data
    registry = data["registry"]
    archs = registry["architectures"]
    defaults = data["defaults"]

    def count(trait: str) -> int:
        return sum(1 for a in archs.values() if a.get(trait) is True)

    return {
        "version": facts.version,
        "origin": facts_origin(facts.version),
        "source": data["source"],
        "extractor_version": data["extractor_version"],
        "pins": data["pins"],
        "num_architectures": len(archs),
        "num_hybrid": count("is_hybrid"),
        "num_attention_free": count("is_attention_free"),
        "num_multimodal": count("supports_multimodal"),
        "num_moe": count("is_moe"),
        "num_traits_unresolved": sum(1 for a in archs.values() if a.get("is_hybrid") is None),
        "num_previously_supported": len(registry.get("previously_supported") or {}),
        "num_out_of_tree": len(registry.get("out_of_tree") or {}),
        "num_config_hooks": len(data.get("config_hooks") or {}),
        "num_reasoning_parsers": len(facts.reasoning_parsers),
        "num_tool_parsers": len(facts.tool_parsers),
        "num_tokenizer_modes": len(facts.tokenizer_modes),
        "num_quantization_methods": len(data.get("quantization") or {}),
        "num_attention_backends": len(data.get("attention_backends") or {}),
        "num_log_formats": len(data.get("log_formats") or []),
        "num_refusals": len(data.get("refusals") or []),
        "num_mirrored_functions": len(data.get("mirrored_functions") or {}),
        "defaults": {
            key: defaults.get(key)
            for key in (
                "gpu_memory_utilization",
                "block_size",
                "kv_cache_dtype",
                "dtype",
                "vocab_padding_size",
                "optimization_level",
                "cudagraph_mode_by_level",
                "cudagraph",
                "batch_tiers",
            )
        },
        "gaps": data.get("gaps", []),
    }


def list_rows() -> list[dict[str, Any]]:
    rows = []
    for version in known_versions():
        facts = load_facts(version)
        data = facts.data
        rows.append(
            {
                "version": version,
                "origin": facts_origin(version),
                "num_architectures": len(facts.architectures),
                "torch": data["pins"].get("torch"),
                "sha256": data["source"]["sha256"],
                "filename": data["source"]["filename"],
            }
        )
    return rows


def render_summary(info: dict[str, Any]) -> list[str]:
    d = info["defaults"]
    lines = [
        f"vllm {info['version']} ({info['origin']}; {info['source']['filename']} sha256 "
        f"{info['source']['sha256'][:16]}...)",
        f"  pins: {info['pins'].get('torch')}, {info['pins'].get('transformers')}",
        f"  architectures: {info['num_architectures']} ({info['num_hybrid']} hybrid, "
        f"{info['num_attention_free']} attention-free, {info['num_multimodal']} multimodal, "
        f"{info['num_moe']} MoE, {info['num_traits_unresolved']} with traits not static); "
        f"{info['num_previously_supported']} previously supported, {info['num_out_of_tree']} out of tree",
        f"  parsers: {info['num_reasoning_parsers']} reasoning, {info['num_tool_parsers']} tool; "
        f"{info['num_tokenizer_modes']} tokenizer modes; {info['num_quantization_methods']} quantization "
        f"methods; {info['num_attention_backends']} attention backends",
        f"  defaults: gpu_memory_utilization {d['gpu_memory_utilization']}, block size {d['block_size']}, "
        f"kv cache dtype {d['kv_cache_dtype']}, optimization level {d['optimization_level']}",
    ]
    for tier in d.get("batch_tiers") or []:
        lines.append(
            f"  batch tier >= {tier['min_device_memory_bytes'] / 2**30:g} GiB"
            f"{' excluding ' + ', '.join(tier['name_excludes']) if tier['name_excludes'] else ''}: "
            f"max_num_seqs {tier['max_num_seqs']}, max_num_batched_tokens {tier['max_num_batched_tokens']}"
        )
    lines.append(
        f"  {info['num_log_formats']} log formats, {info['num_refusals']} refusal templates, "
        f"{info['num_mirrored_functions']} mirrored functions; {len(info['gaps'])} gaps"
    )
    lines += [f"  gap: {gap}" for gap in info["gaps"]]
    return lines


def _names(label: str, names: list[str], limit: int = 12) -> list[str]:
    if not names:
        return []
    shown = ", ".join(names[:limit]) + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")
    return [f"  {label} ({len(names)}): {shown}"]


def render_diff(diff: dict[str, Any]) -> list[str]:
    lines = [f"vllm {diff['from']} -> {diff['to']}"]
    for key, (a, b) in diff["pins"].items():
        lines.append(f"  pin {key}: {a} -> {b}")
    archs = diff["architectures"]
    lines += _names("architectures added", archs["added"]) + _names("architectures removed", archs["removed"])
    lines += _names("architectures changed", sorted(archs["changed"]))
    for kind in ("reasoning", "tool"):
        parsers = diff["parsers"][kind]
        lines += _names(f"{kind} parsers added", parsers["added"]) + _names(
            f"{kind} parsers removed", parsers["removed"]
        )
    lines += _names("quantization methods added", diff["quantization"]["added"])
    lines += _names("quantization methods changed", sorted(diff["quantization"]["changed"]))
    lines += _names("attention backends added", diff["attention_backends"]["added"])
    lines += _names("attention backends changed", sorted(diff["attention_backends"]["changed"]))
    skip_env = [k for k in diff["defaults"] if k.startswith(("env.", "env_getenv.", "engine_args", "cache_config"))]
    for key, (a, b) in diff["defaults"].items():
        if key not in skip_env:
            lines.append(f"  default {key}: {a} -> {b}")
    lines += _names("other default changes (env, engine args)", skip_env)
    for key, (a, b) in diff["tokenizer"].items():
        lines.append(f"  tokenizer {key}: {a} -> {b}")
    mirrored = diff["mirrored_functions"]
    lines += _names(f"mirrored functions changed ({mirrored['note']})", mirrored["changed"], limit=50)
    for qual, (a, b) in mirrored["moved"].items():
        lines.append(f"  moved {qual}: {', '.join(a)} -> {', '.join(b)}")
    lines += _names("mirrored functions new", mirrored["added"]) + _names(
        "mirrored functions gone", mirrored["removed"]
    )
    lines.append(
        f"  log formats: {len(diff['log_formats']['added'])} added, "
        f"{len(diff['log_formats']['removed'])} removed; refusals: "
        f"{len(diff['refusals']['added'])} added, {len(diff['refusals']['removed'])} removed"
    )
    return lines
