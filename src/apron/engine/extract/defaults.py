"""Engine defaults: config class fields, batch defaults by GPU, CUDA-graph sizes, env variables."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

from apron.engine.extract.context import Context, _field_default, _target, assigned_value
from apron.engine.extract.index import ClassRef
from apron.engine.extract.scan import Unresolved
from apron.engine.extract.static import NotStatic, dotted_name, literal, try_literal

CACHE_FILE = "config/cache.py"
SCHEDULER_FILE = "config/scheduler.py"
VLLM_CONFIG_FILE = "config/vllm.py"
ARG_UTILS_FILE = "engine/arg_utils.py"
VOCAB_FILE = "model_executor/layers/vocab_parallel_embedding.py"
ENVS_FILE = "envs.py"


def _safe(ctx: Context, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (NotStatic, TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        ctx.gap(f"{what}: not statically resolvable ({type(exc).__name__}: {str(exc)[:120]})")
        return None


def class_fields(ctx: Context, path: str, name: str) -> tuple[dict[str, object], list[str]]:
    """({field: default} for the fields whose default the source states, [fields it computes])."""
    node = ctx.find_class(path, name)
    if node is None:
        raise NotStatic(f"class {name} not found in {path}")
    ref = ClassRef(path, name)
    out: dict[str, object] = {}
    unresolved: list[str] = []
    for stmt in node.body:
        field = _target(stmt)
        value = assigned_value([stmt], field) if field else None
        if field is None or value is None:
            continue
        try:
            out[field] = ctx.value(path, _field_default(value), ref)
        except (NotStatic, TypeError, ValueError, RecursionError):
            unresolved.append(field)
    return out, sorted(unresolved)


def _fields(ctx: Context, path: str, name: str) -> tuple[dict[str, Any], list[str]]:
    found: tuple[dict[str, Any], list[str]] | None = _safe(ctx, f"{name} fields", class_fields, ctx, path, name)
    return found or ({}, [])


def extract_defaults(ctx: Context) -> dict[str, Any]:
    cache, cache_unresolved = _fields(ctx, CACHE_FILE, "CacheConfig")
    scheduler, _ = _fields(ctx, SCHEDULER_FILE, "SchedulerConfig")
    engine_args, args_unresolved = _fields(ctx, ARG_UTILS_FILE, "EngineArgs")
    vllm_config, _ = _fields(ctx, VLLM_CONFIG_FILE, "VllmConfig")
    vocab = _safe(ctx, "DEFAULT_VOCAB_PADDING_SIZE", ctx.constant, VOCAB_FILE, "DEFAULT_VOCAB_PADDING_SIZE")
    env: dict[str, Any] = {}
    env_getenv: dict[str, Any] = {}
    env, env_getenv = _safe(ctx, "envs.py", extract_env, ctx) or (env, env_getenv)
    return {
        "gpu_memory_utilization": cache.get("gpu_memory_utilization"),
        "block_size": cache.get("DEFAULT_BLOCK_SIZE"),
        "kv_cache_dtype": engine_args.get("kv_cache_dtype"),
        "dtype": engine_args.get("dtype"),
        "vocab_padding_size": vocab,
        "scheduler": {
            "max_num_seqs": scheduler.get("max_num_seqs"),
            "max_num_batched_tokens": scheduler.get("max_num_batched_tokens"),
            "constants": {k: v for k, v in scheduler.items() if k.startswith("DEFAULT_")},
        },
        "engine_args": engine_args,
        "engine_args_unresolved": args_unresolved,
        "cache_config": cache,
        "cache_config_unresolved": cache_unresolved,
        "batch_tiers": _safe(ctx, "EngineArgs.get_batch_defaults", batch_tiers, ctx),
        "batch_device_name_lowercased": device_name_lowercased(ctx),
        "cudagraph": _safe(ctx, "VllmConfig._set_cudagraph_sizes", cudagraph_rules, ctx),
        "optimization_level": vllm_config.get("optimization_level"),
        "performance_mode": vllm_config.get("performance_mode"),
        "cudagraph_mode_by_level": _safe(ctx, "OPTIMIZATION_LEVEL_TO_CONFIG", cudagraph_mode_by_level, ctx),
        "env": {k: v for k, v in env.items() if not isinstance(v, Unresolved)},
        "env_unresolved": sorted(k for k, v in env.items() if isinstance(v, Unresolved)),
        "env_getenv": {k: v for k, v in env_getenv.items() if not isinstance(v, Unresolved)},
    }


# ------------------------------------------------------------------ batch defaults by GPU


def batch_tiers(ctx: Context) -> list[dict[str, Any]]:
    """The if/elif/else tiers of `EngineArgs.get_batch_defaults`, first match wins."""
    func = ctx.find_method(ARG_UTILS_FILE, "EngineArgs", "get_batch_defaults")
    if func is None:
        raise NotStatic("EngineArgs.get_batch_defaults not found")
    flags = _capability_flags(func)
    chain = next((n for n in ast.walk(func) if isinstance(n, ast.If) and "device_memory" in ast.unparse(n.test)), None)
    if chain is None:
        raise NotStatic("no `if device_memory ...` chain")
    tiers = []
    node: ast.If | list[ast.stmt] | None = chain  # an `if` of the chain, then its final `else` body
    while node is not None:
        if isinstance(node, ast.If):
            tier = _tier_conditions(ctx, node.test, flags)
            tier.update(_tier_values(node.body))
            orelse = node.orelse
            node = orelse[0] if len(orelse) == 1 and isinstance(orelse[0], ast.If) else (orelse or None)
        else:
            tier = _tier_conditions(ctx, None, flags)
            tier.update(_tier_values(node))
            node = None
        tiers.append(tier)
    return tiers


def device_name_lowercased(ctx: Context) -> bool:
    """Whether get_batch_defaults lower-cases the device name before its `not in` checks."""
    func = ctx.find_method(ARG_UTILS_FILE, "EngineArgs", "get_batch_defaults")
    return func is not None and "get_device_name().lower()" in ast.unparse(func)


def _capability_flags(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[int]]:
    """Locals like `is_gb10 = current_platform.is_device_capability((12, 1))`."""
    out: dict[str, list[int]] = {}
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and (dotted_name(node.value.func) or "").endswith("is_device_capability")
            and node.value.args
        ):
            value = try_literal(node.value.args[0])
            if isinstance(value, list):
                out[node.targets[0].id] = value
    return out


def _tier_conditions(ctx: Context, test: ast.AST | None, flags: dict[str, list[int]]) -> dict[str, Any]:
    name_excludes: list[str] = []
    excluded_capabilities: list[list[int]] = []
    tier: dict[str, Any] = {
        "min_device_memory_bytes": 0,
        "name_excludes": name_excludes,
        "excluded_capabilities": excluded_capabilities,
    }
    unparsed = []
    terms: list[ast.expr] = (
        test.values
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)
        else [test]
        if isinstance(test, ast.expr)
        else []
    )
    for term in terms:
        if (
            isinstance(term, ast.Compare)
            and dotted_name(term.left) == "device_memory"
            and isinstance(term.ops[0], ast.GtE)
        ):
            tier["min_device_memory_bytes"] = ctx.value(ARG_UTILS_FILE, term.comparators[0])
        elif (
            isinstance(term, ast.Compare)
            and isinstance(term.ops[0], ast.NotIn)
            and dotted_name(term.comparators[0]) == "device_name"
            and isinstance(term.left, ast.Constant)
        ):
            name_excludes.append(str(term.left.value))
        elif isinstance(term, ast.UnaryOp) and isinstance(term.op, ast.Not) and dotted_name(term.operand) in flags:
            excluded_capabilities.append(flags[dotted_name(term.operand) or ""])
        else:
            unparsed.append(ast.unparse(term))
    if unparsed:
        tier["unparsed_conditions"] = unparsed
    return tier


def _tier_values(body: list[ast.stmt]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for target in ("default_max_num_batched_tokens", "default_max_num_seqs"):
        table = assigned_value(body, target)
        if isinstance(table, ast.Dict):
            out[target.removeprefix("default_")] = {
                (dotted_name(k) or "").rpartition(".")[2]: try_literal(v)
                for k, v in zip(table.keys, table.values, strict=True)
                if k is not None
            }
    return out


# ------------------------------------------------------------------ CUDA graphs


def cudagraph_rules(ctx: Context) -> dict[str, Any]:
    func = ctx.find_method(VLLM_CONFIG_FILE, "VllmConfig", "_set_cudagraph_sizes")
    if func is None:
        raise NotStatic("VllmConfig._set_cudagraph_sizes not found")
    rule = assigned_value(ast.walk(func), "default_max_graph_size")
    if rule is None:
        raise NotStatic("no default_max_graph_size assignment")
    by_family: dict[str, Any] = {}
    by_capability: dict[str, Any] = {}
    while isinstance(rule, ast.IfExp):
        call = rule.test
        name = (dotted_name(call.func) or "") if isinstance(call, ast.Call) else ""
        arg = try_literal(call.args[0]) if isinstance(call, ast.Call) and call.args else None
        if name.endswith("is_device_capability_family") and isinstance(arg, int):
            by_family[str(arg)] = literal(rule.body)
        elif name.endswith("is_device_capability") and isinstance(arg, int):
            by_capability[str(arg)] = literal(rule.body)
        else:
            raise NotStatic(f"graph size condition {ast.unparse(call)}")
        rule = rule.orelse
    adds_seqs = any(
        isinstance(n, ast.Assign)
        and isinstance(n.value, ast.List)
        and len(n.value.elts) == 1
        and dotted_name(n.value.elts[0]) == "max_num_seqs"
        for n in ast.walk(func)
    )
    return {
        "default_max_graph_size": literal(rule),
        "max_graph_size_by_capability_family": by_family,
        "max_graph_size_by_capability": by_capability,
        "adds_max_num_seqs": adds_seqs,
        "max_num_seqs_multiplier": _seqs_multiplier(func),
    }


def _seqs_multiplier(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The constant in `min(max_num_seqs * decode_query_len * 2, default_max_graph_size)`."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and dotted_name(node.func) == "min" and node.args:
            product = node.args[0]
            names: list[str] = []
            constants: list[int] = []
            for part in ast.walk(product):
                if isinstance(part, ast.Name):
                    names.append(part.id)
                elif isinstance(part, ast.Constant) and isinstance(part.value, int):
                    constants.append(part.value)
            if "max_num_seqs" in names and all(
                isinstance(p, (ast.BinOp, ast.Name, ast.Constant, ast.Mult, ast.Load)) for p in ast.walk(product)
            ):
                return math.prod(constants)
    return None


def cudagraph_mode_by_level(ctx: Context) -> dict[str, str | None]:
    tree = ctx.tree(VLLM_CONFIG_FILE)
    levels = assigned_value(tree.body, "OPTIMIZATION_LEVEL_TO_CONFIG") if tree is not None else None
    if tree is None or not isinstance(levels, ast.Dict):
        raise NotStatic("OPTIMIZATION_LEVEL_TO_CONFIG not a dict")
    out: dict[str, str | None] = {}
    for key, value in zip(levels.keys, levels.values, strict=True):
        level = (dotted_name(key) or "").rpartition(".")[2]
        config = assigned_value(tree.body, dotted_name(value) or "")
        mode = _dict_path(config, ["compilation_config", "cudagraph_mode"])
        out[level] = (dotted_name(mode) or "").rpartition(".")[2] if mode is not None else None
    return out


def _dict_path(node: ast.AST | None, keys: list[str]) -> ast.AST | None:
    for key in keys:
        if not isinstance(node, ast.Dict):
            return None
        node = next(
            (v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant) and k.value == key),
            None,
        )
    return node


# ------------------------------------------------------------------ environment variables


def extract_env(ctx: Context) -> tuple[dict[str, Any], dict[str, Any]]:
    """(typed defaults declared under `if TYPE_CHECKING:`, the string default each getenv reads)."""
    tree = ctx.tree(ENVS_FILE)
    if tree is None:
        raise NotStatic("envs.py missing")
    typed: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and dotted_name(stmt.test) == "TYPE_CHECKING":
            for inner in stmt.body:
                if isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name) and inner.value:
                    typed[inner.target.id] = try_literal(inner.value, default=Unresolved(""))
    getenv: dict[str, Any] = {}
    table = assigned_value(tree.body, "environment_variables")
    if isinstance(table, ast.Dict):
        for key, value in zip(table.keys, table.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                getenv[key.value] = _getenv_default(value, key.value)
    return typed, getenv


def _getenv_default(node: ast.AST, var: str) -> Any:
    for call in ast.walk(node):
        if (
            isinstance(call, ast.Call)
            and (dotted_name(call.func) or "").rpartition(".")[2] in ("getenv", "get")
            and len(call.args) >= 2
            and try_literal(call.args[0]) == var
        ):
            return try_literal(call.args[1], default=Unresolved(""))
    return Unresolved("")
