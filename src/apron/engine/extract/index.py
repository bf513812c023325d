"""The package as a graph: modules, their imports and their classes, resolved without importing.

Class names are followed through `from x import Y` chains, re-exports and `X = Y` aliases to the
class statement that defines them; attribute lookup follows Python's C3 method resolution order.
A name that cannot be followed (built at run time, imported from a compiled extension) is
`UNKNOWN`; a class from outside the package (torch, typing) is `EXTERNAL` and defines none of
vLLM's marker attributes.
"""

from __future__ import annotations

import builtins
from typing import Any, Union

from apron.engine.extract.scan import Unresolved
from apron.frozen import frozen


@frozen
class ClassRef:
    path: str
    name: str


@frozen
class Leaf:
    """A base that ends the walk: `external` (outside vLLM) or unknown (not statically resolvable)."""

    text: str
    external: bool


MISSING = object()
UNKNOWN = object()
# What a dotted name inside a module is: a class, a module (its name) or a leaf.
Resolved = Union["ClassRef", str, Leaf]
_MAX_DEPTH = 40


class PackageIndex:
    def __init__(self, scans: dict[str, dict[str, Any]]):
        self.scans = scans
        self.module_paths: dict[str, str] = {scan["module"]: path for path, scan in scans.items()}
        self._mro_cache: dict[ClassRef, list[Any]] = {}
        for scan in scans.values():
            _add_adapter_classes(scan)

    def path_of_module(self, module: str) -> str | None:
        return self.module_paths.get(module)

    def resolve(self, module: str, dotted: str, depth: int = 0) -> Resolved:
        """The ClassRef, module name (str) or Leaf that `dotted` names inside `module`."""
        if not module.startswith("vllm"):
            return Leaf(f"{module}.{dotted}", external=True)
        path = self.module_paths.get(module)
        if path is None or depth > _MAX_DEPTH:
            return Leaf(f"{module}.{dotted}", external=False)
        head, _, rest = dotted.partition(".")
        target = self._resolve_name(path, head, depth)
        if not rest or isinstance(target, Leaf):
            return target
        if isinstance(target, str):
            return self.resolve(target, rest, depth + 1)
        return Leaf(f"{module}.{dotted}", external=False)

    def _resolve_name(self, path: str, name: str, depth: int) -> Resolved:
        scan = self.scans[path]
        module = scan["module"]
        if name in scan["classes"]:
            return ClassRef(path, name)
        if name in scan["aliases"]:
            return self.resolve(module, scan["aliases"][name], depth + 1)
        if name in scan["imports"]:
            target: str = scan["imports"][name]
            source, _, imported = target.partition(":")
            if not imported:
                return source
            if f"{source}.{imported}" in self.module_paths:
                return f"{source}.{imported}"
            return self.resolve(source, imported, depth + 1)
        if hasattr(builtins, name):
            return Leaf(name, external=True)
        return Leaf(f"{module}.{name}", external=False)

    def class_info(self, ref: ClassRef) -> dict[str, Any]:
        info: dict[str, Any] = self.scans[ref.path]["classes"][ref.name]
        return info

    def bases(self, ref: ClassRef) -> list[Any]:
        module = self.scans[ref.path]["module"]
        out: list[ClassRef | Leaf] = []
        for base in self.class_info(ref)["bases"]:
            if isinstance(base, dict):
                base = base["arg"] if _is_adapter(self.scans[ref.path], base["call"]) else None
            if base is None:
                out.append(Leaf("<expression>", external=False))
            elif base in ("object", "Protocol", "Generic", "ABC"):
                continue
            else:
                resolved = self.resolve(module, base)
                out.append(resolved if not isinstance(resolved, str) else Leaf(base, external=False))
        return out

    def mro(self, ref: ClassRef, depth: int = 0) -> list[Any]:
        """C3 linearization; leaves (external or unknown bases) are their own linearization."""
        if ref in self._mro_cache:
            return self._mro_cache[ref]
        if depth > _MAX_DEPTH:
            return [ref, Leaf("<too deep>", external=False)]
        self._mro_cache[ref] = [ref, Leaf("<cycle>", external=False)]  # guards a cyclic graph
        bases = self.bases(ref)
        sequences = [self.mro(b, depth + 1) if isinstance(b, ClassRef) else [b] for b in bases]
        merged = _c3_merge(sequences + [list(bases)])
        if merged is None:  # inconsistent hierarchy: Python would refuse it; keep a depth-first order
            merged = _unique([item for seq in sequences for item in seq])
        result = [ref] + merged
        self._mro_cache[ref] = result
        return result

    def lookup_attr(self, ref: ClassRef, attr: str) -> Any:
        """The class attribute as Python's getattr on the class would find it, or MISSING/UNKNOWN."""
        for entry in self.mro(ref):
            if isinstance(entry, Leaf):
                if entry.external:
                    continue
                return UNKNOWN
            attrs = self.class_info(entry)["attrs"]
            if attr in attrs:
                value = attrs[attr]
                return UNKNOWN if isinstance(value, Unresolved) else value
        return MISSING

    def lookup_returns(self, ref: ClassRef, method: str) -> Any:
        """The first class in the MRO that defines `method`: (ClassRef, returns) or UNKNOWN/MISSING."""
        for entry in self.mro(ref):
            if isinstance(entry, Leaf):
                if entry.external:
                    continue
                return UNKNOWN
            returns = self.class_info(entry)["returns"]
            if method in returns:
                return entry, returns[method]
        return MISSING

    def inherits(self, ref: ClassRef, target: ClassRef) -> bool | None:
        chain = self.mro(ref)
        if target in chain:
            return True
        if any(isinstance(e, Leaf) and not e.external for e in chain):
            return None
        return False


def _is_adapter(scan: dict[str, Any], func: str | None) -> bool:
    """Whether `func` is one of vLLM's model adapters (models/adapters.py `as_*_model`), which
    return a subclass of their argument."""
    target: str = scan["imports"].get(func or "", "")
    module, _, function = target.partition(":")
    return module.endswith("models.adapters") and function.startswith("as_")


def _add_adapter_classes(scan: dict[str, Any]) -> None:
    """`X = as_seq_cls_model(Y)` is read as `class X(Y)` for attribute lookup."""
    for name, (func, arg) in scan["calls"].items():
        if _is_adapter(scan, func) and arg and name not in scan["classes"]:
            scan["classes"][name] = {"bases": [arg], "attrs": {}, "returns": {}, "adapter": func}


def _unique(items: list[Any]) -> list[Any]:
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _c3_merge(sequences: list[list[Any]]) -> list[Any] | None:
    sequences = [list(s) for s in sequences if s]
    result = []
    while sequences:
        for seq in sequences:
            head = seq[0]
            if not any(head in other[1:] for other in sequences):
                break
        else:
            return None
        result.append(head)
        sequences = [[x for x in s if x != head] for s in sequences]
        sequences = [s for s in sequences if s]
    return result
