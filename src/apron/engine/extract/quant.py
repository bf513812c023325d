"""Quantization methods: config class, minimum compute capability and activation dtypes."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from apron.engine.extract.context import Context, assigned_value
from apron.engine.extract.index import MISSING, UNKNOWN, ClassRef
from apron.engine.extract.scan import _absolute
from apron.engine.extract.static import NotStatic, dotted_name

QUANT_INIT = "model_executor/layers/quantization/__init__.py"
# torch's dtype aliases, so that `torch.half` reads as it prints (`torch.float16`).
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64"}


def extract_quantization(ctx: Context) -> dict[str, Any]:
    tree = ctx.tree(QUANT_INIT)
    func = ctx.find_function(QUANT_INIT, "get_quantization_config")
    if tree is None or func is None:
        raise NotStatic("quantization get_quantization_config not found")
    methods = _literal_methods(tree)
    imports = _local_imports(func)
    mapping = _method_to_config(ctx, func, imports)
    out: dict[str, Any] = {}
    for method in list(methods) + [m for m in mapping if m not in methods]:
        out[method] = _describe(ctx, mapping.get(method))
        out[method]["is_cli_choice"] = method in methods
    return out


def _literal_methods(tree: ast.Module) -> list[str]:
    value = assigned_value(tree.body, "QuantizationMethods")
    if not isinstance(value, ast.Subscript):
        return []
    elts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _local_imports(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(QUANT_INIT, node)
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}:{alias.name}"
    return out


def _method_to_config(
    ctx: Context, func: ast.FunctionDef | ast.AsyncFunctionDef, imports: dict[str, str]
) -> dict[str, object]:
    """method -> ClassRef (or the unresolved local name) from the `method_to_config` dict."""
    table = assigned_value(ast.walk(func), "method_to_config")
    if not isinstance(table, ast.Dict):
        raise NotStatic("method_to_config dict not found")
    mapping: dict[str, object] = {}
    for key, value in zip(table.keys, table.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            mapping[key.value] = _class_ref(ctx, dotted_name(value) or "", imports)
    for node in ast.walk(func):  # for x in NAMES: method_to_config.setdefault(x, Cls)
        if isinstance(node, ast.For) and len(node.body) == 1 and isinstance(node.body[0], ast.Expr):
            call = node.body[0].value
            if isinstance(call, ast.Call) and dotted_name(call.func) == "method_to_config.setdefault":
                names = _iter_names(ctx, node.iter, imports)
                for name in names:
                    mapping.setdefault(name, _class_ref(ctx, dotted_name(call.args[1]) or "", imports))
    return mapping


def _iter_names(ctx: Context, node: ast.AST, imports: dict[str, str]) -> list[str]:
    """The string keys of the module-level dict (or list) a `for` loop iterates over."""
    origin = imports.get(dotted_name(node) or "")
    path, name = QUANT_INIT, dotted_name(node) or ""
    if origin:
        module, _, name = origin.partition(":")
        path = ctx.index.path_of_module(module) or ""
    tree = ctx.tree(path)
    display = assigned_value(tree.body, name) if tree is not None else None
    if isinstance(display, ast.Dict):
        return [k.value for k in display.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(display, (ast.List, ast.Tuple)):
        return [e.value for e in display.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    ctx.gap(f"quantization: cannot read the names in `for ... in {ast.unparse(node)}`")
    return []


def _class_ref(ctx: Context, name: str, imports: dict[str, str]) -> object:
    if name in imports:
        module, _, cls = imports[name].partition(":")
        return ctx.index.resolve(module, cls)
    return ctx.index.resolve(ctx.index.scans[QUANT_INIT]["module"], name) if name else None


def _describe(ctx: Context, ref: object) -> dict[str, Any]:
    if not isinstance(ref, ClassRef):
        return {"config_class": None, "module": None, "min_capability": None, "act_dtypes": None}
    return {
        "config_class": ref.name,
        "module": ctx.index.scans[ref.path]["module"],
        "min_capability": _single_return(ctx, ref, "get_min_capability", lambda v: v if isinstance(v, int) else None),
        "act_dtypes": _single_return(ctx, ref, "get_supported_act_dtypes", _dtypes),
    }


def _single_return(ctx: Context, ref: ClassRef, method: str, convert: Callable[[Any], Any]) -> Any:
    """The value of a method that is one unconditional `return <literal>`, else None."""
    found = ctx.index.lookup_returns(ref, method)
    if found is UNKNOWN or found is MISSING:
        return None
    _, returns = found
    if len(returns) != 1 or not returns[0][1]:
        return None
    return convert(returns[0][0])


def _dtypes(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        name = item.get("name", "") if isinstance(item, dict) else ""
        module, _, attr = name.rpartition(".")
        if module != "torch" or not re.fullmatch(r"(b?float|u?int|half|double)\w*", attr):
            return None
        out.append(_DTYPE_ALIASES.get(attr, attr))
    return out
