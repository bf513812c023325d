"""A `vllm serve` argument list read the way the release's own parser reads it, every flag sorted:
a setting Apron plans with, a flag carried into the plan's command (parsers, tokenizer mode), a flag
with no effect on memory, a flag Apron does not plan (listed with the plan, never dropped), or a
flag the release's parser refuses (`vllm serve` stops: unrecognized arguments).

The reading mirrors FlexibleArgumentParser.parse_args (utils/argparse_utils.py 0.33.0:276-470):
`--model X` anywhere is the model; `--a_b` is `--a-b` up to the first dot; `-O3` and `-O=3` are
`--optimization-level 3`; `--x.y v` sets a field of the JSON option `--x`; `--flag=value`; a long
option may be abbreviated to a unique prefix (argparse's allow_abbrev). How many words each option
takes comes from the release's table (options.py). Integers follow human_readable_int
(utils/argparse_utils.py 0.33.0:30): k/m/g/t decimal, K/M/G/T binary, no decimals with a binary suffix.
"""

from __future__ import annotations

import json
import re
import shlex

from apron.deploy.options import Option, ReleaseOptions
from apron.frozen import field, frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# EngineArgs field -> (UserSettings field, how the value reads)
PLANNED = {
    "tensor_parallel_size": ("tensor_parallel_size", "int"),
    "max_model_len": ("max_model_len", "human_int"),
    "gpu_memory_utilization": ("gpu_memory_utilization", "float"),
    "max_num_seqs": ("max_num_seqs", "int"),
    "max_num_batched_tokens": ("max_num_batched_tokens", "human_int"),
    "kv_cache_dtype": ("kv_cache_dtype", "text"),
    "dtype": ("dtype", "text"),
    "enforce_eager": ("enforce_eager", "switch"),
    "language_model_only": ("language_model_only", "switch"),
    "kv_cache_memory_bytes": ("kv_cache_memory_bytes", "human_int"),
    "limit_mm_per_prompt": ("limit_mm_per_prompt", "limits"),
    "mm_encoder_tp_mode": ("mm_encoder_tp_mode", "text"),
}
# The planner and the rules know these; the plan carries them into its command.
CARRIED = {"tokenizer_mode", "reasoning_parser", "tool_call_parser", "enable_auto_tool_choice"}
# How the server is reached, named, logged or secured: no effect on GPU memory.
NO_MEMORY_EFFECT = {
    "host",
    "port",
    "uds",
    "served_model_name",
    "api_key",
    "trust_remote_code",
    "download_dir",
    "hf_token",
    "disable_log_requests",
    "enable_log_requests",
    "disable_log_stats",
    "enable_log_outputs",
    "uvicorn_log_level",
    "disable_uvicorn_access_log",
    "log_config_file",
    "max_log_len",
    "root_path",
    "allowed_origins",
    "allowed_methods",
    "allowed_headers",
    "allow_credentials",
    "response_role",
    "chat_template",
    "chat_template_content_format",
    "disable_fastapi_docs",
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_ca_certs",
    "ssl_cert_reqs",
    "enable_ssl_refresh",
    "middleware",
    "return_tokens_as_token_ids",
    "enable_request_id_headers",
    "enable_server_load_tracking",
    "enable_force_include_usage",
    "enable_prompt_tokens_details",
    "enable_tokenizer_info_endpoint",
    "seed",
    "generation_config",
    "override_generation_config",
    "h11_max_incomplete_event_size",
    "h11_max_header_count",
}
# The flags how the server is reached: a boot sets its own (boot/command.py), so these give way there.
REACH = {"host", "port", "uds", "served_model_name", "api_key", "root_path", "ssl_keyfile", "ssl_certfile"}
REACH |= {"ssl_ca_certs", "ssl_cert_reqs", "enable_ssl_refresh"}
# Memory-relevant flags whose effect is not planned, with the reason shown beside them.
WHY_NOT_PLANNED = {
    "pipeline_parallel_size": "pipeline parallelism: the plan puts every layer on each GPU",
    "data_parallel_size": "data parallelism: each replica is planned alone",
    "hf_overrides": "changes the model's config after Apron read it",
    "quantization": "the quantization Apron plans is the checkpoint's own",
    "cpu_offload_gb": "offloads weights to host memory",
    "speculative_config": "a draft model and its KV cache",
    "enable_lora": "LoRA adapters and their buffers",
    "block_size": "the KV block size is the attention backend's choice in the plan",
    "kv_transfer_config": "a KV connector's buffers",
    "compilation_config": "changes the CUDA-graph capture sizes or mode",
    "optimization_level": "changes the CUDA-graph capture sizes or mode",
    "attention_backend": "the plan uses the backend vLLM picks by default",
    "max_cudagraph_capture_size": "changes the CUDA-graph capture sizes",
    "cudagraph_capture_sizes": "changes the CUDA-graph capture sizes",
    "enable_expert_parallel": "expert parallelism lays the experts out differently",
    "distributed_executor_backend": "Ray or multiprocessing workers",
    "config": "reads more flags from another file",
}


