"""The model registry (`model_executor/models/registry.py`) and per-architecture traits and hooks."""

from __future__ import annotations

import ast
from typing import Any

from apron.engine.extract.index import MISSING, UNKNOWN, ClassRef, PackageIndex
from apron.engine.extract.static import NotStatic, dotted_name, literal

REGISTRY_FILE = "model_executor/models/registry.py"
CONFIG_HOOKS_FILE = "model_executor/models/config.py"
INTERFACES_FILE = "model_executor/models/interfaces.py"
# Trait name in the facts -> the class attribute vLLM's `getattr(model, ...)` checks read.
_TRAIT_ATTRS = {
    "is_hybrid": "is_hybrid",
    "is_attention_free": "is_attention_free",
    "has_inner_state": "has_inner_state",
    "supports_multimodal": "supports_multimodal",
    "supports_pp": "supports_pp",
}


def module_constants(tree: ast.Module) -> dict[str, object]:
    """Top-level `NAME = <literal>` assignments evaluated in order (so `**` spreads see earlier dicts)."""
    env: dict[str, object] = {}

    def names(name: str) -> object:
        if name in env:
            return env[name]
        raise NotStatic(name)

    for stmt in tree.body:
        target, value = _assignment(stmt)
        if target is None or value is None:
            continue
        try:
            env[target] = literal(value, names)
        except (NotStatic, TypeError, ValueError):
            env.pop(target, None)
    return env


def _assignment(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return stmt.target.id, stmt.value
    return None, None


def _category(dict_name: str) -> str:
    return dict_name.strip("_").removesuffix("_MODELS").lower()


def _categories(tree: ast.Module, merged: str = "_VLLM_MODELS") -> dict[str, list[str]]:
    """arch -> the registry dicts (in spread order) that list it."""
    spreads: list[str] = []
    for stmt in tree.body:
        target, value = _assignment(stmt)
        if target == merged and isinstance(value, ast.Dict):
            spreads = [
                v.id for k, v in zip(value.keys, value.values, strict=True) if k is None and isinstance(v, ast.Name)
            ]
    env = module_constants(tree)
    out: dict[str, list[str]] = {}
    for name in spreads:
        table = env.get(name)
        for arch in table if isinstance(table, dict) else {}:
            out.setdefault(arch, []).append(_category(name))
    return out


def _module_name(relname: str) -> str:
    # Mirrors registry.py `_resolve_module_name` (its hash is in mirrored_functions).
    return relname if relname.startswith("vllm.") else f"vllm.model_executor.models.{relname}"


def _supported_archs_expr(tree: ast.Module) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_supported_archs":
            returns = [s.value for s in node.body if isinstance(s, ast.Return) and s.value is not None]
            return ast.unparse(returns[0]) if returns else None
    return None


def extract_registry(tree: ast.Module, index: PackageIndex) -> tuple[dict[str, Any], list[str]]:
    """The `registry` section and the gaps met while filling it."""
    env = module_constants(tree)
    gaps: list[str] = []
    models = env.get("_VLLM_MODELS")
    if not isinstance(models, dict):
        raise NotStatic("_VLLM_MODELS is not a static dict")
    categories = _categories(tree)
    markers = _marker_classes(index)
    architectures: dict[str, Any] = {}
    for arch, entry in models.items():
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)):
            gaps.append(f"registry entry {arch} is not a (module, class) pair")
            continue
        module, cls = _module_name(entry[0]), entry[1]
        architectures[arch] = {
            "module": module,
            "class": cls,
            "category": categories[arch][0] if categories.get(arch) else None,
            "categories": categories.get(arch, []),
            **_traits(index, module, cls, markers),
        }
    for key in ("_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS"):
        if not isinstance(env.get(key), dict):
            gaps.append(f"registry {key} not found or not static")
    return {
        "architectures": architectures,
        "order": list(models),
        "previously_supported": env.get("_PREVIOUSLY_SUPPORTED_MODELS") or {},
        "out_of_tree": env.get("_OOT_SUPPORTED_MODELS") or {},
        "supported_archs_expr": _supported_archs_expr(tree),
    }, gaps


def _marker_classes(index: PackageIndex) -> dict[str, ClassRef]:
    scan = index.scans.get(INTERFACES_FILE, {"classes": {}})
    return {name: ClassRef(INTERFACES_FILE, name) for name in scan["classes"]}


def _traits(index: PackageIndex, module: str, cls: str, markers: dict[str, ClassRef]) -> dict[str, Any]:
    ref = index.resolve(module, cls)
    out: dict[str, Any] = {"file": index.path_of_module(module)}
    if not isinstance(ref, ClassRef):
        out.update({trait: None for trait in _TRAIT_ATTRS})
        out["is_moe"] = None
        return out
    for trait, attr in _TRAIT_ATTRS.items():
        value = index.lookup_attr(ref, attr)
        out[trait] = None if value is UNKNOWN else (False if value is MISSING else value is True)
    moe = markers.get("MixtureOfExperts")
    out["is_moe"] = index.inherits(ref, moe) if moe else None
    return out


def extract_config_hooks(tree: ast.Module) -> dict[str, str]:
    """`MODELS_CONFIG_MAP`: arch -> the VerifyAndUpdateConfig class that adjusts its config."""
    for stmt in tree.body:
        target, value = _assignment(stmt)
        if target == "MODELS_CONFIG_MAP" and isinstance(value, ast.Dict):
            out = {}
            for key, item in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    out[key.value] = dotted_name(item) or ast.unparse(item)
            return out
    raise NotStatic("MODELS_CONFIG_MAP not found")
