"""Where a release runs its start-up profiling pass: the functions `apron probe` wraps inside the engine.

vLLM measures the activation peak around the model runner's `profile_run` (v1/worker/gpu_worker.py
determine_available_memory); the CPU worker reaches the same `profile_run` through its runner's
`warming_up_model` (v1/worker/cpu_worker.py determine_available_memory). Runners move between files
and gain subclasses across releases, so the section lists every `profile_run` a worker-side class
defines, by module and qualified name, and every `warming_up_model` with whether it calls it. The probe
hook wraps the first list (an inherited `profile_run` is the base class's, so wrapping the definitions
covers every runner); the second says how the CPU engine gets there.
"""

from __future__ import annotations

import ast
from typing import Any

from apron.engine.extract.context import Context

WORKER_PREFIX = "v1/worker/"
PROFILE_METHOD = "profile_run"
WARM_UP_METHOD = "warming_up_model"


def extract_profiling(ctx: Context) -> dict[str, Any]:
    functions: list[dict[str, Any]] = []
    warm_ups: list[dict[str, Any]] = []
    for path in sorted(p for p in ctx.index.scans if p.startswith(WORKER_PREFIX)):
        tree = ctx.tree(path)
        if tree is None:
            continue
        module = str(ctx.index.scans[path]["module"])
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for method in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                entry = {"file": path, "module": module, "qualname": f"{cls.name}.{method.name}"}
                if method.name == PROFILE_METHOD:
                    functions.append(entry)
                elif method.name == WARM_UP_METHOD:
                    warm_ups.append({**entry, "calls_profile_run": _calls_self(method, PROFILE_METHOD)})
    if not functions:
        ctx.gap(f"profiling: no {PROFILE_METHOD} method under vllm/{WORKER_PREFIX}")
    return {"functions": functions, "cpu_warm_up": warm_ups}


def _calls_self(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether the body calls self.NAME(...)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name:
            target = node.func.value
            if isinstance(target, ast.Name) and target.id == "self":
                return True
    return False
