"""A SkyPilot task YAML: `run` (a shell script, with `envs` and the SKYPILOT_* variables SkyPilot sets
from the resources substituted), `resources.accelerators` in every form SkyPilot reads
(sky/resources.py Resources.from_yaml_config and _set_accelerators: `H100:8`; `{H100: 8}`; a map
written `{H100:8, H200:8}`, whose keys carry the count; a list, which is an order of preference; a set
`{L4, A10G}`; `any_of` (a set) and `ordered` (a list) of resource maps; `gpus` as an alias), `num_nodes`,
and the release from `image_id: docker:vllm/vllm-openai:TAG` or a `vllm==X` pin in `setup`."""

from __future__ import annotations

import re
from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import Document, count, is_data, script_founds
from apron.deploy.gpus import INSTANCE_FAMILY, SKYPILOT, family
from apron.deploy.invocation import image_release
from apron.errors import BadInput

NAME = "skypilot"
TITLE = "SkyPilot task"
_TASK_KEYS = {"run", "setup", "resources", "envs", "num_nodes", "file_mounts", "workdir", "service", "secrets"}
_VERSION_PIN = re.compile(r"\bvllm(?:\[[^\]]*\])?\s*==\s*v?(\d+\.\d+\.\d+(?:(?:rc|\.post)\d+)?)")
_MEMORY_FORM = re.compile(r"^[0-9]+[GgMmTt][Bb]\+?$")


def claims(document: Document) -> bool:
    doc = document.mapping
    if doc is None or not is_data(document) or "apiVersion" in doc or "services" in doc:
        return False
    return isinstance(doc.get("run"), str) or ("resources" in doc and bool(set(doc) & (_TASK_KEYS - {"resources"})))


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    run = doc.get("run")
    if not isinstance(run, str):
        raise BadInput(f"{document.name}: SkyPilot field 'run' must be the script that starts vLLM")
    resources = doc.get("resources") or {}
    if not isinstance(resources, dict):
        raise BadInput(f"{document.name}: SkyPilot field 'resources' must be a mapping")
    choice = accelerator_choice(resources, document.name)
    nodes = count(doc.get("num_nodes") or 1, f"{document.name}: num_nodes")
    envs = _envs(doc, document.name)
    known = {k: v for k, v in envs.items() if v is not None}
    if choice.count is not None and not isinstance(choice.count, float):
        known.setdefault("SKYPILOT_NUM_GPUS_PER_NODE", str(choice.count))
    known.setdefault("SKYPILOT_NUM_NODES", str(nodes))
    founds = script_founds(run, "run", known)
    if not founds:
        raise BadInput(f"{document.name}: the SkyPilot task's run script never starts vLLM (no vllm serve)")
    engine = _engine(doc, resources)
    for found in founds:
        _fill(found, choice, nodes, engine, envs)
    return founds


class Choice:
    def __init__(self, gpu: str | None, gpu_count: int | float | None, where: str, note: str | None) -> None:
        self.gpu, self.count, self.where, self.note = gpu, gpu_count, where, note


def accelerator_choice(resources: dict[str, Any], where: str) -> Choice:
    """The machine Apron plans on, and what it says about the others SkyPilot may launch."""
    for key, ordered in (("ordered", True), ("any_of", False)):
        alternatives = resources.get(key)
        if isinstance(alternatives, list) and alternatives:
            options = [_accelerators({**resources, **alt}, where) for alt in alternatives if isinstance(alt, dict)]
            options = [o for o in options if o]
            if options:
                return _pick([a for o in options for a in o[:1]], f"resources.{key}", ordered or len(options) == 1)
    listed = _accelerators(resources, where)
    if not listed:
        return Choice(None, None, "resources.accelerators", _instance_note(resources))
    spec = resources.get("accelerators", resources.get("gpus"))
    field = "resources.accelerators" if "accelerators" in resources else "resources.gpus"
    return _pick(listed, field, not isinstance(spec, dict) or len(listed) == 1)


def _pick(listed: list[tuple[str, int | float]], where: str, ordered: bool) -> Choice:
    name, number = listed[0]
    if len(listed) == 1:
        return Choice(name, number, where, None)
    others = ", ".join(f"{n}:{c}" for n, c in listed[1:])
    if ordered:
        note = f"SkyPilot tries {name}:{number} first, then {others}: planned on the first (give --gpu for another)"
    else:
        note = (
            f"SkyPilot may launch any of {name}:{number}, {others} (no order; the cheapest it finds): planned on "
            f"{name}:{number}, the first written; the choice is yours (--gpu)"
        )
    return Choice(name, number, where, note)


