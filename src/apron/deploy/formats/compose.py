"""A Docker Compose file: each service whose `command` (a string, split as Compose splits it, or a
list) starts vLLM, or that runs the vllm/vllm-openai image (its entry point is `vllm serve`, so
`command` is the arguments). Interpolation (`${VAR}`, `${VAR:-default}`, `${VAR-default}`, `$$`) is
resolved from the `.env` file beside the compose file, as Compose does; what only the shell would set
is reported unresolved. GPUs: `deploy.resources.reservations.devices[]` (`count`, a number or
`all`, or `device_ids`), or the service's `gpus:`."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from apron.deploy.candidate import Found, Sourced
from apron.deploy.formats.base import Document, entries, found_from, is_data, mapping, sourced_count
from apron.deploy.invocation import Invocation, find_invocation, image_release, is_vllm_image
from apron.deploy.serve_args import Arg
from apron.errors import BadInput

NAME = "compose"
TITLE = "Docker Compose file"
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_]\w*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_]\w*)")


def claims(document: Document) -> bool:
    doc = document.mapping
    services = doc.get("services") if doc else None
    return (
        is_data(document)
        and isinstance(services, dict)
        and any(isinstance(s, dict) and ("image" in s or "build" in s) for s in services.values())
    )


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    dotenv = _dotenv(document.path)
    founds = []
    for name, service in mapping(doc.get("services"), "services").items():
        if isinstance(service, dict):
            found = _service(str(name), service, dotenv, document.name)
            if found is not None:
                founds.append(found)
    if not founds:
        raise BadInput(f"{document.name}: a Docker Compose file, but no service starts vLLM")
    return founds


def _service(name: str, service: dict[str, Any], dotenv: dict[str, str], file: str) -> Found | None:
    at = f"services.{name}"
    image = _interpolate(str(service.get("image") or ""), dotenv)[0]
    words = _words(service.get("entrypoint"), f"{at}.entrypoint", dotenv, file)
    command = _words(service.get("command"), f"{at}.command", dotenv, file)
    invocation: Invocation | None = find_invocation(words + command)
    if invocation is None and not words and is_vllm_image(image):
        invocation = Invocation(f"the {image} image's entry point (vllm serve)", command)
    if invocation is None:
        return None
    env = _environment(service.get("environment"), f"{at}.environment", dotenv)
    found = found_from(invocation, f"{at}.command", env)
    found.name = name
    found.engine = found.engine or image_release(image, f"{at}.image")
    gpus = _gpus(service, at)
    if gpus is not None:
        found.gpu_count = gpus
    return found


def _words(value: Any, where: str, dotenv: dict[str, str], file: str) -> list[Arg]:
    if value is None:
        return []
    if isinstance(value, str):
        text, missing = _interpolate(value, dotenv)
        try:
            return [Arg(w, where, tuple(m for m in missing if m in w)) for w in shlex.split(text)]
        except ValueError as exc:
            raise BadInput(f"{file}: {where}: cannot split it into words ({exc})") from None
    if isinstance(value, list):
        out = []
        for index, item in enumerate(value):
            text, missing = _interpolate(str(item), dotenv)
            out.append(Arg(text, f"{where}[{index}]", missing))
        return out
    raise BadInput(f"{file}: {where} must be a string or a list")


def _interpolate(text: str, env: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """Compose's interpolation; the unresolved variables are returned with the text."""
    missing: list[str] = []

    def value(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        op, default = match.group(2), match.group(3)
        if name in env and not (op and op.startswith(":") and env[name] == ""):
            return env[name]
        if op in (":-", "-"):
            return default or ""
        missing.append(match.group(0))
        return match.group(0)

    return _VARIABLE.sub(value, text), tuple(missing)


def _environment(value: Any, where: str, dotenv: dict[str, str]) -> list[tuple[str, str, str, bool]]:
    items: list[tuple[str, str | None, str]] = []
    if isinstance(value, dict):
        items = [(str(k), None if v is None else str(v), f"{where}.{k}") for k, v in value.items()]
    elif isinstance(value, list):
        for index, entry in enumerate(value):
            key, sep, given = str(entry).partition("=")
            items.append((key, given if sep else None, f"{where}[{index}]"))
    out: list[tuple[str, str, str, bool]] = []
    for key, val, at in items:
        if val is None:  # `- HF_TOKEN`: taken from the shell that runs compose
            out.append((key, f"${key}", at, True))
        else:
            text, missing = _interpolate(val, dotenv)
            out.append((key, text, at, bool(missing)))
    return out


def _gpus(service: dict[str, Any], at: str) -> Sourced | None:
    deploy = mapping(service.get("deploy"), f"{at}.deploy")
    reservations = mapping(mapping(deploy.get("resources"), f"{at}.deploy.resources").get("reservations"), at)
    devices = entries(reservations.get("devices"), f"{at}.deploy.resources.reservations.devices")
    for index, device in enumerate(devices):
        if "gpu" not in (device.get("capabilities") or ["gpu"]):
            continue
        where = f"{at}.deploy.resources.reservations.devices[{index}]"
        if device.get("device_ids"):
            return Sourced(len(device["device_ids"]), f"{where}.device_ids")
        if str(device.get("count")) == "all":
            return Sourced("all", f"{where}.count")
        if device.get("count") is not None:
            return sourced_count(device["count"], f"{where}.count")
        return Sourced("all", where)  # no count and no ids: Compose reserves every GPU
    if service.get("gpus") is not None:
        value = service["gpus"]
        return Sourced("all" if value == "all" else len(value) if isinstance(value, list) else value, f"{at}.gpus")
    return None


def _dotenv(path: Path | None) -> dict[str, str]:
    """KEY=value lines of the `.env` beside the file (Compose's default env file)."""
    if path is None or not (path.parent / ".env").is_file():
        return {}
    out = {}
    for line in (path.parent / ".env").read_text(errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            out[key.strip()] = value.strip().strip("'\"")
    return out