@frozen
class Arg:
    """One word of the argument list and where in the file it came from."""

    text: str
    where: str
    unresolved: tuple[str, ...] = ()
    written: str | None = None  # as the file wrote it, where the parser reads it otherwise ('' : no word)


@frozen
class Flag:
    words: tuple[str, ...]  # as written (after the file's own substitutions)
    where: str
    use: str  # planned | carried | no_memory_effect | not_planned | refused
    dest: str | None = None  # the field it sets, where the release has the option
    option: str | None = None  # the release's long option for it (the name a plan uses)
    why: str | None = None  # for not_planned and refused

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def shell(self) -> str:
        return " ".join(shlex.quote(w) for w in self.words)

    def to_json(self) -> dict[str, Any]:
        return {"flag": self.text, "where": self.where, "use": self.use, "field": self.dest, "why": self.why}


@frozen
class ServeArgs:
    model: Arg | None
    revision: Arg | None
    flags: tuple[Flag, ...]
    settings: dict[str, Any] = field(default_factory=dict)  # UserSettings fields
    release: str = ""  # the release whose parser the reading follows

    def of(self, use: str) -> list[str]:
        return [f.text for f in self.flags if f.use == use]

    @property
    def dests(self) -> set[str]:
        return {f.dest for f in self.flags if f.dest}


def parse_serve_args(argv: list[Arg], options: ReleaseOptions) -> ServeArgs:
    """argv: everything after `vllm serve` (or the api_server module)."""
    words = [w for a in argv for w in _normalise(a)]
    model: Arg | None = None
    revision: Arg | None = None
    flags: list[Flag] = []
    settings: dict[str, Any] = {}
    i = 0
    while i < len(words):
        arg = words[i]
        if not arg.text.startswith("-") or _is_number(arg.text):
            if model is None:
                model = arg
            elif arg.unresolved:  # "$@": whatever the script's caller passes on
                why = f"{', '.join(arg.unresolved)}: the arguments the script's caller passes, not in the file"
                flags.append(Flag((arg.text,), arg.where, "not_planned", why=why))
            else:
                flags.append(Flag((arg.text,), arg.where, "refused", why=_refusal(options, "an extra positional")))
            i += 1
            continue
        taken, i = _take(words, i, options)
        name, values = taken[0].text.partition("=")[0], [w.text for w in taken[1:]]
        option = options.find(name)
        inline = taken[0].text.partition("=")[2] if "=" in taken[0].text else None
        if option is not None and option.dest == "model" and (inline or values):
            model = Arg(inline or values[0], taken[0].where, taken[-1].unresolved)
            continue
        if option is not None and option.dest == "revision" and (inline or values):
            revision = Arg(inline or values[0], taken[0].where, taken[-1].unresolved)
        flags.append(_sort(taken, option, inline, values, options, settings))
    return ServeArgs(model, revision, tuple(flags), settings, options.version)


def _normalise(arg: Arg) -> list[Arg]:
    """`--a_b` -> `--a-b` (before the first dot), `-O3` -> `--optimization-level 3`."""
    text = arg.text
    if text.startswith("--"):
        key, sep, value = text.partition("=")
        head, dot, tail = key[2:].partition(".")
        read = "--" + head.replace("_", "-") + dot + tail + sep + value
        return [Arg(read, arg.where, arg.unresolved, None if read == text else text)]
    if text.startswith("-O") and text != "-O":
        level = text[3:] if text[2:3] == "=" else text[2:]
        return [Arg("--optimization-level", arg.where, (), text), Arg(level, arg.where, arg.unresolved, "")]
    return [arg]


def _take(words: list[Arg], i: int, options: ReleaseOptions) -> tuple[list[Arg], int]:
    """The option at i and the words it consumes, by the option's arity in the release's parser."""
    word = words[i]
    name = word.text.partition("=")[0]
    option = options.find(name.partition(".")[0])
    if "=" in word.text:
        return [word], i + 1
    nargs = 1 if option is None or "." in name else option.nargs
    j = i + 1
    if nargs == 1:
        if j < len(words) and (not words[j].text.startswith("-") or _is_number(words[j].text)):
            j += 1
    elif nargs in ("+", "*"):
        while j < len(words) and not words[j].text.startswith("-"):
            j += 1
    elif nargs == "?":
        if j < len(words) and not words[j].text.startswith("-"):
            j += 1
    elif isinstance(nargs, int) and nargs > 1:
        j = min(len(words), i + 1 + nargs)
    return words[i:j], j


