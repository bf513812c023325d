"""Read a `vllm serve` argument list the way vLLM's parser reads it, sorting every flag into: a setting
Apron plans with, a flag Apron carries into the plan's command (parsers, tokenizer mode), a flag that
does not change memory, and a flag Apron does not understand (listed, never dropped silently).

Names follow vllm/engine/arg_utils.py (0.33.0): FlexibleArgumentParser takes `--a_b` for `--a-b` and
`--flag=value`; bool fields take `--x` / `--no-x` (BooleanOptionalAction); max_model_len and
max_num_batched_tokens take human-readable integers (utils/argparse_utils.py human_readable_int).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from apron.errors import BadInput

# flag -> (UserSettings field, parser)
_INT_SETTINGS = {
    "--tensor-parallel-size": "tensor_parallel_size",
    "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
}
_FLOAT_SETTINGS = {"--gpu-memory-utilization": "gpu_memory_utilization"}
_TEXT_SETTINGS = {"--kv-cache-dtype": "kv_cache_dtype", "--dtype": "dtype"}
_BOOL_SETTINGS = {"--enforce-eager": "enforce_eager", "--language-model-only": "language_model_only"}
_ALIASES = {"-tp": "--tensor-parallel-size"}
# Flags the plan carries into its `vllm serve` command (the planner and the rules know them).
CARRIED = ("--tokenizer-mode", "--reasoning-parser", "--tool-call-parser", "--enable-auto-tool-choice")
# Flags that change how the server is reached or logs, not GPU memory.
NO_MEMORY_EFFECT = (
    "--host",
    "--port",
    "--served-model-name",
    "--api-key",
    "--trust-remote-code",
    "--download-dir",
    "--disable-log-requests",
    "--enable-log-requests",
    "--disable-log-stats",
    "--uvicorn-log-level",
    "--seed",
    "--root-path",
    "--allowed-origins",
    "--response-role",
    "--chat-template",
    "--disable-fastapi-docs",
    "--max-log-len",
    "--ssl-keyfile",
    "--ssl-certfile",
)
_BOOLEAN_WORDS = {"--enable-auto-tool-choice", "--trust-remote-code", "--disable-log-requests"}
_BOOLEAN_WORDS |= {"--enable-log-requests", "--disable-log-stats", "--disable-fastapi-docs"}


@dataclass
class ServeArgs:
    model: str | None = None
    revision: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # UserSettings fields
    understood: list[str] = field(default_factory=list)
    carried: list[str] = field(default_factory=list)
    no_memory_effect: list[str] = field(default_factory=list)
    not_understood: list[str] = field(default_factory=list)


def parse_serve_args(argv: list[str], where: str) -> ServeArgs:
    """argv: everything after `vllm serve` (or the api_server module)."""
    out = ServeArgs()
    i = 0
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-"):
            if out.model is None:
                out.model = word
            else:
                out.not_understood.append(word)
            i += 1
            continue
        name, value, i = _take(argv, i)
        _sort(out, name, value, where)
    if not out.model:
        raise BadInput(f"{where}: the vllm serve command names no model (give it as the first argument or --model)")
    return out


def _take(argv: list[str], i: int) -> tuple[str, str | None, int]:
    word = argv[i]
    name, sep, inline = word.partition("=")
    if name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    name = _ALIASES.get(name, name)
    if sep:
        return name, inline, i + 1
    is_flag_only = name in _BOOLEAN_WORDS or name in _BOOL_SETTINGS or name.startswith("--no-")
    if not is_flag_only and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
        return name, argv[i + 1], i + 2
    return name, None, i + 1


def _sort(out: ServeArgs, name: str, value: str | None, where: str) -> None:
    shown = name if value is None else f"{name} {value}"
    if name == "--model" and value:
        out.model = value
    elif name == "--revision" and value:
        out.revision = value
        out.understood.append(shown)
    elif name in _INT_SETTINGS and value is not None:
        number = _int(value)
        if number is None:
            out.not_understood.append(shown)
            return
        out.settings[_INT_SETTINGS[name]] = number
        out.understood.append(shown)
    elif name in _FLOAT_SETTINGS and value is not None and re.fullmatch(r"\d*\.?\d+", value):
        out.settings[_FLOAT_SETTINGS[name]] = float(value)
        out.understood.append(shown)
    elif name in _TEXT_SETTINGS and value is not None:
        out.settings[_TEXT_SETTINGS[name]] = value
        out.understood.append(shown)
    elif name in _BOOL_SETTINGS or (name.startswith("--no-") and "--" + name[5:] in _BOOL_SETTINGS):
        key = name if name in _BOOL_SETTINGS else "--" + name[5:]
        out.settings[_BOOL_SETTINGS[key]] = name in _BOOL_SETTINGS and value not in ("false", "False", "0")
        out.understood.append(shown)
    elif name in CARRIED:
        out.carried.append(shown)
    elif name in NO_MEMORY_EFFECT:
        out.no_memory_effect.append(shown)
    else:
        out.not_understood.append(shown)


def _int(text: str) -> int | None:
    """utils/argparse_utils.py human_readable_int: k/m/g/t decimal, K/M/G/T binary; 'auto' is not a number."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * int(10 ** (3 * "kmgt".index(suffix) + 3)))
        if "." in number:
            return None
        return int(number) * int(2 ** (10 * "KMGT".index(suffix) + 10))
    return int(text) if re.fullmatch(r"\d+", text.strip()) else None
