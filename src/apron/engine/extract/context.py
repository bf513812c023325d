"""What the section extractors share: parsed files on demand, the package index, constant lookup."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from apron.engine.extract.index import ClassRef, PackageIndex
from apron.engine.extract.registry import module_constants
from apron.engine.extract.static import NotStatic, dotted_name, literal


class Context:
    def __init__(self, read_text: Callable[[str], str], index: PackageIndex):
        self._read_text = read_text
        self.index = index
        self.gaps: list[str] = []
        self.tree = lru_cache(maxsize=None)(self._parse)
        self._constants = lru_cache(maxsize=None)(self._module_constants)

    def _parse(self, path: str) -> ast.Module | None:
        if path not in self.index.scans:
            return None
        tree: ast.Module = ast.parse(self._read_text(path), filename=f"vllm/{path}")
        return tree

    def _module_constants(self, path: str) -> dict[str, Any]:
        tree = self.tree(path)
        return module_constants(tree) if tree is not None else {}

    def gap(self, text: str) -> None:
        self.gaps.append(text)

    def find_class(self, path: str, name: str) -> ast.ClassDef | None:
        tree = self.tree(path)
        for node in tree.body if tree else []:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node
        return None

    def find_method(self, path: str, class_name: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        cls = self.find_class(path, class_name)
        for node in cls.body if cls else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        return None

    def find_function(self, path: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        tree = self.tree(path)
        for node in tree.body if tree else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        return None

    def constant(self, path: str, dotted: str, depth: int = 0) -> Any:
        """The literal value a name has at module level in `path`, following imports: a module
        constant, `module.NAME`, `Class.attr` (its default) or `from x import NAME`."""
        if depth > 20:
            raise NotStatic(dotted)
        head, _, rest = dotted.partition(".")
        if not rest:
            constants = self._constants(path)
            if head in constants:
                return constants[head]
            module, _, name = self.index.scans[path]["imports"].get(head, "").partition(":")
            module_path = self.index.path_of_module(module) if name else None
            if module_path:
                return self.constant(module_path, name, depth + 1)
            raise NotStatic(dotted)
        target = self.index.resolve(self.index.scans[path]["module"], head)
        target_path = self.index.path_of_module(target) if isinstance(target, str) else None
        if target_path:
            return self.constant(target_path, rest, depth + 1)
        if isinstance(target, ClassRef):
            return self.class_default(target, rest, depth + 1)
        raise NotStatic(dotted)

    def class_default(self, ref: ClassRef, attr: str, depth: int = 0) -> Any:
        """A class attribute's default: the literal, `Field(default=...)`/`field(default=...)`, or
        an enum member's name."""
        node = self.find_class(ref.path, ref.name)
        if node is None:
            raise NotStatic(f"{ref.name}.{attr}")
        if _is_enum(node):
            if any(_target(s) == attr for s in node.body):
                return attr
            raise NotStatic(f"{ref.name}.{attr}")
        default = assigned_value(node.body, attr)
        if default is not None:
            return self.value(ref.path, _field_default(default), ref, depth + 1)
        for base in self.index.bases(ref):
            if isinstance(base, ClassRef):
                try:
                    return self.class_default(base, attr, depth + 1)
                except NotStatic:
                    continue
        raise NotStatic(f"{ref.name}.{attr}")

    def value(self, path: str, node: ast.AST, owner: ClassRef | None = None, depth: int = 0) -> Any:
        """Evaluate `node` as written in `path` (inside class `owner`, if given)."""
        if depth > 20:
            raise NotStatic(ast.unparse(node))
        if isinstance(node, ast.Call) and dotted_name(node.func) == "get_field" and len(node.args) == 2:
            cls = self.index.resolve(self.index.scans[path]["module"], dotted_name(node.args[0]) or "")
            if isinstance(cls, ClassRef):
                return self.class_default(cls, literal(node.args[1]), depth + 1)
            raise NotStatic(ast.unparse(node))

        def names(dotted: str) -> Any:
            head, _, rest = dotted.partition(".")
            if owner is not None and not rest:
                try:
                    return self.class_default(owner, head, depth + 1)
                except NotStatic:
                    pass
            return self.constant(path, dotted, depth + 1)

        return literal(node, names)


def _is_enum(node: ast.ClassDef) -> bool:
    return any((dotted_name(b) or "").endswith("Enum") for b in node.bases)


def assigned_value(nodes: Iterable[ast.AST], name: str) -> ast.expr | None:
    """The value of the first `name = value` (or `name: T = value`) among NODES."""
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _target(node) == name:
            return node.value
    return None


def _target(stmt: ast.AST) -> str | None:
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    return None


def _field_default(node: ast.AST) -> ast.AST:
    """`Field(default=X, ...)` / `field(default=X)` -> X; a `default_factory` of list/dict -> [] / {}."""
    if isinstance(node, ast.Call) and (dotted_name(node.func) or "").rpartition(".")[2] in ("Field", "field"):
        for keyword in node.keywords:
            if keyword.arg == "default":
                return keyword.value
            if keyword.arg == "default_factory" and dotted_name(keyword.value) in ("list", "dict"):
                return (
                    ast.List(elts=[], ctx=ast.Load())
                    if dotted_name(keyword.value) == "list"
                    else ast.Dict(keys=[], values=[])
                )
        if node.args:
            return node.args[0]
    return node
