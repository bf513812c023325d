"""Bad input: one line on stderr naming the file, field or flag and what to do; exit 2; no stdout."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import snapshot_path

GOOD_HEADER = {
    "__metadata__": {"format": "pt"},
    "a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
    "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
}
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2,
    "num_hidden_layers": 1,
    "num_attention_heads": 1,
    "vocab_size": 2,
}


def write_shard(
    path: Path, header, data_bytes: int | None = None, raw: bytes | None = None, length: int | None = None
) -> None:
    body = raw if raw is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(body) if length is None else length))
        f.write(body)
        f.write(b"\0" * (16 if data_bytes is None else data_bytes))


def folder(tmp_path: Path, header=GOOD_HEADER, config=CONFIG, **shard) -> Path:
    d = tmp_path / "ckpt"
    d.mkdir(exist_ok=True)
    if config is not None:
        (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    write_shard(d / "model.safetensors", header, **shard)
    return d


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "apron.cli", *args], capture_output=True, text=True)


def bad(header_patch: dict) -> dict:
    header = json.loads(json.dumps(GOOD_HEADER))
    for name, patch in header_patch.items():
        if patch is None:
            header.pop(name, None)
        else:
            header[name] = patch
    return header


def _cases(tmp_path: Path):
    """(argv, expected stderr line) pairs; built lazily inside each test's tmp dir."""
    d = lambda **kw: str(folder(tmp_path, **kw))  # noqa: E731
    snap = tmp_path / "snap.json"
    return {
        "truncated_prefix": lambda: _truncated(tmp_path),
        "length_past_file": lambda: (
            d(length=10_000),
            "safetensors header length 10,000 bytes runs past the end of the file",
        ),
        "length_over_limit": lambda: (d(length=200_000_000), "over the 100 MB limit"),
        "length_too_small": lambda: (d(length=1, raw=b"{"), "too small to hold a JSON object"),
        "invalid_header_json": lambda: (d(raw=b'{"a": [1,'), "safetensors header is not valid JSON"),
        "header_not_object": lambda: (d(raw=b"[1, 2]"), "safetensors header is a JSON list, expected an object"),
        "header_not_utf8": lambda: (d(raw=b'{"\xff": 1}'), "safetensors header is not UTF-8"),
        "unknown_dtype": lambda: (
            d(header=bad({"a": {"dtype": "Q4", "shape": [2, 2], "data_offsets": [0, 8]}})),
            "tensor 'a' field 'dtype' is 'Q4', not a safetensors dtype",
        ),
        "bad_shape": lambda: (
            d(header=bad({"a": {"dtype": "BF16", "shape": [2, -1], "data_offsets": [0, 8]}})),
            "tensor 'a' field 'shape' is [2, -1]",
        ),
        "shape_not_list": lambda: (
            d(header=bad({"a": {"dtype": "BF16", "shape": "2x2", "data_offsets": [0, 8]}})),
            "tensor 'a' field 'shape' is '2x2'",
        ),
        "offsets_missing": lambda: (
            d(header=bad({"a": {"dtype": "BF16", "shape": [2, 2]}})),
            "tensor 'a' field 'data_offsets' is None",
        ),
        "offsets_wrong_size": lambda: (
            d(header=bad({"a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 6]}})),
            "tensor 'a' field 'data_offsets' [0, 6] spans 6 bytes but BF16 [2, 2] needs 8",
        ),
        "offsets_overlap": lambda: (
            d(header=bad({"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})),
            "overlaps tensor 'a'",
        ),
        "offsets_hole": lambda: (
            d(header=bad({"b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})),
            "leaves a hole after byte 8",
        ),
        "offsets_past_file": lambda: (d(data_bytes=10), "ends at byte 16, past the data region (10 bytes)"),
        "tensor_not_object": lambda: (d(header=bad({"a": [1, 2]})), "tensor 'a' must be an object"),
        "metadata_not_strings": lambda: (
            d(header=bad({"__metadata__": {"format": 1}})),
            "field '__metadata__' must map strings to strings",
        ),
        "missing_config": lambda: (d(config=None), "no config.json"),
        "config_invalid_json": lambda: (d(config="{nope"), "config.json: invalid JSON"),
        "config_not_object": lambda: (d(config="[]"), "config.json: expected a JSON object, found a list"),
        "config_bad_architectures": lambda: (
            d(config={**CONFIG, "architectures": "Llama"}),
            "field 'architectures' must be a list of class names",
        ),
        "config_no_architectures": lambda: (
            d(config={"model_type": "llama"}),
            "field 'architectures' is missing or empty",
        ),
        # A null where vLLM reads the key with no default is no "not given" (the planner used to drop it).
        "config_null_heads": lambda: (
            d(config={**CONFIG, "num_attention_heads": None}),
            "config.json: num_attention_heads is null; vLLM reads the attention head count with no default",
        ),
        "config_null_vocab": lambda: (
            d(config={**CONFIG, "vocab_size": None}),
            "config.json: vocab_size is null; vLLM reads the vocabulary size with no default",
        ),
        "config_null_layers_in_text_config": lambda: (
            d(config={**CONFIG, "text_config": {"hidden_size": 2, "num_hidden_layers": None, "n_head": 1}}),
            "config.json: text_config.num_hidden_layers is null; vLLM reads the layer count",
        ),
        "config_null_model_type": lambda: (
            d(config={**CONFIG, "model_type": None}),
            "config.json: model_type is null; transformers picks the config class by it",
        ),
        "config_null_rope_factor": lambda: (
            d(config={**CONFIG, "rope_scaling": {"rope_type": "yarn", "factor": None}}),
            "config.json: rope_scaling.factor is null; vLLM reads it with no default for rope_type 'yarn'",
        ),
        "config_zero_heads": lambda: (
            d(config={**CONFIG, "num_attention_heads": 0}),
            "config.json: num_attention_heads is 0; it must be a positive integer",
        ),
        "no_safetensors": lambda: _no_shards(tmp_path),
        # The Hugging Face cache: snapshots/<sha>/* are symlinks to ../../blobs/<hash>.
        "shard_dangling_symlink": lambda: _hf_cache(tmp_path, remove_blob="model.safetensors"),
        "config_dangling_symlink": lambda: _hf_cache(tmp_path, remove_blob="config.json"),
        "tokenizer_config_dangling_symlink": lambda: _hf_cache(tmp_path, remove_blob="tokenizer_config.json"),
        "shard_symlink_loop": lambda: _shard_loop(tmp_path),
        "shard_is_a_folder": lambda: _shard_folder(tmp_path),
        "index_shard_dangling_symlink": lambda: _index_shard_dangling(tmp_path),
        "source_dangling_symlink": lambda: _source_dangling(tmp_path),
        "index_missing_shard": lambda: _index_missing(tmp_path),
        "index_bad_weight_map": lambda: _index_bad(tmp_path),
        "source_missing": lambda: (str(tmp_path / "nowhere"), "does not exist and is not a Hub repo id"),
        "source_not_snapshot": lambda: _not_snapshot(tmp_path),
        "snapshot_invalid_json": lambda: (_write(snap, "{"), "snap.json: invalid JSON"),
        "snapshot_no_config": lambda: (
            _write(snap, json.dumps({"files": {}, "safetensors": {}})),
            "field 'files' has no 'config.json'",
        ),
        "snapshot_no_headers": lambda: (
            _write(snap, json.dumps({"files": {"config.json": CONFIG}})),
            "field 'safetensors' is missing or empty",
        ),
        "snapshot_duplicate_tensor": lambda: (
            _write(
                snap,
                json.dumps(
                    {
                        "files": {"config.json": CONFIG},
                        "safetensors": {"x.safetensors": GOOD_HEADER, "y.safetensors": GOOD_HEADER},
                    }
                ),
            ),
            "tensor 'a' is in both x.safetensors and y.safetensors",
        ),
    }


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _truncated(tmp_path: Path):
    d = folder(tmp_path)
    (d / "model.safetensors").write_bytes(b"\x01\x02")
    return str(d), "truncated safetensors file (2 bytes, the 8-byte header length is missing)"


def _no_shards(tmp_path: Path):
    d = folder(tmp_path)
    (d / "model.safetensors").unlink()
    return str(d), "no *.safetensors files"


def _hf_cache(tmp_path: Path, remove_blob: str):
    """A snapshot of the Hugging Face cache whose blob behind REMOVE_BLOB was deleted."""
    source = folder(tmp_path)
    (source / "tokenizer_config.json").write_text("{}")
    blobs, snapshot = tmp_path / "hub" / "blobs", tmp_path / "hub" / "snapshots" / ("a" * 40)
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for index, entry in enumerate(sorted(source.iterdir())):
        blob = blobs / f"{index:064x}"
        entry.rename(blob)
        (snapshot / entry.name).symlink_to(Path("../../blobs") / blob.name)
        if entry.name == remove_blob:
            blob.unlink()
    expected = f"{snapshot / remove_blob}: a symlink to ../../blobs/"
    return str(snapshot), expected


def _shard_loop(tmp_path: Path):
    d = folder(tmp_path)
    (d / "model-00002-of-00002.safetensors").symlink_to("model-00002-of-00002.safetensors")
    return str(d), "model-00002-of-00002.safetensors: a symlink loop"


def _shard_folder(tmp_path: Path):
    d = folder(tmp_path)
    (d / "extra.safetensors").mkdir()
    return str(d), "extra.safetensors: a folder, not a file"


def _index_shard_dangling(tmp_path: Path):
    d = folder(tmp_path)
    (d / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
    (d / "model.safetensors").symlink_to(tmp_path / "gone.safetensors")
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model.safetensors"}}))
    return str(d), f"model.safetensors: a symlink to {tmp_path / 'gone.safetensors'}, which does not exist"


def _source_dangling(tmp_path: Path):
    link = tmp_path / "my-model"
    link.symlink_to(tmp_path / "deleted-model")
    return str(link), f"SOURCE {link}: a symlink to {tmp_path / 'deleted-model'}, which does not exist"


def _index_missing(tmp_path: Path):
    d = folder(tmp_path)
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model.safetensors", "c": "model-2.safetensors"}})
    )
    return str(d), "field 'weight_map' names model-2.safetensors, which is not in the folder"


def _index_bad(tmp_path: Path):
    d = folder(tmp_path)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../x.bin"}}))
    return str(d), "field 'weight_map' maps 'a' to '../x.bin'"


def _not_snapshot(tmp_path: Path):
    p = tmp_path / "weights.bin"
    p.write_bytes(b"x")
    return str(p), "a file, but not a snapshot"


CASE_NAMES = sorted(_cases(Path("/nonexistent")))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bad_checkpoint_input(case, tmp_path, apron_home):
    source, expected = _cases(tmp_path)[case]()
    result = run("plan", source, "--gpu", "H100")
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("apron: error: ")
    assert expected in lines[0]


FLAG_CASES = {
    "unknown_gpu": (["--gpu", "H1000"], "--gpu 'H1000' is not in Apron's GPU catalog; close names:"),
    "tp_zero": (["--gpu", "H100", "--tp", "0"], "--tp must be 1 or more"),
    "util_too_big": (
        ["--gpu", "H100", "--gpu-memory-utilization", "1.5"],
        "--gpu-memory-utilization 1.5 must be in (0, 1]",
    ),
    "bad_dtype": (["--gpu", "H100", "--dtype", "int3"], "--dtype 'int3' is not one of"),
    "bad_kv_dtype": (["--gpu", "H100", "--kv-cache-dtype", "fp4"], "--kv-cache-dtype 'fp4' is not one of"),
    "bad_engine_spec": (["--gpu", "H100", "--engine", "vllm>=1"], "--engine 'vllm>=1' must look like vllm==0.33.0"),
    "unknown_engine": (["--gpu", "H100", "--engine", "vllm==0.1.0"], "--engine vllm==0.1.0: no facts for this release"),
    "negative_max_len": (["--gpu", "H100", "--max-model-len", "-5"], "--max-model-len -5 must be a positive integer"),
    "bad_capability": (
        ["--gpu", "MyGPU", "--gpu-memory-bytes", "1000", "--gpu-capability", "eight"],
        "--gpu-capability 'eight' must look like 8.9",
    ),
    "missing_gpu": ([], "--gpu is required"),
    "limit_mm_not_json": (
        ["--gpu", "H100", "--limit-mm-per-prompt", "image=0"],
        "--limit-mm-per-prompt 'image=0' is not JSON",
    ),
    "limit_mm_negative": (
        ["--gpu", "H100", "--limit-mm-per-prompt", '{"image": -1}'],
        "--limit-mm-per-prompt: the count for 'image' must be a whole number >= 0",
    ),
    "limit_mm_not_object": (["--gpu", "H100", "--limit-mm-per-prompt", "[1]"], "must be a JSON object"),
    "bad_encoder_tp_mode": (["--gpu", "H100", "--mm-encoder-tp-mode", "pipeline"], "'pipeline' is not one of"),
}


@pytest.mark.parametrize("case", sorted(FLAG_CASES))
def test_bad_flag(case, tmp_path, apron_home):
    args, expected = FLAG_CASES[case]
    result = run("plan", str(snapshot_path("Qwen/Qwen3-0.6B")), *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("apron: error: "), result.stderr
    assert expected in lines[0]


@pytest.mark.parametrize(
    "patch",
    [
        {"head_dim": None},  # derived from hidden_size / num_attention_heads, as vLLM does
        {"head_dim": 0},  # model_arch_config_convertor.py get_head_size: head_dim > 0, else derived
        {"num_key_value_heads": None},  # transformers fills it with num_attention_heads
        {"sliding_window": None, "rope_scaling": None, "q_lora_rank": None},  # null in published configs
        {"max_position_embeddings": None},  # vLLM assumes 2048 and says so
        {"n_layer": None},  # an alias set to null beside the key that has the value
    ],
    ids=["head_dim", "head_dim_zero", "kv_heads", "published_nulls", "max_positions", "alias"],
)
def test_a_null_where_the_key_is_optional_is_not_given(patch, tmp_path, apron_home):
    source = folder(tmp_path, config={**CONFIG, "hidden_size": 64, "num_attention_heads": 4, **patch})
    result = run("plan", str(source), "--gpu", "H100", "--json")
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout)["verdict"] in ("fits", "tight")