def _accelerators(resources: dict[str, Any], where: str) -> list[tuple[str, int | float]]:
    """(name, count) in the order written, as Resources.from_yaml_config reads `accelerators`."""
    spec = resources.get("accelerators", resources.get("gpus"))
    if spec is None:
        return []
    if isinstance(spec, str):
        spec = spec.strip()
        if spec.startswith("{") and spec.endswith("}"):  # a quoted set or map
            items = [s.strip() for s in spec[1:-1].split(",") if s.strip()]
        elif spec.startswith("[") and spec.endswith("]"):
            items = [s.strip() for s in spec[1:-1].split(",") if s.strip()]
        else:
            items = [spec]
    elif isinstance(spec, dict):
        items = [f"{k}:{v}" if v is not None else str(k) for k, v in spec.items()]
    elif isinstance(spec, list):
        items = [str(s) for s in spec]
    else:
        raise BadInput(f"{where}: resources.accelerators must be NAME:COUNT, a map, a list or a set")
    return [_one(item.replace(": ", ":"), where) for item in items]


def _one(text: str, where: str) -> tuple[str, int | float]:
    """NAME or NAME:COUNT (Resources._set_accelerators: a float count that is whole is an int)."""
    name, sep, number = text.partition(":")
    if _MEMORY_FORM.match(name) or _MEMORY_FORM.match(number.partition(":")[0]):
        raise BadInput(
            f"{where}: resources.accelerators {text!r} names GPUs by memory, so SkyPilot picks the type; "
            "give --gpu for the one to plan"
        )
    if not sep:
        return name.strip(), 1
    try:
        value = float(number)
    except ValueError:
        raise BadInput(f"{where}: resources.accelerators {text!r}: the count must be a number") from None
    if value <= 0:
        raise BadInput(f"{where}: resources.accelerators {text!r}: the count must be positive")
    return name.strip(), int(value) if value.is_integer() else value


def _instance_note(resources: dict[str, Any]) -> str | None:
    instance = resources.get("instance_type")
    if not instance:
        return None
    gpu = INSTANCE_FAMILY.get(family(str(instance)))
    return f"resources.instance_type {instance} has {gpu}" if gpu else None


def _envs(doc: dict[str, Any], where: str) -> dict[str, str | None]:
    envs = doc.get("envs") or {}
    if not isinstance(envs, dict):
        raise BadInput(f"{where}: SkyPilot field 'envs' must be a mapping")
    return {str(k): None if v is None else str(v) for k, v in envs.items()}


def _engine(doc: dict[str, Any], resources: dict[str, Any]) -> Sourced | None:
    image = str(resources.get("image_id") or "").removeprefix("docker:")
    pinned = image_release(image, "resources.image_id") if image else None
    if pinned:
        return pinned
    match = _VERSION_PIN.search(str(doc.get("setup") or ""))
    return Sourced(match.group(1), "setup") if match else None


def _fill(found: Found, choice: Choice, nodes: int | None, engine: Sourced | None, envs: dict[str, str | None]) -> None:
    if choice.gpu is not None:
        found.gpu = Sourced(choice.gpu, choice.where)
        found.gpu_name = SKYPILOT.get(choice.gpu) or SKYPILOT.get(choice.gpu.upper())
    if isinstance(choice.count, float):
        found.not_planned.append(f"a fraction of a GPU ({choice.gpu}:{choice.count}): the plan is for a whole one")
    elif choice.count is not None:
        found.gpu_count = Sourced(choice.count, choice.where)
    if choice.note:
        found.notes.append(choice.note)
    if nodes and nodes > 1:
        found.num_nodes = Sourced(nodes, "num_nodes")
        found.not_planned.append(f"{nodes} nodes (num_nodes): the plan is for one node")
    found.engine = found.engine or engine
    given = [f"{k} (envs, no value: set with --env at launch)" for k, v in envs.items() if v is None]
    if given:
        found.notes.append("set outside the file: " + ", ".join(given))
    found.env = [(k, v, _env_where(k, w, envs), u) for k, v, w, u in found.env]


def _env_where(name: str, where: str, envs: dict[str, str | None]) -> str:
    if not where.endswith("environment"):
        return where
    return f"envs.{name}" if name in envs else "set by SkyPilot (from resources and num_nodes)"
