"""Reasoning and tool-call parsers, tokenizer modes and the architecture -> tokenizer mode defaults."""

from __future__ import annotations

import ast
from typing import Any

from apron.engine.extract.context import Context, assigned_value
from apron.engine.extract.static import NotStatic, dotted_name, try_literal

REASONING_FILE = "reasoning/__init__.py"
TOOL_FILE = "tool_parsers/__init__.py"
TOKENIZERS_FILE = "tokenizers/registry.py"
MODEL_CONFIG_FILE = "config/model.py"


def _lazy_table(ctx: Context, path: str, name: str) -> dict[str, dict[str, str]]:
    """`{name: (file_name, class_name)}`, registered lazily as modules of the file's package."""
    tree = ctx.tree(path)
    table = try_literal(assigned_value(tree.body, name) if tree is not None else None)
    if not isinstance(table, dict):
        raise NotStatic(f"{name} not found in {path}")
    package = ctx.index.scans[path]["module"]
    package = package if path.endswith("__init__.py") else package.rpartition(".")[0]
    return {
        key: {"module": f"{package}.{value[0]}", "class": value[1]}
        for key, value in table.items()
        if isinstance(value, list) and len(value) == 2
    }


def extract_parsers(ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, path, name in (
        ("reasoning", REASONING_FILE, "_REASONING_PARSERS_TO_REGISTER"),
        ("tool", TOOL_FILE, "_TOOL_PARSERS_TO_REGISTER"),
    ):
        try:
            out[kind] = _lazy_table(ctx, path, name)
        except NotStatic as exc:
            ctx.gap(f"parsers.{kind}: {exc}")
            out[kind] = None
    return out


def extract_tokenizer(ctx: Context) -> dict[str, Any]:
    modes: dict[str, dict[str, str]] | None = None
    try:
        modes = _lazy_table(ctx, TOKENIZERS_FILE, "_VLLM_TOKENIZERS")
    except NotStatic as exc:
        ctx.gap(f"tokenizer.modes: {exc}")
    return {"modes": modes, "literal": _mode_literal(ctx), "arch_defaults": _arch_defaults(ctx)}


def _mode_literal(ctx: Context) -> list[str] | None:
    tree = ctx.tree(MODEL_CONFIG_FILE)
    value = assigned_value(tree.body, "TokenizerMode") if tree else None
    if isinstance(value, ast.Subscript):
        elts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    ctx.gap("tokenizer.literal: TokenizerMode Literal not found")
    return None


def _arch_defaults(ctx: Context) -> dict[str, str] | None:
    """The `if self.tokenizer_mode == "auto":` chain of `arch == "X"` / `arch in (...)` tests."""
    tree = ctx.tree(MODEL_CONFIG_FILE)
    block = (
        next(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.If) and ast.unparse(n.test) == "self.tokenizer_mode == 'auto'"
            ),
            None,
        )
        if tree
        else None
    )
    chain = next((s for s in block.body if isinstance(s, ast.If)), None) if block else None
    if chain is None:
        ctx.gap("tokenizer.arch_defaults: the tokenizer_mode == 'auto' chain was not found")
        return None
    out: dict[str, str] = {}
    node: ast.stmt | None = chain
    while isinstance(node, ast.If):
        mode = next(
            (
                try_literal(s.value)
                for s in node.body
                if isinstance(s, ast.Assign) and dotted_name(s.targets[0]) == "self.tokenizer_mode"
            ),
            None,
        )
        test = node.test
        if isinstance(test, ast.Compare) and dotted_name(test.left) == "arch" and isinstance(mode, str):
            archs = try_literal(test.comparators[0])
            for arch in archs if isinstance(archs, list) else [archs]:
                if isinstance(arch, str):
                    out[arch] = mode
        node = node.orelse[0] if len(node.orelse) == 1 else None
    return out
