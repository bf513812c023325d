"""`apron example tiny`: a tiny random-weight checkpoint of a real architecture, written with the standard
library only (config.json, generation_config.json, tokenizer files, model.safetensors), for trying the
whole loop without a GPU or the Hub and for the tests.

The weights are random: the model boots, answers with tokens and serves, but what it says means
nothing. The safetensors metadata says so (RANDOM_WEIGHTS_KEY), so a boot skips the answer checks
instead of failing them. Sizes are chosen for vLLM's CPU build: a head size of 64 (which its
attention kernels take), bf16, a few MiB.
"""

from __future__ import annotations

import json
import random
import statistics
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apron.checkpoint.model import RANDOM_WEIGHTS_KEY
from apron.checkpoint.tiny_tokenizer import BOS, EOS, PAD, TinyTokenizer, build_tokenizer
from apron.errors import BadInput
from apron.frozen import frozen, replace

TRANSFORMERS_VERSION = "5.19.0"
SCALE_FACTOR = 2  # Idefics3's pixel shuffle: (2 x 2) patches -> one image token

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@frozen
class TinySpec:
    """What to build. The defaults: 8 layers of 128 wide, 2 query heads of 64 and 1 KV head, a 4,096
    token context; 2,048 KV bytes a token for the attention families."""

    family: str = "llama"
    num_layers: int = 8
    hidden_size: int = 128
    num_heads: int = 2
    num_kv_heads: int = 1
    intermediate_size: int = 256
    max_positions: int = 4096
    model_max_length: int | None = None  # tokenizer_config's (vLLM caps the derived length with it)
    dtype: str = "bfloat16"
    seed: int = 0
    tools: bool = False  # Hermes-style <tool_call> tokens and a template that renders tools
    think: bool = False  # <think> </think> as single tokens, for vLLM's reasoning parsers
    architectures: str | None = None  # write this name instead (e.g. to provoke "not supported")
    image_size: int = 64  # idefics3: the vision tower's input and patches
    patch_size: int = 8
    vision_hidden_size: int = 64

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


@frozen
class Family:
    architecture: str
    model_type: str
    about: str
    config: Callable[[TinySpec, int, TinyTokenizer], dict[str, Any]]
    tensors: Callable[[TinySpec, int], dict[str, tuple[int, ...]]]
    is_multimodal: bool = False


@frozen
class TinyModel:
    folder: Path
    family: str
    architecture: str
    num_parameters: int
    vocab_size: int
    kv_bytes_per_token: int | None
    files: tuple[str, ...]
    total_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "family": self.family,
            "architecture": self.architecture,
            "num_parameters": self.num_parameters,
            "vocab_size": self.vocab_size,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "files": list(self.files),
            "total_bytes": self.total_bytes,
            "random_weights": True,
        }


# ---- configs, as transformers 5.19 writes them (plus the legacy keys 4.x reads) --------------------


def _ids(tokenizer: TinyTokenizer) -> dict[str, int]:
    return {
        "bos_token_id": tokenizer.id_of(BOS),
        "eos_token_id": tokenizer.id_of(EOS),
        "pad_token_id": tokenizer.id_of(PAD),
    }


def _decoder_config(spec: TinySpec, vocab: int, tokenizer: TinyTokenizer) -> dict[str, Any]:
    return {
        **_ids(tokenizer),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "dtype": spec.dtype,
        "head_dim": spec.head_dim,
        "hidden_size": spec.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": spec.intermediate_size,
        "max_position_embeddings": spec.max_positions,
        "num_attention_heads": spec.num_heads,
        "num_hidden_layers": spec.num_layers,
        "num_key_value_heads": spec.num_kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": spec.dtype,
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": vocab,
    }


def llama_config(spec: TinySpec, vocab: int, tokenizer: TinyTokenizer) -> dict[str, Any]:
    extra = {"hidden_act": "silu", "mlp_bias": False, "model_type": "llama", "pretraining_tp": 1}
    return {"architectures": ["LlamaForCausalLM"], **_decoder_config(spec, vocab, tokenizer), **extra}


