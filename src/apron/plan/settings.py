"""Engine settings resolved the way the pinned vLLM release resolves them.

Each function mirrors one piece of vLLM: dtype (config/model.py _get_and_verify_dtype), max_model_len
(_get_and_verify_max_len), batch defaults (engine/arg_utils.py get_batch_defaults and
_set_default_max_num_seqs_and_batched_tokens_args), CUDA-graph capture sizes
(config/vllm.py _set_cudagraph_sizes). Defaults come from the release's facts file.
"""

from __future__ import annotations

import re

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts
from apron.errors import BadInput
from apron.frozen import field, frozen
from apron.hardware import Gpu
from apron.plan.config_schema import MAX_LEN_KEYS
from apron.plan.model_config import ModelConfig
from apron.plan.quantity import Problem
from apron.plan.result import PlanSettings

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

DTYPE_ALIASES = {
    "auto": "auto",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
MM_ENCODER_TP_MODES = ("weights", "data")  # config/multimodal.py MMEncoderTPMode
# config/model.py _FLOAT16_NOT_SUPPORTED_MODELS
FLOAT16_UNSUPPORTED = {"gemma2", "gemma3", "gemma3_text", "glm4"}
_HEADER_TO_DTYPE = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float32"}
# Rope types whose factor does not scale the derived length (config/model.py _get_and_verify_max_len).
_UNSCALED_ROPE_029 = ("su", "longrope", "llama3")
_UNSCALED_ROPE_030 = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


@frozen
class UserSettings:
    """What the user asked for; None means 'the engine's default'."""

    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    enforce_eager: bool = False
    language_model_only: bool = False
    # --limit-mm-per-prompt as (modality, count) pairs; unlisted modalities keep vLLM's 999.
    limit_mm_per_prompt: tuple[tuple[str, int], ...] = ()
    mm_encoder_tp_mode: str | None = None  # --mm-encoder-tp-mode; None is the release's default
    # The machine's host RAM, when the user gives it (--host-ram-bytes): a plan whose host tables
    # and buffers do not fit in it does not fit. Not a vLLM setting.
    host_ram_bytes: int | None = None
    # --kv-cache-memory-bytes: the KV cache size itself, instead of what the utilization leaves.
    kv_cache_memory_bytes: int | None = None
    # `vllm serve` arguments with no field of their own (--tokenizer-mode mistral, --reasoning-parser
    # X), each one string; and environment variables for the engine process (NCCL_NVLS_ENABLE=0).
    # Correction rules set these; the plan carries them into its flags and command.
    extra_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1:
            raise BadInput("--tp must be 1 or more")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise BadInput(f"--gpu-memory-utilization {self.gpu_memory_utilization} must be in (0, 1]")
        for flag, value in (
            ("--host-ram-bytes", self.host_ram_bytes),
            ("--max-model-len", self.max_model_len),
            ("--max-num-seqs", self.max_num_seqs),
            ("--max-num-batched-tokens", self.max_num_batched_tokens),
            ("--kv-cache-memory-bytes", self.kv_cache_memory_bytes),
        ):
            if value is not None and value < 1:
                raise BadInput(f"{flag} {value} must be a positive integer")
        if self.dtype not in DTYPE_ALIASES:
            raise BadInput(f"--dtype {self.dtype!r} is not one of {', '.join(DTYPE_ALIASES)}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise BadInput(f"--kv-cache-dtype {self.kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
        if self.mm_encoder_tp_mode is not None and self.mm_encoder_tp_mode not in MM_ENCODER_TP_MODES:
            raise BadInput(
                f"--mm-encoder-tp-mode {self.mm_encoder_tp_mode!r} is not one of {', '.join(MM_ENCODER_TP_MODES)}"
            )
        for modality, count in self.limit_mm_per_prompt:
            if count < 0:
                raise BadInput(f"--limit-mm-per-prompt: the count for {modality!r} must be a whole number >= 0")
        for flag in self.extra_flags:
            if not flag.startswith("--"):
                raise BadInput(f"extra flag {flag!r} must start with --")
        for name, _ in self.env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise BadInput(f"environment variable name {name!r} is not valid")

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# vLLM's arguments typed human_readable_int (engine/arg_utils.py _compute_kwargs: 0.29.0:400-411,
# 0.30.0:372-383, 0.31.0:390-401, 0.32.0:391-402, 0.33.0:397-408 - the same set and the same function,
# utils/argparse_utils.py human_readable_int, in every release), and max_model_len, typed
# human_readable_int_or_auto. Every other integer flag is a plain int. An optional one (an `int | None`
# field, arg_utils.py optional_type) reads "" and "None" as not given.
HUMAN_READABLE_FLAGS = ("--max-num-batched-tokens", "--kv-cache-memory-bytes")
HUMAN_READABLE_OR_AUTO_FLAGS = ("--max-model-len",)
OPTIONAL_FLAGS = ("--kv-cache-memory-bytes",)


def human_readable_int(text: str, flag: str = "") -> int:
    """vllm/utils/argparse_utils.py human_readable_int (0.32.0:29-71), step by step: strip; a number
    with one suffix (k/m/g/t decimal, K/M/G/T binary; decimals only with a decimal suffix, as
    int(float(number) * multiplier)); else Python's int() of the text. BadInput where vLLM's parser
    refuses the text."""
    value = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        try:
            return int(number) * _BINARY[suffix]
        except ValueError:
            raise BadInput(
                f"{flag} {text!r}: decimals are not allowed with binary suffixes like {suffix}; ".lstrip()
                + f"did you mean {number}{suffix.lower()}?"
            ) from None
    try:
        return int(value)
    except ValueError:
        raise BadInput(
            f"{flag} {text!r} is not an integer as vLLM reads it (e.g. 32768, 32k = 32,000, 32K = 32,768)".lstrip()
        ) from None


def human_readable_int_or_auto(text: str, flag: str = "") -> int:
    """utils/argparse_utils.py human_readable_int_or_auto (0.32.0:76-93): -1 or "auto" is vLLM's
    auto-fit, which Apron does not plan (it picks the length from the memory left at start-up)."""
    value = text.strip()
    if value == "-1" or value.lower() == "auto":
        raise BadInput(
            f"{flag} {text!r}: vLLM's auto-fit length is not planned; give the length to plan (e.g. 32k)".lstrip()
        )
    return human_readable_int(text, flag)


def parse_byte_size(text: str) -> int:
    """--kv-cache-memory-bytes as vLLM reads it (human_readable_int)."""
    return human_readable_int(text, "--kv-cache-memory-bytes")


def user_flags(user: UserSettings) -> list[str]:
    """The `vllm serve` arguments that carry what the user set, beyond the engine's defaults."""
    flags = []
    if user.tensor_parallel_size > 1:
        flags.append(f"--tensor-parallel-size {user.tensor_parallel_size}")
    pairs = (
        ("--max-model-len", user.max_model_len),
        ("--gpu-memory-utilization", user.gpu_memory_utilization),
        ("--max-num-batched-tokens", user.max_num_batched_tokens),
        ("--max-num-seqs", user.max_num_seqs),
        ("--kv-cache-memory-bytes", user.kv_cache_memory_bytes),
    )
    flags += [f"{flag} {value}" for flag, value in pairs if value is not None]
    if user.dtype != "auto":
        flags.append(f"--dtype {user.dtype}")
    if user.kv_cache_dtype != "auto":
        flags.append(f"--kv-cache-dtype {user.kv_cache_dtype}")
    if user.enforce_eager:
        flags.append("--enforce-eager")
    if user.language_model_only:
        flags.append("--language-model-only")
    if user.limit_mm_per_prompt:
        limits = ", ".join(f'"{modality}": {count}' for modality, count in user.limit_mm_per_prompt)
        flags.append(f"--limit-mm-per-prompt '{{{limits}}}'")
    if user.mm_encoder_tp_mode is not None:
        flags.append(f"--mm-encoder-tp-mode {user.mm_encoder_tp_mode}")
    return flags + list(user.extra_flags)


@frozen
class EngineSettings:
    tensor_parallel_size: int
    max_model_len: int
    derived_max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    dtype: str
    enforce_eager: bool
    language_model_only: bool
    cudagraph_capture_sizes: tuple[int, ...]
    user: UserSettings
    problems: tuple[Problem, ...] = ()
    # --language-model-only, or --limit-mm-per-prompt 0 for every modality of the towers: vLLM builds no
    # tower (models/interfaces.py _mark_tower_model, 0.33.0:347-400), so its weights are not loaded.
    is_tower_off: bool = False
    notes: tuple[str, ...] = field(default=())
    kv_cache_memory_bytes: int | None = None

    @property
    def uses_cudagraphs(self) -> bool:
        return bool(self.cudagraph_capture_sizes)

    def plan_settings(self) -> PlanSettings:
        """The settings as the plan document carries them (defaults resolved)."""
        return PlanSettings(
            tensor_parallel_size=self.tensor_parallel_size,
            max_model_len=self.max_model_len,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            kv_cache_dtype=self.kv_cache_dtype,
            dtype=self.dtype,
            enforce_eager=self.enforce_eager,
            language_model_only=self.language_model_only,
            limit_mm_per_prompt=tuple(self.user.limit_mm_per_prompt),
            mm_encoder_tp_mode=self.user.mm_encoder_tp_mode or "weights",
            cudagraph_capture_sizes=tuple(self.cudagraph_capture_sizes),
            extra_flags=tuple(self.user.extra_flags),
            env=tuple(self.user.env_dict.items()),
            kv_cache_memory_bytes=self.kv_cache_memory_bytes,
        )


def resolve_settings(
    checkpoint: Checkpoint, config: ModelConfig, gpu: Gpu, facts: EngineFacts, user: UserSettings
) -> EngineSettings:
    problems: list[Problem] = []
    dtype = resolve_dtype(checkpoint, config, gpu, user.dtype, problems)
    derived = derived_max_model_len(checkpoint, config, facts)
    max_model_len = user.max_model_len or derived
    notes: list[str] = []
    if user.max_model_len and user.max_model_len > derived:
        if allows_long_max_model_len(user):
            notes.append(
                f"max_model_len {user.max_model_len} is above the derived {derived}: VLLM_ALLOW_LONG_MAX_MODEL_LEN "
                "lets it through (a warning; positions past the derived length are not trained)"
            )
        else:
            problems.append(_long_max_model_len(user.max_model_len, derived, config))
    mns, mnbt = batch_defaults(gpu, facts, user, max_model_len)
    if mnbt < mns:
        problems.append(
            Problem(
                "scheduler",
                f"max_num_batched_tokens ({mnbt}) must be greater than or equal to max_num_seqs ({mns}).",
                "proven_constraint",
            )
        )
    util = user.gpu_memory_utilization or facts.defaults["gpu_memory_utilization"]
    problems += _multimodal_flag_problems(user, facts)
    # platforms/cpu.py check_and_update_config (0.29-0.33): cudagraph_capture_sizes = [] on the CPU
    graphless = user.enforce_eager or gpu.is_cpu
    sizes = () if graphless else capture_sizes(gpu, facts, mns, mnbt, _capture_ceiling(checkpoint, facts))
    return EngineSettings(
        tensor_parallel_size=user.tensor_parallel_size,
        max_model_len=max_model_len,
        derived_max_model_len=derived,
        gpu_memory_utilization=util,
        max_num_seqs=mns,
        max_num_batched_tokens=mnbt,
        kv_cache_dtype=user.kv_cache_dtype,
        dtype=dtype,
        enforce_eager=user.enforce_eager,
        language_model_only=user.language_model_only,
        cudagraph_capture_sizes=tuple(sizes),
        user=user,
        problems=tuple(problems),
        is_tower_off=user.language_model_only or _limits_turn_towers_off(config, user),
        notes=tuple(notes),
        kv_cache_memory_bytes=user.kv_cache_memory_bytes,
    )


def allows_long_max_model_len(user: UserSettings) -> bool:
    """envs.py VLLM_ALLOW_LONG_MAX_MODEL_LEN (0.29-0.33): "1" or "true", any case, after strip; then
    config/model.py _get_and_verify_max_len (0.33.0:2677) warns instead of refusing."""
    return user.env_dict.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true")


def _limits_turn_towers_off(config: ModelConfig, user: UserSettings) -> bool:
    limits = dict(user.limit_mm_per_prompt)
    modalities = ["image", "video"] + (["audio"] if config.raw.get("audio_config") else [])
    return bool(limits) and all(limits.get(m, 1) == 0 for m in modalities)


def _multimodal_flag_problems(user: UserSettings, facts: EngineFacts) -> list[Problem]:
    """engine/arg_utils.py: a release without the option refuses the flag at parse time."""
    engine_args = facts.defaults.get("engine_args") or {}
    problems = []
    # (--limit-mm-per-prompt is in every release; its default is a factory the facts do not record.)
    for flag, field_name, given in (
        ("--mm-encoder-tp-mode", "mm_encoder_tp_mode", user.mm_encoder_tp_mode is not None),
    ):
        if given and engine_args and field_name not in engine_args:
            problems.append(
                Problem(
                    "unrecognized_argument",
                    f"vllm serve: error: unrecognized arguments: {flag} (vLLM {facts.version} has no such option)",
                    "proven_constraint",
                )
            )
    return problems


def resolve_dtype(
    checkpoint: Checkpoint, config: ModelConfig, gpu: Gpu, requested: str, problems: list[Problem]
) -> str:
    """--dtype auto takes the config's dtype, downcasting float32 to the platform's first supported
    dtype (bf16 from cc 8.0, else fp16), skipping fp16 for models that refuse it."""
    model_type = config.model_type
    # platforms/cpu.py supported_dtypes: x86 and aarch64 CPUs take bf16 first, as GPUs from cc 8.0 do
    has_bf16 = gpu.is_cpu or gpu.capability_int >= 80
    supported = ["bfloat16", "float16", "float32"] if has_bf16 else ["float16", "float32"]
    supported = [d for d in supported if not (d == "float16" and model_type in FLOAT16_UNSUPPORTED)]
    wanted = DTYPE_ALIASES[requested]
    if wanted == "auto":
        declared = config.config_dtype or _header_dtype(checkpoint)
        declared = DTYPE_ALIASES.get(declared, "float32") if declared else "float32"
        dtype = supported[0] if declared == "float32" else declared
        return dtype if dtype in supported else supported[0]
    if wanted == "float16" and model_type in FLOAT16_UNSUPPORTED:
        problems.append(
            Problem(
                "dtype",
                f"The model type {model_type!r} does not support float16. Reason: "
                "Numerical instability. Please use bfloat16 or float32 instead.",
                "proven_constraint",
            )
        )
    if wanted == "bfloat16" and not has_bf16:
        problems.append(
            Problem(
                "dtype",
                "Bfloat16 is only supported on GPUs with compute capability of at "
                f"least 8.0. Your {gpu.name} GPU has compute capability "
                f"{gpu.compute_capability[0]}.{gpu.compute_capability[1]}. You can use "
                "float16 instead by explicitly setting the `dtype` flag in CLI, for "
                "example: --dtype=half.",
                "proven_constraint",
            )
        )
    return wanted


def _header_dtype(checkpoint: Checkpoint) -> str | None:
    """No dtype in the config: vLLM takes the common dtype of the safetensors parameters."""
    floats = {_HEADER_TO_DTYPE[t.dtype] for t in checkpoint.tensors if t.dtype in _HEADER_TO_DTYPE}
    if not floats:
        return None
    for candidate in ("float32", "bfloat16", "float16"):
        if candidate in floats:
            return candidate
    return None


def derived_max_model_len(checkpoint: Checkpoint, config: ModelConfig, facts: EngineFacts) -> int:
    text = config.text
    found = [text[k] for k in MAX_LEN_KEYS if text.get(k) is not None]
    derived = float(min(found)) if found else float("inf")
    if text.get("model_max_length"):
        derived = float(text["model_max_length"])
    tok_max = (checkpoint.tokenizer_config or {}).get("model_max_length")
    if isinstance(tok_max, (int, float)):
        derived = min(derived, tok_max)
    if derived == float("inf"):
        derived = 2048.0
    params = config.rope_parameters
    if params and "gemma3" not in config.model_type:
        derived = _rope_scaled(derived, params, facts)
    return int(derived)


def _rope_scaled(derived: float, params: dict[str, Any], facts: EngineFacts) -> float:
    rope_type = params.get("rope_type", "default")
    unscaled = _UNSCALED_ROPE_030 if facts.at_least("0.30.0") else _UNSCALED_ROPE_029
    if rope_type in unscaled:
        return derived
    factor = params.get("factor") or 1.0
    if rope_type == "yarn":  # 0.29 only: yarn restarts from the original length
        derived = params.get("original_max_position_embeddings", derived)
    return derived * float(factor)


def _long_max_model_len(requested: int, derived: int, config: ModelConfig) -> Problem:
    key = next((k for k in MAX_LEN_KEYS if config.text.get(k) is not None), None)
    return Problem(
        "max_model_len",
        f"User-specified max_model_len ({requested}) is greater than the derived "
        f"max_model_len ({key}={float(derived)} or model_max_length="
        f"{config.text.get('model_max_length')} in model's config.json). To allow overriding this "
        "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
        "proven_constraint",
    )


def batch_defaults(gpu: Gpu, facts: EngineFacts, user: UserSettings, max_model_len: int) -> tuple[int, int]:
    """max_num_seqs and max_num_batched_tokens for `vllm serve` (UsageContext.OPENAI_API_SERVER)."""
    scheduler = facts.defaults["scheduler"]
    if gpu.is_cpu:
        default_tokens, default_seqs = cpu_batch_defaults(user.tensor_parallel_size)
    else:
        tier = facts.batch_defaults(gpu.total_bytes, gpu.name, gpu.compute_capability, "OPENAI_API_SERVER")
        default_tokens = tier.max_num_batched_tokens if tier else scheduler["max_num_batched_tokens"]
        default_seqs = tier.max_num_seqs if tier else scheduler["max_num_seqs"]
    mnbt = user.max_num_batched_tokens or default_tokens
    mns = user.max_num_seqs or default_seqs
    if user.max_num_batched_tokens is None:
        # chunked prefill is on for generative models, so only the model-limit clamp applies
        mnbt = min(mns * max_model_len, mnbt)
    if user.max_num_seqs is None:
        mns = min(mns, mnbt)
    return mns, mnbt


def cpu_batch_defaults(world_size: int) -> tuple[int, int]:
    """engine/arg_utils.py get_batch_defaults, "cpu specific default values" (the same in 0.29-0.33):
    2048 x world_size batched tokens and 128 x world_size sequences for the API server."""
    return 2048 * world_size, 128 * world_size


def _capture_ceiling(checkpoint: Checkpoint, facts: EngineFacts) -> int | None:
    """Config hooks that set max_cudagraph_capture_size (models/config.py GptOssForCausalLMConfig: 1024)."""
    hooks = facts.data.get("config_hooks", {})
    arch = checkpoint.architectures[0] if checkpoint.architectures else ""
    if arch == "GptOssForCausalLM" and (not hooks or hooks.get(arch)):
        return 1024
    return None


def capture_sizes(
    gpu: Gpu, facts: EngineFacts, max_num_seqs: int, max_num_batched_tokens: int, ceiling: int | None = None
) -> list[int]:
    """_set_cudagraph_sizes without speculative decoding (uniform decode query length 1)."""
    rules = facts.defaults["cudagraph"]
    uniform: list[int] = []
    if ceiling is None:
        family_max = facts.cudagraph_default_max_size(gpu.compute_capability)
        ceiling = min(max_num_seqs * rules.get("max_num_seqs_multiplier", 2), family_max)
        if rules.get("adds_max_num_seqs") and max_num_seqs <= ceiling:
            uniform = [max_num_seqs]
    largest = min(max_num_batched_tokens, ceiling)
    sizes = [i for i in (1, 2, 4) if i <= largest]
    if largest >= 8:
        sizes += list(range(8, min(largest + 1, 256), 8))
    if largest >= 256:
        sizes += list(range(256, largest + 1, 16))
    if max_num_batched_tokens <= largest and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    sizes += [s for s in uniform if s <= max_num_batched_tokens]
    return sorted(set(sizes))
