"""Attention backends (block sizes, kv cache dtypes) and their priority per GPU in platforms/cuda.py."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from apron.engine.extract.context import Context, _target, assigned_value
from apron.engine.extract.index import MISSING, UNKNOWN, ClassRef
from apron.engine.extract.static import NotStatic, dotted_name, try_literal

BACKENDS_REGISTRY = "v1/attention/backends/registry.py"
CUDA_PLATFORM = "platforms/cuda.py"


def extract_backends(ctx: Context) -> dict[str, Any]:
    enum = ctx.find_class(BACKENDS_REGISTRY, "AttentionBackendEnum")
    if enum is None:
        raise NotStatic("AttentionBackendEnum not found")
    out: dict[str, Any] = {}
    for stmt in enum.body:
        name = _target(stmt)
        value = try_literal(assigned_value([stmt], name)) if name else None
        if not name or not isinstance(value, str) or "." not in value:
            continue
        module, _, cls = value.rpartition(".")
        out[name] = _describe(ctx, module, cls)
    return out


def _describe(ctx: Context, module: str, cls: str) -> dict[str, Any]:
    ref = ctx.index.resolve(module, cls)
    if not isinstance(ref, ClassRef):
        return {
            "class": f"{module}.{cls}",
            "file": None,
            "kernel_block_sizes": None,
            "kernel_block_sizes_is_conditional": None,
            "kernel_block_sizes_variants": None,
            "supported_kv_cache_dtypes": None,
        }
    sizes, variants = _block_sizes(ctx, ref)
    dtypes = ctx.index.lookup_attr(ref, "supported_kv_cache_dtypes")
    is_strings = isinstance(dtypes, list) and all(isinstance(d, str) for d in dtypes)
    return {
        "class": f"{module}.{cls}",
        "file": ref.path,
        "kernel_block_sizes": sizes,
        "kernel_block_sizes_is_conditional": None if variants is None else len(variants) > 1,
        "kernel_block_sizes_variants": variants,
        "supported_kv_cache_dtypes": dtypes if is_strings else None,
    }


def _block_sizes(ctx: Context, ref: ClassRef) -> tuple[list[Any] | None, list[Any] | None]:
    """(the fall-through `return [...]` of get_supported_kernel_block_sizes, every distinct return
    in source order). More than one variant means the sizes depend on GPU, head size or config."""
    found = ctx.index.lookup_returns(ref, "get_supported_kernel_block_sizes")
    if found is UNKNOWN or found is MISSING:
        return None, None
    _, returns = found
    top = [value for value, unconditional in returns if unconditional]
    chosen = top[-1] if top else (returns[0][0] if len(returns) == 1 else None)
    variants: list[Any] = []
    for value, _ in returns:
        if _sizes(value) not in variants:
            variants.append(_sizes(value))
    return _sizes(chosen), variants


def _sizes(value: Any) -> list[Any] | None:
    if not isinstance(value, list):
        return None
    out: list[Any] = []
    for item in value:
        if isinstance(item, int):
            out.append(item)
        elif (
            isinstance(item, dict)
            and item.get("call", "").rpartition(".")[2] == "MultipleOf"
            and len(item.get("args", [])) == 1
            and isinstance(item["args"][0], int)
        ):
            out.append({"multiple_of": item["args"][0]})
        else:
            return None
    return out


# ------------------------------------------------------------------ backend priority


def extract_priority(ctx: Context) -> tuple[dict[str, Any], dict[str, Any]]:
    """({"mla"|"default": {family: [backend, ...]}}, conditional entries) from _get_backend_priorities.

    `family` is the major compute capability a branch tests (`device_capability.major == 10` -> "10")
    or "default" for the branch that tests none. Entries spliced in only under further conditions
    (`*([X] if use_mm_prefix else [])`, `*sparse_backends`) are listed apart with their position.
    """
    func = ctx.find_function(CUDA_PLATFORM, "_get_backend_priorities")
    if func is None:
        raise NotStatic("_get_backend_priorities not found")
    priority: dict[str, dict[str, list[str]]] = {}
    conditional: dict[str, dict[str, Any]] = {}
    for positive, negative, node in _returns(func.body, [], []):
        kind = "mla" if "use_mla" in positive else "default" if "use_mla" in negative else None
        if kind is None or not isinstance(node, ast.List):
            continue
        family, extra = _family(positive)
        if family in priority.get(kind, {}):
            continue
        names, spliced = _elements(node)
        priority.setdefault(kind, {})[family] = names
        entry = {"when": extra} if extra else {}
        if spliced or extra:
            conditional.setdefault(kind, {})[family] = {**entry, "spliced": spliced}
    return priority, conditional


def _returns(
    stmts: list[ast.stmt], positive: list[str], negative: list[str]
) -> Iterator[tuple[list[str], list[str], ast.expr]]:
    for stmt in stmts:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            yield positive, negative, stmt.value
        elif isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            yield from _returns(stmt.body, positive + [test], negative)
            yield from _returns(stmt.orelse, positive, negative + [test])


def _family(positive: list[str]) -> tuple[str, list[str]]:
    family, extra = "default", list[str]()
    for test in positive:
        if test == "use_mla":
            continue
        for term in test.split(" and "):
            term = term.strip()
            if term.startswith("(") and term.endswith(")"):
                term = term[1:-1]
            if term.startswith("device_capability.major == "):
                family = term.rpartition(" ")[2]
            else:
                extra.append(term)
    return family, extra


def _elements(node: ast.List) -> tuple[list[str], list[dict[str, Any]]]:
    names: list[str] = []
    spliced: list[dict[str, Any]] = []
    for element in node.elts:
        if isinstance(element, ast.Starred):
            spliced.append({"position": len(names), "expression": ast.unparse(element.value)})
        else:
            names.append((dotted_name(element) or ast.unparse(element)).rpartition(".")[2])
    return names, spliced