def qwen3_config(spec: TinySpec, vocab: int, tokenizer: TinyTokenizer) -> dict[str, Any]:
    extra = {
        "hidden_act": "silu",
        "max_window_layers": spec.num_layers,
        "model_type": "qwen3",
        "sliding_window": None,
        "use_sliding_window": False,
    }
    return {"architectures": ["Qwen3ForCausalLM"], **_decoder_config(spec, vocab, tokenizer), **extra}


def gemma2_config(spec: TinySpec, vocab: int, tokenizer: TinyTokenizer) -> dict[str, Any]:
    extra = {
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
        "hidden_activation": "gelu_pytorch_tanh",
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(spec.num_layers)],
        "model_type": "gemma2",
        "query_pre_attn_scalar": spec.head_dim,
        "sliding_window": min(512, spec.max_positions),
    }
    return {"architectures": ["Gemma2ForCausalLM"], **_decoder_config(spec, vocab, tokenizer), **extra}


def mamba_config(spec: TinySpec, vocab: int, tokenizer: TinyTokenizer) -> dict[str, Any]:
    """MambaForCausalLM as state-spaces/mamba-*-hf configure it, scaled down."""
    return {
        "architectures": ["MambaForCausalLM"],
        **_ids(tokenizer),
        "conv_kernel": 4,
        "dtype": spec.dtype,
        "expand": 2,
        "hidden_act": "silu",
        "hidden_size": spec.hidden_size,
        "initializer_range": 0.1,
        "intermediate_size": 2 * spec.hidden_size,
        "layer_norm_epsilon": 1e-05,
        "model_type": "mamba",
        "num_hidden_layers": spec.num_layers,
        "residual_in_fp32": True,
        "rms_norm": True,
        "state_size": 16,
        "tie_word_embeddings": True,
        "time_step_rank": max(1, spec.hidden_size // 16),
        "torch_dtype": spec.dtype,
        "transformers_version": TRANSFORMERS_VERSION,
        "use_bias": False,
        "use_cache": True,
        "use_conv_bias": True,
        "vocab_size": vocab,
    }


def idefics3_config(spec: TinySpec, vocab: int, tokenizer: TinyTokenizer) -> dict[str, Any]:
    """Idefics3ForConditionalGeneration (SmolVLM's architecture): a Llama text stack, a SigLIP-style
    tower, and the connector that pixel-shuffles SCALE_FACTOR^2 patches into one token."""
    text = llama_config(spec, vocab, tokenizer)
    text.pop("architectures")
    vision = {
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": spec.vision_hidden_size,
        "image_size": spec.image_size,
        "intermediate_size": 2 * spec.vision_hidden_size,
        "layer_norm_eps": 1e-06,
        "model_type": "idefics3_vision",
        "num_attention_heads": 2,
        "num_channels": 3,
        "num_hidden_layers": 2,
        "patch_size": spec.patch_size,
    }
    return {
        "architectures": ["Idefics3ForConditionalGeneration"],
        "dtype": spec.dtype,
        "image_token_id": tokenizer.id_of("<image>"),
        "model_type": "idefics3",
        "scale_factor": SCALE_FACTOR,
        "text_config": text,
        "tie_word_embeddings": True,
        "torch_dtype": spec.dtype,
        "transformers_version": TRANSFORMERS_VERSION,
        "vision_config": vision,
    }


# ---- tensors: Hugging Face names and shapes (tied embeddings are stored once) -----------------------


def _attention_tensors(spec: TinySpec, prefix: str) -> dict[str, tuple[int, ...]]:
    h, q, kv = spec.hidden_size, spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    return {
        prefix + "self_attn.q_proj.weight": (q, h),
        prefix + "self_attn.k_proj.weight": (kv, h),
        prefix + "self_attn.v_proj.weight": (kv, h),
        prefix + "self_attn.o_proj.weight": (h, q),
        prefix + "mlp.gate_proj.weight": (spec.intermediate_size, h),
        prefix + "mlp.up_proj.weight": (spec.intermediate_size, h),
        prefix + "mlp.down_proj.weight": (h, spec.intermediate_size),
        prefix + "input_layernorm.weight": (h,),
        prefix + "post_attention_layernorm.weight": (h,),
    }


def llama_tensors(spec: TinySpec, vocab: int, root: str = "model.") -> dict[str, tuple[int, ...]]:
    out = {root + "embed_tokens.weight": (vocab, spec.hidden_size), root + "norm.weight": (spec.hidden_size,)}
    for layer in range(spec.num_layers):
        out.update(_attention_tensors(spec, f"{root}layers.{layer}."))
    return out


def qwen3_tensors(spec: TinySpec, vocab: int) -> dict[str, tuple[int, ...]]:
    out = llama_tensors(spec, vocab)
    for layer in range(spec.num_layers):
        out[f"model.layers.{layer}.self_attn.q_norm.weight"] = (spec.head_dim,)
        out[f"model.layers.{layer}.self_attn.k_norm.weight"] = (spec.head_dim,)
    return out


def gemma2_tensors(spec: TinySpec, vocab: int) -> dict[str, tuple[int, ...]]:
    out = llama_tensors(spec, vocab)
    for layer in range(spec.num_layers):
        out[f"model.layers.{layer}.pre_feedforward_layernorm.weight"] = (spec.hidden_size,)
        out[f"model.layers.{layer}.post_feedforward_layernorm.weight"] = (spec.hidden_size,)
    return out


def mamba_tensors(spec: TinySpec, vocab: int) -> dict[str, tuple[int, ...]]:
    h, inner, state, rank = spec.hidden_size, 2 * spec.hidden_size, 16, max(1, spec.hidden_size // 16)
    out: dict[str, tuple[int, ...]] = {"backbone.embeddings.weight": (vocab, h), "backbone.norm_f.weight": (h,)}
    for layer in range(spec.num_layers):
        p = f"backbone.layers.{layer}."
        out.update(
            {
                p + "mixer.A_log": (inner, state),
                p + "mixer.D": (inner,),
                p + "mixer.conv1d.weight": (inner, 1, 4),
                p + "mixer.conv1d.bias": (inner,),
                p + "mixer.in_proj.weight": (2 * inner, h),
                p + "mixer.out_proj.weight": (h, inner),
                p + "mixer.x_proj.weight": (rank + 2 * state, inner),
                p + "mixer.dt_proj.weight": (inner, rank),
                p + "mixer.dt_proj.bias": (inner,),
                p + "norm.weight": (h,),
            }
        )
    return out


def idefics3_tensors(spec: TinySpec, vocab: int) -> dict[str, tuple[int, ...]]:
    v, p = spec.vision_hidden_size, spec.patch_size
    out = llama_tensors(spec, vocab, "model.text_model.")
    tower = "model.vision_model."
    out[tower + "embeddings.patch_embedding.weight"] = (v, 3, p, p)
    out[tower + "embeddings.patch_embedding.bias"] = (v,)
    out[tower + "embeddings.position_embedding.weight"] = ((spec.image_size // p) ** 2, v)
    out[tower + "post_layernorm.weight"] = (v,)
    out[tower + "post_layernorm.bias"] = (v,)
    for layer in range(2):
        pre = f"{tower}encoder.layers.{layer}."
        for name, shape in (
            ("self_attn.q_proj", (v, v)),
            ("self_attn.k_proj", (v, v)),
            ("self_attn.v_proj", (v, v)),
            ("self_attn.out_proj", (v, v)),
            ("mlp.fc1", (2 * v, v)),
            ("mlp.fc2", (v, 2 * v)),
        ):
            out[pre + name + ".weight"] = shape
            out[pre + name + ".bias"] = (shape[0],)
        for norm in ("layer_norm1", "layer_norm2"):
            out[pre + norm + ".weight"] = (v,)
            out[pre + norm + ".bias"] = (v,)
    out["model.connector.modality_projection.proj.weight"] = (spec.hidden_size, v * SCALE_FACTOR**2)
    return out


FAMILIES: dict[str, Family] = {
    "llama": Family("LlamaForCausalLM", "llama", "full attention, grouped KV heads", llama_config, llama_tensors),
    "qwen3": Family("Qwen3ForCausalLM", "qwen3", "full attention with q/k norms", qwen3_config, qwen3_tensors),
    "gemma2": Family("Gemma2ForCausalLM", "gemma2", "sliding and full attention", gemma2_config, gemma2_tensors),
    "mamba": Family("MambaForCausalLM", "mamba", "state only (Mamba-1)", mamba_config, mamba_tensors),
    "idefics3": Family(
        "Idefics3ForConditionalGeneration",
        "idefics3",
        "multimodal: a vision tower and a Llama text stack",
        idefics3_config,
        idefics3_tensors,
        is_multimodal=True,
    ),
}


# ---- values ---------------------------------------------------------------------------------------


def _initial_value(name: str, family: str) -> float | None:
    """What a tensor starts as when it is not random: norms at 1 (Gemma2's at 0, it adds 1), biases
    at 0, Mamba's A_log at log(1) and D at 1 (as the Hugging Face initializers do)."""
    if name.endswith(("norm.weight", "layernorm.weight", "norm_f.weight", "layer_norm1.weight", "layer_norm2.weight")):
        return 0.0 if family == "gemma2" else 1.0
    if name.endswith((".bias", ".A_log")):
        return 0.0
    if name.endswith(".D"):
        return 1.0
    return None


_DTYPES = {"bfloat16": ("BF16", 2), "float16": ("F16", 2), "float32": ("F32", 4)}


def _encode(value: float, dtype: str) -> bytes:
    if dtype == "float32":
        return struct.pack("<f", value)
    if dtype == "float16":
        return struct.pack("<e", value)
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return struct.pack("<H", (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)  # round to nearest even


def _random_bytes(rng: random.Random, count: int, dtype: str) -> bytes:
    """COUNT values of N(0, 0.02): 256 quantiles of the normal distribution, picked by random bytes
    (one table lookup per byte of each value: fast in pure Python)."""
    quantiles = statistics.NormalDist(0.0, 0.02).inv_cdf
    values = [_encode(quantiles((i + 0.5) / 256), dtype) for i in range(256)]
    picks = rng.randbytes(count)
    size = len(values[0])
    out = bytearray(count * size)
    for position in range(size):
        table = bytes(v[position] for v in values)
        out[position::size] = picks.translate(table)
    return bytes(out)


def write_safetensors(path: Path, shapes: dict[str, tuple[int, ...]], spec: TinySpec, metadata: dict[str, str]) -> int:
    """The safetensors layout: an 8-byte little-endian header length, the JSON header (padded with
    spaces to 8 bytes), then each tensor's bytes in header order. Returns the parameter count."""
    code, width = _DTYPES[spec.dtype]
    rng = random.Random(spec.seed)
    header: dict[str, Any] = {"__metadata__": metadata}
    blobs, offset, count = [], 0, 0
    for name, shape in sorted(shapes.items()):
        size = 1
        for dim in shape:
            size *= dim
        start = _initial_value(name, spec.family)
        data = _encode(start, spec.dtype) * size if start is not None else _random_bytes(rng, size, spec.dtype)
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + size * width]}
        blobs.append(data)
        offset, count = offset + size * width, count + size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as handle:
        handle.write(len(raw).to_bytes(8, "little"))
        handle.write(raw)
        for blob in blobs:
            handle.write(blob)
    return count


# ---- the folder ----------------------------------------------------------------------------------


def write_tiny_model(folder: Path, spec: TinySpec | None = None) -> TinyModel:
    spec = spec or TinySpec()
    family = FAMILIES.get(spec.family)
    if family is None:
        raise BadInput(f"--family {spec.family!r} is not one of {', '.join(FAMILIES)}")
    if spec.hidden_size % spec.num_heads or spec.num_heads % spec.num_kv_heads:
        raise BadInput("the hidden size must divide by the heads, and the heads by the KV heads")
    if (folder / "config.json").exists() and not _is_ours(folder):
        raise BadInput(f"{folder} already holds a checkpoint not written by `apron example tiny`; give a new folder")
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(tools=spec.tools, think=spec.think, image=family.is_multimodal)
    vocab = -(-tokenizer.size // 64) * 64  # the embedding table, padded as checkpoints pad it
    config = family.config(spec, vocab, tokenizer)
    if spec.architectures:
        config["architectures"] = [spec.architectures]
    template = TOOLS_CHAT_TEMPLATE if spec.tools else CHAT_TEMPLATE
    files = {
        "config.json": dict(sorted(config.items())),
        "generation_config.json": {**_ids(tokenizer), "do_sample": False, "transformers_version": TRANSFORMERS_VERSION},
        "tokenizer.json": tokenizer.to_json(),
        "tokenizer_config.json": _tokenizer_config(spec, template, family),
        **(_processor_files(spec) if family.is_multimodal else {}),
    }
    for name, body in files.items():
        (folder / name).write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    (folder / "chat_template.jinja").write_text(template)
    metadata = {"format": "pt", RANDOM_WEIGHTS_KEY: "true", "apron.family": spec.family}
    count = write_safetensors(folder / "model.safetensors", family.tensors(spec, vocab), spec, metadata)
    names = tuple(sorted(p.name for p in folder.iterdir()))
    return TinyModel(
        folder,
        spec.family,
        config["architectures"][0],
        count,
        vocab,
        None if spec.family in ("mamba", "gemma2") else 2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * 2,
        names,
        sum((folder / n).stat().st_size for n in names),
    )


def _is_ours(folder: Path) -> bool:
    """A folder this command wrote before (its safetensors metadata says so): it may be written again."""
    path = folder / "model.safetensors"
    try:
        with open(path, "rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(min(length, 2**24)))
    except (OSError, ValueError):
        return False
    return (header.get("__metadata__") or {}).get(RANDOM_WEIGHTS_KEY) == "true"


def _tokenizer_config(spec: TinySpec, template: str, family: Family) -> dict[str, Any]:
    """What transformers 5 writes, with tokenizer_class PreTrainedTokenizerFast and the template
    embedded, so transformers 4.x reads it too."""
    config: dict[str, Any] = {
        "backend": "tokenizers",
        "bos_token": BOS,
        "chat_template": template,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOS,
        "model_max_length": spec.model_max_length or spec.max_positions,
        "pad_token": PAD,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    if family.is_multimodal:
        config["processor_class"] = "Idefics3Processor"
    return config


def _processor_files(spec: TinySpec) -> dict[str, Any]:
    """preprocessor_config.json / processor_config.json as SmolVLM repos ship them, one tile per image."""
    image_seq_len = (spec.image_size // spec.patch_size) ** 2 // SCALE_FACTOR**2
    return {
        "preprocessor_config.json": {
            "do_convert_rgb": True,
            "do_image_splitting": False,
            "do_normalize": True,
            "do_pad": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_processor_type": "Idefics3ImageProcessor",
            "image_std": [0.5, 0.5, 0.5],
            "max_image_size": {"longest_edge": spec.image_size},
            "processor_class": "Idefics3Processor",
            "resample": 1,
            "rescale_factor": 0.00392156862745098,
            "size": {"longest_edge": spec.image_size},
        },
        "processor_config.json": {"image_seq_len": image_seq_len, "processor_class": "Idefics3Processor"},
    }


def spec_with(spec: TinySpec, **changes: Any) -> TinySpec:
    return replace(spec, **changes)


# A Hermes-style (Qwen2.5-like) ChatML template with tools (use with --enable-auto-tool-choice
# --tool-call-parser hermes): tools in a system block, calls as <tool_call>{json}</tool_call>.
TOOLS_CHAT_TEMPLATE = r"""{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0]['role'] == 'system' %}
{{- messages[0]['content'] }}
{%- else %}
{{- 'You are a helpful assistant.' }}
{%- endif %}
{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}
{{- "\n" }}
{{- tool | tojson }}
{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- elif messages[0]['role'] == 'system' %}
{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or (message.role == 'assistant' and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\n' + (message.content or '') + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}
{{- '\n' + message.content }}
{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}
{%- set tool_call = tool_call.function %}
{%- endif %}
{{- '\n<tool_call>\n{"name": "' }}
{{- tool_call.name }}
{{- '", "arguments": ' }}
{%- if tool_call.arguments is string %}
{{- tool_call.arguments }}
{%- else %}
{{- tool_call.arguments | tojson }}
{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}
{{- '<|im_start|>user' }}
{%- endif %}
{{- '\n<tool_response>\n' }}
{{- message.content }}
{{- '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}
"""
