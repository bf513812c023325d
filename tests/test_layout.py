"""The import rules the layout promises, read from the source (imports inside functions count too):
arrows point down (cli -> boot/report/calibrate -> rules -> records/plan -> deploy/measure/checkpoint/engine/hardware),
and nothing on the planning path imports torch, transformers or vllm. A change that breaks one fails here.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "apron"
SHARED = {"errors", "frozen", "lite_typing", "paths", "units"}  # one errors module, one frozen dataclass, typing's
# run-time stand-ins, one way to write a file,
# one way to print numbers
# room -> the rooms it may import (besides itself and SHARED)
MAY_IMPORT = {
    "checkpoint": set(),
    "engine": set(),
    "hardware": set(),
    "measure": set(),
    "deploy": set(),  # reads deployment files; plans nothing
    "plan": {"deploy", "checkpoint", "engine", "hardware"},
    "records": {"plan"},  # only the documents it stores (RECORDS_FROM_PLAN)
    "calibrate": {"records", "plan", "checkpoint", "hardware"},  # the store against the calculator
    "rules": {"records", "plan", "checkpoint", "engine", "hardware", "measure"},
    "report": {"rules", "records", "plan", "checkpoint", "engine", "hardware", "measure"},
    "boot": {"rules", "records", "plan", "deploy", "checkpoint", "engine", "hardware", "measure"},
    "cli": {
        "boot",
        "report",
        "calibrate",
        "rules",
        "records",
        "plan",
        "deploy",
        "checkpoint",
        "engine",
        "hardware",
        "measure",
    },
    "errors": set(),
    "frozen": set(),
    "lite_typing": set(),
    "paths": set(),
    "units": set(),
}
# records/ is the store, the documents and their views: from the planner it takes only the typed
# documents it stores - the Plan (plan.result) and the labelled quantities inside plans and boot records
# (plan.quantity). Planning a boot or fitting the planner to boots is calibrate/'s work.
RECORDS_FROM_PLAN = {"apron.plan.result", "apron.plan.quantity"}
PLANNING_PATH = ("plan", "deploy", "checkpoint", "engine", "hardware")
HEAVY = {"torch", "transformers", "vllm"}


@functools.cache
def imports() -> dict[str, set[tuple[str, str]]]:
    """room -> {(module file, imported module)} for every import statement in the package."""
    out: dict[str, set[tuple[str, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        room = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            out.setdefault(room, set()).update((str(relative), name) for name in names)
    return out


def test_every_room_has_a_rule():
    assert set(imports()) - {"__init__"} == set(MAY_IMPORT)


@pytest.mark.parametrize("room", sorted(MAY_IMPORT))
def test_arrows_point_down(room):
    allowed = MAY_IMPORT[room] | SHARED | {room}
    upward = sorted(
        f"{file} imports {name}"
        for file, name in imports().get(room, ())
        if name.startswith("apron.") and name.split(".")[1] not in allowed
    )
    assert not upward, f"{room} may import only {sorted(allowed)}: " + "; ".join(upward)


def test_plan_imports_no_stage_above_it_and_records_no_boot_or_measure():
    rooms = {room: {n.split(".")[1] for _, n in found if n.startswith("apron.")} for room, found in imports().items()}
    assert not rooms["plan"] & {"boot", "measure", "records", "rules", "report", "cli"}
    assert not rooms["records"] & {"boot", "measure", "rules", "report", "cli"}


def test_records_import_nothing_of_the_planner_but_the_documents_they_store():
    taken = {name for _, name in imports()["records"] if name == "apron.plan" or name.startswith("apron.plan.")}
    assert taken <= RECORDS_FROM_PLAN, sorted(taken - RECORDS_FROM_PLAN)


def test_no_heavy_import_on_the_planning_path():
    heavy = sorted(
        f"{file} imports {name}"
        for room in PLANNING_PATH
        for file, name in imports().get(room, ())
        if name.split(".")[0] in HEAVY
    )
    assert not heavy, heavy


def test_a_plan_and_a_check_load_no_heavy_module(apron_home_with_facts):
    """At run time too: `apron plan` loads no torch/transformers/vllm (nor the Hub client for a catalog
    model), and the check command's module no longer pulls in an OpenAI SDK."""
    code = (
        "import sys, apron.cli; apron.cli.main(['plan', 'Qwen/Qwen3-0.6B', '--gpu', 'H100', '--json']); "
        "import apron.measure.checks; "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'openai', 'huggingface_hub') if m in sys.modules), "
        "file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "Qwen/Qwen3-0.6B", "--gpu", "H100"],
        ["plan", "openai/gpt-oss-20b", "--gpu", "H100", "--json"],
        ["fit", "Qwen/Qwen3-8B", "--context", "32768", "--users", "32"],
        ["--help"],
    ],
)
def test_plan_fit_and_help_load_no_typing_dataclasses_or_packaging(argv, apron_home_with_facts):
    """What a plan's start-up no longer pays for (benchmarks/plan_speed.py): `typing` (apron/lite_typing.py
    stands in at run time), `dataclasses` with `inspect` and `ast` (apron/frozen.py makes the frozen
    classes itself), `packaging` (engine/facts.version_key reads plain releases), `pathlib` (the
    planning path's files are text paths: with what it imports, ~5 ms), `gzip` (the catalog is read with
    zlib), `hashlib` and `datetime` (the bundled price table's digest is recorded, its dates tested), and for fit the deployment-file readers (read for --from only)."""
    unwanted = ("typing", "dataclasses", "inspect", "ast", "packaging", "pathlib", "gzip", "hashlib", "datetime")
    unwanted += ("apron.deploy",)
    code = (
        f"import sys, apron.cli\ntry: apron.cli.main({argv!r})\nexcept SystemExit: pass\n"
        f"print(sorted(m for m in {unwanted!r} if m in sys.modules), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


@pytest.mark.parametrize(
    "model",
    ["Qwen/Qwen3-0.6B", "openai/gpt-oss-20b", "state-spaces/mamba-2.8b-hf", "deepseek-ai/DeepSeek-V2-Lite-Chat"],
)
def test_a_plan_imports_only_the_kv_family_it_uses_and_no_tower(model, apron_home_with_facts):
    """`apron plan` imports the KV family module of its layout and no other (plan/kv/families CLAIMS),
    and for a text-only model neither the vision-tower planner nor the calibration reader."""
    from apron.checkpoint import load_checkpoint
    from apron.plan.kv.families import family_for
    from apron.plan.model_config import ModelConfig

    checkpoint = load_checkpoint(model)
    family = family_for(checkpoint.architecture, ModelConfig.from_config(checkpoint.config)).NAME
    code = (
        f"import sys, apron.cli; apron.cli.main(['plan', {model!r}, '--gpu', 'H100', '--json']); "
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('apron.plan.kv.families.')), "
        "sorted(m for m in ('apron.plan.encoder', 'apron.plan.calibration') if m in sys.modules), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == f"{sorted(['base', family])} []"


def test_a_command_imports_only_its_own_module(apron_home_with_facts):
    """The CLI's command modules load lazily: `apron plan` imports apron.cli.plan and nothing of the
    other commands (boot, records, rules, ...), and no click (cli/fast.py parses a well-formed plan),
    which is part of what keeps a plan's start-up short."""
    code = (
        "import sys, apron.cli; apron.cli.main(['plan', 'Qwen/Qwen3-0.6B', '--gpu', 'H100', '--json']); "
        "print(sorted(m for m in sys.modules if m.startswith(('apron.cli.', 'click'))), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (
        done.stderr.strip().splitlines()[-1]
        == "['apron.cli.commands', 'apron.cli.fast', 'apron.cli.options', 'apron.cli.plan', 'apron.cli.shared']"
    )


def module_name(path: Path) -> str:
    parts = ("apron", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def module_graph() -> dict[str, set[str]]:
    """apron module -> the apron modules it imports, from every import statement in its source: at the
    top, inside functions and under TYPE_CHECKING alike. A function-level or type-only import does not
    fail at start-up, but it is still an arrow between the two modules, so a circle through one is a
    circle of the house. `from apron.x import y` points at apron.x.y when y is a module, else at apron.x;
    the packages a dotted name passes through are not arrows (Python imports them first, by design)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        arrows = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                arrows.update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolved against this module's package
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    arrows.add(target if target in modules else base)
        arrows &= set(modules)
        arrows.discard(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere():
    graph = module_graph()
    assert {"apron.boot.sky", "apron.boot.hosts"} <= graph["apron.boot.runner"]  # the graph sees lazy imports
    assert not circles(graph), circles(graph)
