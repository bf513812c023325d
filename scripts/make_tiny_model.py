#!/usr/bin/env python3
"""Build a tiny, randomly initialised LLM checkpoint + tokenizer fully offline.

Adapted from /work/shared/research/make_tiny_model.py. No Hugging Face Hub
access is needed or attempted: the byte-level BPE tokenizer is trained locally
on generated text and the weights are random (output text is garbage; assert
on finish_reason / usage / token counts, never on text).

Fast: imports only `tokenizers` and `numpy` (no torch / transformers; those
imports alone cost 6-8 s on the 2-core box). config.json / tokenizer_config.json
are written by hand in the format transformers 5.19 writes (plus legacy keys for
4.x) and model.safetensors by a tiny built-in writer. ~3 s per model.

Output is a normal HF model folder that `vllm serve` and transformers load:
config.json, generation_config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, chat_template.jinja.

Usage:
    python make_tiny_model.py OUT_DIR [--tools] [--think] [--deep] [--arch llama|gemma2]
        [--architectures NAME] [--vocab 2048] [--hidden 128] [--layers 2]
        [--heads 2] [--kv-heads 1] [--inter 256] [--max-pos 2048]
        [--model-max-length N] [--dtype bfloat16] [--seed 0]

Options beyond the research version:
  --tools          Hermes-style chat template that renders `tools` in a system
                   block and assistant `tool_calls` as <tool_call>{json}</tool_call>;
                   <tool_call>/</tool_call> (and <tool_response> tags) are added
                   to the vocabulary as single non-special tokens, like Hermes /
                   Qwen2.5 models. Use with
                   `vllm serve --enable-auto-tool-choice --tool-call-parser hermes`.
  --think          `<think>` and `</think>` added to the vocabulary as single non-special
                   tokens (as in Qwen3 / DeepSeek-R1), so vLLM's token-based reasoning
                   parsers load: `vllm serve --reasoning-parser deepseek_r1` puts the
                   output in the response's `reasoning` field until `</think>`.
  --deep           more layers and a long context: --layers 8 --max-pos 32768
                   (unless given explicitly). KV bytes/token = 2 * layers *
                   kv_heads * head_dim * 2 (bf16) = 2048 B for --deep defaults,
                   256 B/layer.
  --arch gemma2    a Gemma2ForCausalLM instead of Llama (for the vLLM
                   "does not support float16" refusal).
  --arch idefics3  a multimodal Idefics3ForConditionalGeneration (SmolVLM's
                   architecture): a SigLIP-style vision transformer (the tower
                   family of Gemma 3), the pixel-shuffle connector and a Llama text
                   stack, with preprocessor_config.json / processor_config.json and
                   the <image> / <fake_token_around_image> / <global-img> tokens
                   Idefics3Processor reads. --image-size / --patch-size /
                   --vision-hidden size the tower (defaults 64 / 8 / 64: 64 patches,
                   16 image tokens after the 2x2 pixel shuffle). Chosen because
                   its processor and tower run on the CPU engine without
                   torchvision (Qwen3-VL, Gemma 3, PaliGemma and the LLaVA family
                   import it in vLLM 0.32 + transformers 5.19).
  --architectures  overwrite config.json "architectures" after saving (e.g. a
                   fake name, to get vLLM's unsupported-architecture refusal).
  --model-max-length  tokenizer_config model_max_length (default: --max-pos).
                   vLLM caps the derived max_model_len with it.

Defaults give ~0.56 M parameters (~1.2 MB in bfloat16). The head size is
hidden/heads = 64, which the vLLM CPU attention backend supports.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# A tiny ChatML template (no tools). vLLM's chat endpoint needs *some* template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Hermes-style (Qwen2.5-like) ChatML template with tool support.
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

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
THINK_TOKENS = ["<think>", "</think>"]
# Idefics3Processor looks these up in the tokenizer; vLLM's chat path inserts "<image>".
IMAGE_TOKENS = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]
SCALE_FACTOR = 2  # Idefics3's pixel shuffle: (2 x 2) patches -> one image token

WORDS = (
    "the a an of to in is it that for on with as was at by be this from or "
    "have not are but we they you he she his her which one all were there "
    "model token memory cache serve server request latency throughput batch "
    "engine kernel tensor weight layer attention vector matrix block page "
    "hello world python test check deploy plan boot log measure record time "
    "first second fast slow small large tiny random value number text chat "
    "user assistant system answer question reply stream output input prompt "
    "name arguments function city weather unit celsius location json"
).split()

SYLLABLES = (
    "ba be bi bo bu ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu "
    "ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo vu za ze zi zo zu "
    "ch sh th st tr pr pl gr an en in on un er or ar ing ion ed ly"
).split()


def corpus(n_lines: int, seed: int):
    rng = random.Random(seed)
    # pseudo-words give BPE enough distinct merges to reach a few thousand ids
    pseudo = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(3000)]
    for _ in range(n_lines):
        k = rng.randint(4, 16)
        words = [rng.choice(WORDS) if rng.random() < 0.6 else rng.choice(pseudo) for _ in range(k)]
        if rng.random() < 0.2:
            words[0] = words[0].capitalize()
        yield " ".join(words) + rng.choice([".", "?", "!", ","])
    # digits / punctuation / JSON-ish text / mixed case
    yield "0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14 -42 + - * / = ( ) [ ] { } : ; ' \" ` ~ @ # $ % ^ & _ |"
    yield '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
    yield "The Quick Brown Fox Jumps Over The Lazy Dog. HELLO World! Hello, world?"


def idefics3_config_dict(args, vocab: int, ids: dict) -> dict:
    """Idefics3ForConditionalGeneration's config.json (transformers 5.19 layout): a llama text stack and
    an idefics3_vision tower; the connector pixel-shuffles SCALE_FACTOR^2 patches into one token."""
    text = hf_config_dict(argparse.Namespace(**{**vars(args), "arch": "llama"}), vocab, ids)
    text.pop("architectures")
    vision = {
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": args.vision_hidden,
        "image_size": args.image_size,
        "intermediate_size": 2 * args.vision_hidden,
        "layer_norm_eps": 1e-06,
        "model_type": "idefics3_vision",
        "num_attention_heads": 2,
        "num_channels": 3,
        "num_hidden_layers": 2,
        "patch_size": args.patch_size,
    }
    c = {
        "architectures": ["Idefics3ForConditionalGeneration"],
        "dtype": args.dtype,
        "image_token_id": ids["image"],
        "model_type": "idefics3",
        "scale_factor": SCALE_FACTOR,
        "text_config": text,
        "tie_word_embeddings": True,
        "torch_dtype": args.dtype,
        "transformers_version": "5.19.0",
        "vision_config": dict(sorted(vision.items())),
    }
    return dict(sorted(c.items()))


def idefics3_state_dict(args, vocab: int) -> dict:
    """HF names for Idefics3ForConditionalGeneration: the Llama stack under model.text_model., the SigLIP-style
    tower under model.vision_model. (LayerNorms 1 / 0), the connector's projection, random N(0, 0.02)."""
    import numpy as np

    rng = np.random.default_rng(args.seed + 1)
    v, p = args.vision_hidden, args.patch_size

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    llama = argparse.Namespace(**{**vars(args), "arch": "llama"})
    sd = {k.replace("model.", "model.text_model.", 1): a for k, a in random_state_dict(llama, vocab).items()}
    tower = "model.vision_model."
    sd[tower + "embeddings.patch_embedding.weight"] = w(v, 3, p, p)
    sd[tower + "embeddings.patch_embedding.bias"] = np.zeros(v, np.float32)
    sd[tower + "embeddings.position_embedding.weight"] = w((args.image_size // p) ** 2, v)
    sd[tower + "post_layernorm.weight"] = np.ones(v, np.float32)
    sd[tower + "post_layernorm.bias"] = np.zeros(v, np.float32)
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
            sd[pre + name + ".weight"] = w(*shape)
            sd[pre + name + ".bias"] = np.zeros(shape[0], np.float32)
        for norm in ("layer_norm1", "layer_norm2"):
            sd[pre + norm + ".weight"] = np.ones(v, np.float32)
            sd[pre + norm + ".bias"] = np.zeros(v, np.float32)
    sd["model.connector.modality_projection.proj.weight"] = w(args.hidden, v * SCALE_FACTOR**2)
    return dict(sorted(sd.items()))


def idefics3_processor_files(args) -> dict:
    """preprocessor_config.json / processor_config.json as SmolVLM repos ship them, one tile per image
    (do_image_splitting off) so an image is image_seq_len tokens."""
    image_seq_len = (args.image_size // args.patch_size) ** 2 // SCALE_FACTOR**2
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
            "max_image_size": {"longest_edge": args.image_size},
            "processor_class": "Idefics3Processor",
            "resample": 1,
            "rescale_factor": 0.00392156862745098,
            "size": {"longest_edge": args.image_size},
        },
        "processor_config.json": {"image_seq_len": image_seq_len, "processor_class": "Idefics3Processor"},
    }


def hf_config_dict(args, vocab: int, ids: dict) -> dict:
    """config.json as transformers 5.19 writes it, plus legacy keys (torch_dtype,
    rope_theta) so transformers 4.x also reads it."""
    head_dim = args.hidden // args.heads
    c = {
        "architectures": ["LlamaForCausalLM" if args.arch == "llama" else "Gemma2ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": ids["bos"],
        "dtype": args.dtype,
        "eos_token_id": ids["eos"],
        "head_dim": head_dim,
        "hidden_size": args.hidden,
        "initializer_range": 0.02,
        "intermediate_size": args.inter,
        "max_position_embeddings": args.max_pos,
        "num_attention_heads": args.heads,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "pad_token_id": ids["pad"],
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": args.dtype,
        "transformers_version": "5.19.0",
        "use_cache": True,
        "vocab_size": vocab,
    }
    if args.arch == "llama":
        c.update({"hidden_act": "silu", "mlp_bias": False, "model_type": "llama", "pretraining_tp": 1})
    else:
        c.update(
            {
                "attn_logit_softcapping": 50.0,
                "final_logit_softcapping": 30.0,
                "hidden_activation": "gelu_pytorch_tanh",
                "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(args.layers)],
                "model_type": "gemma2",
                "query_pre_attn_scalar": head_dim,
                "sliding_window": min(512, args.max_pos),
            }
        )
    return dict(sorted(c.items()))


def random_state_dict(args, vocab: int) -> dict:
    """HF-named tensors (float32 numpy), HF-style init: N(0, 0.02) for matrices,
    RMSNorm weights 1 (Llama) or 0 (Gemma2 uses 1 + w). Tied lm_head is not stored."""
    import numpy as np

    rng = np.random.default_rng(args.seed)
    head_dim = args.hidden // args.heads
    h, q, kv, i = args.hidden, args.heads * head_dim, args.kv_heads * head_dim, args.inter
    norm = np.ones if args.arch == "llama" else np.zeros

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    sd = {"model.embed_tokens.weight": w(vocab, h), "model.norm.weight": norm(h, np.float32)}
    for L in range(args.layers):
        p = f"model.layers.{L}."
        sd.update(
            {
                p + "self_attn.q_proj.weight": w(q, h),
                p + "self_attn.k_proj.weight": w(kv, h),
                p + "self_attn.v_proj.weight": w(kv, h),
                p + "self_attn.o_proj.weight": w(h, q),
                p + "mlp.gate_proj.weight": w(i, h),
                p + "mlp.up_proj.weight": w(i, h),
                p + "mlp.down_proj.weight": w(h, i),
                p + "input_layernorm.weight": norm(h, np.float32),
                p + "post_attention_layernorm.weight": norm(h, np.float32),
            }
        )
        if args.arch == "gemma2":
            sd[p + "pre_feedforward_layernorm.weight"] = norm(h, np.float32)
            sd[p + "post_feedforward_layernorm.weight"] = norm(h, np.float32)
    return dict(sorted(sd.items()))


def save_safetensors(path: str, tensors: dict, dtype: str) -> None:
    """Minimal safetensors writer (no torch needed); bf16 by round-to-nearest-even."""
    import numpy as np

    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        if dtype == "bfloat16":
            u = a.view(np.uint32)
            b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
            code = "BF16"
        elif dtype == "float16":
            b, code = a.astype("<f2").tobytes(), "F16"
        else:
            b, code = a.astype("<f4").tobytes(), "F32"
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(len(hb).to_bytes(8, "little"))
        f.write(hb)
        for b in blobs:
            f.write(b)


def build_tokenizer(vocab_size: int, seed: int, tools: bool, think: bool = False, image: bool = False):
    """Train the byte-level BPE with `tokenizers` only (no transformers import)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    # Byte-level: every byte is representable, so any prompt tokenizes and any
    # sampled id detokenizes (random weights sample arbitrary ids).
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(20000, seed), trainer=trainer)
    if tools:
        # Non-special added tokens (as in Hermes/Qwen2.5): one id each, and
        # they survive skip_special_tokens=True detokenization.
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    if think:
        # Reasoning parsers look the think tags up as single vocabulary ids and refuse to load without them.
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    if image:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in IMAGE_TOKENS])
    return tok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--tools", action="store_true", help="Hermes-style tools chat template + <tool_call> tokens")
    ap.add_argument("--think", action="store_true", help="<think>/</think> tokens for vLLM's reasoning parsers")
    ap.add_argument("--deep", action="store_true", help="defaults --layers 8 --max-pos 32768")
    ap.add_argument("--arch", default="llama", choices=["llama", "gemma2", "idefics3"])
    ap.add_argument("--image-size", type=int, default=64, help="idefics3: vision_config.image_size (pixels)")
    ap.add_argument("--patch-size", type=int, default=8, help="idefics3: vision_config.patch_size")
    ap.add_argument("--vision-hidden", type=int, default=64, help="idefics3: vision_config.hidden_size")
    ap.add_argument("--architectures", default=None, help="overwrite config.json architectures (e.g. a fake name)")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--kv-heads", type=int, default=1)
    ap.add_argument("--inter", type=int, default=256)
    ap.add_argument("--max-pos", type=int, default=None)
    ap.add_argument("--model-max-length", type=int, default=None)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.layers is None:
        args.layers = 8 if args.deep else 2
    if args.max_pos is None:
        args.max_pos = 32768 if args.deep else 2048
    if args.model_max_length is None:
        args.model_max_length = args.max_pos
    if args.hidden % args.heads or args.heads % args.kv_heads:
        ap.error("--hidden must be divisible by --heads and --heads by --kv-heads")

    os.makedirs(args.out_dir, exist_ok=True)
    out = lambda name: os.path.join(args.out_dir, name)  # noqa: E731

    multimodal = args.arch == "idefics3"
    tok = build_tokenizer(args.vocab, args.seed, args.tools, args.think, image=multimodal)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)  # trained size may be < requested
    padded_vocab = ((vocab_size + 63) // 64) * 64  # pad embedding table to x64
    ids = {k: tok.token_to_id(t) for k, t in (("bos", "<|endoftext|>"), ("eos", "<|im_end|>"), ("pad", "<|pad|>"))}
    ids["image"] = tok.token_to_id("<image>")
    template = TOOLS_CHAT_TEMPLATE if args.tools else CHAT_TEMPLATE

    tok.save(out("tokenizer.json"))
    # tokenizer_config.json: what transformers 5 writes, but with
    # tokenizer_class PreTrainedTokenizerFast and an embedded chat_template so
    # transformers 4.x reads it too; chat_template.jinja for transformers 5.
    tc = {
        "backend": "tokenizers",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "model_max_length": args.model_max_length,
        "pad_token": "<|pad|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
        "chat_template": template,
        "clean_up_tokenization_spaces": False,
    }
    if multimodal:
        tc["processor_class"] = "Idefics3Processor"
    with open(out("tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    with open(out("chat_template.jinja"), "w") as f:
        f.write(template)

    cfg = idefics3_config_dict(args, padded_vocab, ids) if multimodal else hf_config_dict(args, padded_vocab, ids)
    if args.architectures:
        cfg["architectures"] = [args.architectures]
    with open(out("config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(out("generation_config.json"), "w") as f:
        json.dump(
            {
                "bos_token_id": ids["bos"],
                "do_sample": False,
                "eos_token_id": ids["eos"],
                "pad_token_id": ids["pad"],
                "transformers_version": "5.19.0",
            },
            f,
            indent=2,
        )

    if multimodal:
        for name, body in idefics3_processor_files(args).items():
            with open(out(name), "w") as f:
                json.dump(body, f, indent=2)
    sd = idefics3_state_dict(args, padded_vocab) if multimodal else random_state_dict(args, padded_vocab)
    save_safetensors(out("model.safetensors"), sd, args.dtype)

    head_dim = args.hidden // args.heads
    itemsize = {"bfloat16": 2, "float16": 2, "float32": 4}[args.dtype]
    size = sum(os.path.getsize(out(f)) for f in os.listdir(args.out_dir))
    print(
        json.dumps(
            {
                "out_dir": args.out_dir,
                "architectures": cfg["architectures"][0],
                "params": int(sum(a.size for a in sd.values())),
                "layers": args.layers,
                "max_position_embeddings": args.max_pos,
                "model_max_length": args.model_max_length,
                "kv_bytes_per_token": 2 * args.layers * args.kv_heads * head_dim * itemsize,
                "tools_template": args.tools,
                "think_tokens": args.think,
                "vocab_size_tokenizer": vocab_size,
                "vocab_size_model": padded_vocab,
                "dtype": args.dtype,
                "files": sorted(os.listdir(args.out_dir)),
                "bytes": size,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