def _sort(
    taken: list[Arg],
    option: Option | None,
    inline: str | None,
    values: list[str],
    options: ReleaseOptions,
    settings: dict[str, Any],
) -> Flag:
    words = tuple(w.text if w.written is None else w.written for w in taken if w.written != "")
    where = taken[0].where
    unresolved = tuple(u for w in taken for u in w.unresolved)
    name = taken[0].text.partition("=")[0]
    if option is None:
        base = options.find(name.partition(".")[0]) if "." in name else None
        if base is not None:  # --compilation-config.mode 3: a field of a JSON option
            return Flag(words, where, "not_planned", base.dest, _long(options, base), _why(base.dest))
        close = options.matches(name)
        return Flag(words, where, "refused", why=_refusal(options, name, close))
    dest, long_name = option.dest, _long(options, option)
    if option.nargs == 1 and inline is None and not values:
        return Flag(
            words, where, "refused", dest, long_name, f"vllm serve {options.version} wants a value after {name}"
        )
    if dest in NO_MEMORY_EFFECT:  # whatever its value
        return Flag(words, where, "no_memory_effect", dest, long_name)
    if unresolved:
        return Flag(words, where, "not_planned", dest, long_name, f"{', '.join(unresolved)} is set outside the file")
    value = inline if inline is not None else (" ".join(values) if values else None)
    if dest in PLANNED:
        parsed = _value(dest, option, value)
        if parsed is _NOT_READ:
            return Flag(words, where, "not_planned", dest, long_name, f"{value!r} is not a value Apron plans with")
        settings[PLANNED[dest][0]] = parsed
        return Flag(words, where, "planned", dest, long_name)
    if dest in CARRIED:
        return Flag(words, where, "carried", dest, long_name)
    if dest == "revision":
        return Flag(words, where, "planned", dest, long_name)
    if option.is_default:
        return Flag(words, where, "no_memory_effect", dest, long_name, f"the default of vllm serve {options.version}")
    return Flag(words, where, "not_planned", dest, long_name, _why(dest))


_NOT_READ = object()


def _value(dest: str, option: Option, value: str | None) -> Any:
    kind = PLANNED[dest][1]
    if kind == "switch":
        return bool(option.sets) if option.nargs == 0 else (value or "true").lower() not in ("false", "0")
    if value is None:
        return _NOT_READ
    if kind == "int":
        return int(value) if re.fullmatch(r"\d+", value.strip()) else _NOT_READ
    if kind == "human_int":
        number = human_readable_int(value)
        return _NOT_READ if number is None else number
    if kind == "float":
        return float(value) if re.fullmatch(r"\d*\.?\d+", value.strip()) else _NOT_READ
    if kind == "limits":
        return _limits(value)
    return value


def human_readable_int(text: str) -> int | None:
    """utils/argparse_utils.py human_readable_int (0.33.0:30); None where vLLM would refuse or where
    the value is not a number of tokens ('auto', -1: fit the length to memory)."""
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
        if "." in number:
            return None
        return int(number) << (10 * ("KMGT".index(suffix) + 1))
    return int(text) if re.fullmatch(r"\d+", text) and int(text) > 0 else None


def _limits(value: str) -> Any:
    """--limit-mm-per-prompt as JSON {"image": 2}; per-modality options ({"image": {"count": 1, ...}})
    are not planned."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError:
        return _NOT_READ
    if not isinstance(data, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in data.values()):
        return _NOT_READ
    return tuple(sorted((str(k), int(v)) for k, v in data.items()))


def _long(options: ReleaseOptions, option: Option) -> str | None:
    return options.long_name(option.dest)


def _why(dest: str) -> str:
    return WHY_NOT_PLANNED.get(dest, "its effect on memory is not modelled")


def _refusal(options: ReleaseOptions, what: str, close: list[str] | None = None) -> str:
    if what == "an extra positional":
        return f"vllm serve {options.version} takes one positional argument, the model (unrecognized arguments)"
    if close:
        return f"{what} is ambiguous in vllm serve {options.version} (it stops): {', '.join(close[:4])}"
    return f"vllm serve {options.version} has no option {what} (it stops: unrecognized arguments)"


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"-\d+(\.\d+)?", text))
