"""One pass over one source file: what every extractor needs from it, as plain picklable data.

This runs in worker processes (parsing ~3,000 files is most of a sync's time), so it returns small
summaries rather than syntax trees: imports, classes with their bases and class-level values, the
format string of every logger call, the message of every raise, and the hashes of the functions the
planner mirrors.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import re
from collections.abc import Iterator
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any, cast

from apron.engine.extract.skeleton import protected_names, skeleton
from apron.engine.extract.static import dotted_name, template, try_literal
from apron.frozen import frozen

_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
_OTHER_PLATFORM = re.compile(r"(?:vllm\.platforms\.)?current_platform\.is_(?:rocm|xpu|cpu|tpu|hpu|neuron)\(\)")
_CUDA_PLATFORM = re.compile(r"(?:vllm\.platforms\.)?current_platform\.is_cuda(?:_alike)?\(\)")
_LOG_METHOD = re.compile(r"(debug|info|warning|warn|error|exception|critical|fatal)(_once)?")
_LEVEL_ALIASES = {"warn": "warning", "exception": "error", "fatal": "critical"}
# Statements with blocks the walk descends into (defs and classes are handled apart).
_COMPOUND = {
    ast.If: ("body", "orelse"),
    ast.For: ("body", "orelse"),
    ast.AsyncFor: ("body", "orelse"),
    ast.While: ("body", "orelse"),
    ast.With: ("body",),
    ast.AsyncWith: ("body",),
    ast.Try: ("body", "orelse", "finalbody"),
    ast.Match: (),
}
if hasattr(ast, "TryStar"):
    _COMPOUND[ast.TryStar] = ("body", "orelse", "finalbody")
# The methods whose return values the quantization and attention extractors read.
_RETURN_METHODS = frozenset(
    {"get_min_capability", "get_supported_act_dtypes", "get_name", "get_supported_kernel_block_sizes"}
)


@frozen
class Unresolved:
    """A value the source computes rather than states; written as null."""

    text: str


def module_name(path: str) -> str:
    """`config/cache.py` -> `vllm.config.cache`; `models/x/__init__.py` -> `vllm.models.x`."""
    parts = ["vllm", *path[:-3].split("/")]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(path: str) -> str:
    module = module_name(path)
    return module if path.endswith("__init__.py") else module.rpartition(".")[0]


def _absolute(path: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package(path).split(".")
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def shape(node: ast.AST) -> Any:
    """A JSON-able reading of a class attribute or return value: literals, names, simple calls."""
    value = try_literal(node, default=Unresolved(""))
    if not isinstance(value, Unresolved):
        return value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [shape(e) for e in node.elts]
    name = dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if name is not None:
        return {"name": name}
    if isinstance(node, ast.Call) and dotted_name(node.func) and not node.keywords:
        return {"call": dotted_name(node.func), "args": [shape(a) for a in node.args]}
    return Unresolved("")


def _module_statements(body: list[ast.stmt], type_only: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """(statement, is_type_only) for module-level statements, looking inside if/try/with blocks.

    The body of `if TYPE_CHECKING:` is type-only (it never runs). Platform switches such as
    `if current_platform.is_rocm(): from .amd import X else: from .nvidia import X` are read as on
    CUDA: Apron plans for NVIDIA GPUs.
    """
    for stmt in body:
        yield stmt, type_only
        if isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            checking = test in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            if not _OTHER_PLATFORM.fullmatch(test):
                yield from _module_statements(stmt.body, type_only or checking)
            if not _CUDA_PLATFORM.fullmatch(test):
                yield from _module_statements(stmt.orelse, type_only)
        elif isinstance(stmt, (ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(stmt, block, []), type_only)
            for handler in getattr(stmt, "handlers", []):
                yield from _module_statements(handler.body, type_only)


def _class_summary(node: ast.ClassDef) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    returns: dict[str, list[list[Any]]] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            attrs[stmt.targets[0].id] = shape(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            attrs[stmt.target.id] = shape(stmt.value)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in _RETURN_METHODS:
            returns[stmt.name] = _returns(stmt)
    return {"bases": [_base(b) for b in node.bases], "attrs": attrs, "returns": returns}


def _base(node: ast.AST) -> str | dict[str, Any] | None:
    """A base class as a dotted name; `f(X)` (an adapter building a subclass) as {"call", "arg"}."""
    if isinstance(node, ast.Call) and dotted_name(node.func) and node.args and dotted_name(node.args[0]):
        return {"call": dotted_name(node.func), "arg": dotted_name(node.args[0])}
    return dotted_name(node)


def _returns(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[list[Any]]:
    """[[value, is_unconditional], ...] for each return, in source order."""
    top = {id(s) for s in func.body if isinstance(s, ast.Return)}
    out = []
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and node.value is not None:
            out.append([shape(node.value), id(node) in top, node.lineno])
    out.sort(key=lambda item: item[2])
    return [item[:2] for item in out]


@lru_cache(maxsize=8)
def _patterns_regex(patterns: list[tuple[str, str | None]]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{fnmatch.translate(qual)})" for qual, _ in patterns) or "(?!)")


class _FileScanner:
    def __init__(self, path: str, source: str, mirror_patterns: list[tuple[str, str | None]]):
        self.path, self.source, self.patterns = path, source, mirror_patterns
        self._any_pattern = _patterns_regex(tuple(mirror_patterns))
        self._lines: list[str] | None = None
        self.module_strings: dict[str, list[str]] = {}
        self.module_functions: dict[str, ast.FunctionDef] = {}

    def index_module(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                self.module_functions[stmt.name] = stmt
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                text = template(stmt.value)
                for target in targets:
                    if isinstance(target, ast.Name) and text is not None:
                        self.module_strings.setdefault(target.id, []).append(text)
        self.logs: list[list[Any]] = []
        self.refusals: list[list[Any]] = []
        self.functions: dict[str, str] = {}
        self.unresolved_logs = 0
        self.unresolved_refusals = 0
        self._locals_cache: dict[int, dict[str, list[tuple[int, str]]]] = {}

    def walk(self, stmts: list[ast.stmt], scope: tuple[str, ...], func: ast.AST | None) -> None:
        # `type(x) is C` rather than isinstance: this loop visits every statement of the release.
        for stmt in stmts:
            kind = type(stmt)
            if kind is ast.Expr:
                value = cast(ast.Expr, stmt).value
                if type(value) is ast.Call:
                    self._maybe_log(value, scope, func)
            elif kind is ast.Raise:
                self._maybe_refusal(cast(ast.Raise, stmt), scope, func)
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                function = cast(ast.FunctionDef | ast.AsyncFunctionDef, stmt)
                qual = scope + (function.name,)
                self._maybe_hash(".".join(qual), function)
                self.walk(function.body, qual, function)
            elif kind is ast.ClassDef:
                cls = cast(ast.ClassDef, stmt)
                self.walk(cls.body, scope + (cls.name,), None)
            elif kind in _COMPOUND:
                for block in _COMPOUND[kind]:
                    self.walk(getattr(stmt, block), scope, func)
                for handler in getattr(stmt, "handlers", ()):
                    self.walk(handler.body, scope, func)
                for case in getattr(stmt, "cases", ()):
                    self.walk(case.body, scope, func)

    def _maybe_hash(self, qual: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if not self._any_pattern.match(qual):
            return
        for qual_glob, path_glob in self.patterns:
            if fnmatchcase(qual, qual_glob) and (path_glob is None or fnmatchcase(self.path, path_glob)):
                segment = self._segment(node)
                key, count = qual, 1
                while key in self.functions:  # a property's getter and setter share a name
                    count += 1
                    key = f"{qual}#{count}"
                self.functions[key] = hashlib.sha256(segment.encode()).hexdigest()
                return

    def _segment(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        """`ast.get_source_segment` without re-splitting the whole file for every function."""
        if self._lines is None:
            parts = _LINE_BREAK.split(self.source)
            self._lines, self._breaks = parts[::2], parts[1::2] + [""]
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        end_col = node.end_col_offset
        lines = [line.encode() for line in self._lines[first : last + 1]]
        if len(lines) == 1:
            return lines[0][node.col_offset : end_col].decode()
        breaks = self._breaks  # each line's own break, as the source has it
        head = lines[0][node.col_offset :].decode() + breaks[first]
        middle = "".join(lines[i].decode() + breaks[first + i] for i in range(1, len(lines) - 1))
        return head + middle + lines[-1][:end_col].decode()

    def _maybe_log(self, call: ast.Call, scope: tuple[str, ...], func: ast.AST | None) -> None:
        if not isinstance(call.func, ast.Attribute):
            return
        receiver = dotted_name(call.func.value) or ""
        match = _LOG_METHOD.fullmatch(call.func.attr)
        if not match or receiver.rpartition(".")[2] not in ("logger", "_logger", "logging"):
            return
        level = _LEVEL_ALIASES.get(match.group(1), match.group(1))
        formats = self._messages(call.args[0], func) if call.args else []
        if not formats:
            self.unresolved_logs += 1
        for text in formats:
            self.logs.append([_function(scope), level, text])

    def _maybe_refusal(self, stmt: ast.Raise, scope: tuple[str, ...], func: ast.AST | None) -> None:
        exc = stmt.exc
        if not isinstance(exc, ast.Call) or not exc.args:
            return
        messages = self._messages(exc.args[0], func)
        if not messages:
            self.unresolved_refusals += 1
        for text in messages:
            self.refusals.append([_function(scope), dotted_name(exc.func) or ast.unparse(exc.func), text])

    def _messages(self, node: ast.AST, func: ast.AST | None) -> list[str]:
        text = template(node)
        if text is not None:
            return [text]
        if isinstance(node, ast.Name):
            # The closest string assignment above the use: `msg = f"..."; raise ValueError(msg)`.
            before = (
                [item for item in self._local_strings(func).get(node.id, []) if item[0] < node.lineno]
                if func is not None
                else []
            )
            if before:
                return [max(before)[1]]
            return self.module_strings.get(node.id, [])[-1:]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._helper_returns(node.func.id, func)
        return []

    def _helper_returns(self, name: str, func: ast.AST | None) -> list[str]:
        """`logger.info(_make_log_backend(b))`: the message templates a small helper returns."""
        scopes = [func] if func is not None else []
        helper = next(
            (n for scope in scopes for n in ast.walk(scope) if isinstance(n, ast.FunctionDef) and n.name == name), None
        ) or self.module_functions.get(name)
        if helper is None:
            return []
        texts = [template(n.value) for n in ast.walk(helper) if isinstance(n, ast.Return) and n.value is not None]
        return [t for t in texts if t is not None]

    def _local_strings(self, func: ast.AST) -> dict[str, list[tuple[int, str]]]:
        cached = self._locals_cache.get(id(func))
        if cached is None:
            cached = {}
            for node in ast.walk(func):
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AnnAssign) and node.value is not None
                    else []
                )
                for target in targets:
                    if not isinstance(target, ast.Name) or not isinstance(node, (ast.Assign, ast.AnnAssign)):
                        continue
                    text = template(node.value) if node.value is not None else None
                    if text is not None:
                        cached.setdefault(target.id, []).append((node.lineno, text))
            self._locals_cache[id(func)] = cached
        return cached


def _function(scope: tuple[str, ...]) -> str:
    return ".".join(scope) or "<module>"


def parse_for_scan(
    path: str, source: str, mirror_patterns: list[tuple[str, str | None]], fast: bool = True
) -> ast.Module:
    """The file's syntax tree, with the function bodies the scan does not read left out when that is
    safe (see skeleton.py). Raises SyntaxError if the file does not parse."""
    if fast:
        keep_names, keep_classes = protected_names(tuple(mirror_patterns), _RETURN_METHODS)
        reduced = skeleton(source, keep_names, keep_classes)
        if reduced is not None:
            try:
                return ast.parse(reduced, filename=f"vllm/{path}")
            except SyntaxError:
                pass  # the cut was wrong somewhere: read the whole file
    return ast.parse(source, filename=f"vllm/{path}")


def scan_source(
    path: str, source: str, mirror_patterns: list[tuple[str, str | None]], fast: bool = True
) -> dict[str, Any]:
    """Scan one file (path relative to the `vllm/` package). Raises SyntaxError if it does not parse."""
    tree = parse_for_scan(path, source, mirror_patterns, fast)
    imports: dict[str, str] = {}
    aliases: dict[str, str | None] = {}
    calls: dict[str, list[str | None]] = {}
    classes: dict[str, dict[str, Any]] = {}
    type_imports: dict[str, str] = {}
    for stmt, type_only in _module_statements(tree.body):
        if isinstance(stmt, ast.ImportFrom):
            base = _absolute(path, stmt)
            for alias in stmt.names:
                (type_imports if type_only else imports)[alias.asname or alias.name] = f"{base}:{alias.name}"
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.partition(".")[0]
                (type_imports if type_only else imports)[local] = alias.name if alias.asname else local
        elif type_only:
            continue
        elif isinstance(stmt, ast.ClassDef):
            classes[stmt.name] = _class_summary(stmt)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, value = stmt.targets[0].id, stmt.value
            if dotted_name(value) and isinstance(value, (ast.Name, ast.Attribute)):
                aliases[name] = dotted_name(value)
            elif isinstance(value, ast.Call) and dotted_name(value.func):
                first = dotted_name(value.args[0]) if value.args else None
                calls[name] = [dotted_name(value.func), first]
    for name, target in type_imports.items():  # names only annotations use; runtime imports win
        imports.setdefault(name, target)
    scanner = _FileScanner(path, source, mirror_patterns)
    scanner.index_module(tree)
    scanner.walk(tree.body, (), None)
    return {
        "path": path,
        "module": module_name(path),
        "imports": imports,
        "aliases": aliases,
        "calls": calls,
        "classes": classes,
        "logs": scanner.logs,
        "refusals": scanner.refusals,
        "functions": scanner.functions,
        "unresolved_logs": scanner.unresolved_logs,
        "unresolved_refusals": scanner.unresolved_refusals,
    }
