"""A checkpoint folder on disk: config files plus the header of every safetensors file it loads."""
from __future__ import annotations

import os
from pathlib import Path

from apron.checkpoint import files as cf
from apron.checkpoint.model import Checkpoint
from apron.checkpoint.safetensors import LENGTH_PREFIX_BYTES, TensorInfo, header_length, parse_header
from apron.errors import BadInput


def load_local(folder: str | os.PathLike) -> Checkpoint:
    root = Path(folder)
    config_path = root / cf.CONFIG
    if not config_path.is_file():
        raise BadInput(f"{root}: no config.json; point Apron at the checkpoint folder that holds "
                       "config.json and the *.safetensors files")
    bytes_read = 0
    texts: dict[str, bytes] = {}
    for name in (cf.CONFIG, *cf.OPTIONAL_FILES):
        path = root / name
        if path.is_file():
            texts[name] = path.read_bytes()
            bytes_read += len(texts[name])
    config = cf.check_config(cf.parse_json(texts[cf.CONFIG], str(config_path)), str(config_path))
    tok = cf.parse_json(texts[cf.TOKENIZER_CONFIG], str(root / cf.TOKENIZER_CONFIG)) \
        if cf.TOKENIZER_CONFIG in texts else None
    gen = cf.parse_json(texts[cf.GENERATION_CONFIG], str(root / cf.GENERATION_CONFIG)) \
        if cf.GENERATION_CONFIG in texts else None
    template_text = texts[cf.CHAT_TEMPLATE].decode("utf-8", "replace") if cf.CHAT_TEMPLATE in texts else None
    names = _weight_files(root)
    tensors, header_bytes = read_headers(root, names)
    return Checkpoint(
        source=str(folder), source_kind="local", repo_id=None, revision=None, config=config,
        tensors=tuple(tensors), files=tuple(names), generation_config=gen, tokenizer_config=tok,
        chat_template=cf.chat_template_of(tok, template_text), header_bytes_read=bytes_read + header_bytes,
    )


def _weight_files(root: Path) -> list[str]:
    index_path = root / cf.INDEX
    if index_path.is_file():
        index = cf.parse_json(index_path.read_bytes(), str(index_path))
        names = cf.weight_files_from_index(index, str(index_path))
        missing = [n for n in names if not (root / n).is_file()]
        if missing:
            raise BadInput(f"{index_path}: field 'weight_map' names {missing[0]}, which is not in the "
                           "folder; download the missing shard")
        return names
    names = sorted(p.name for p in root.glob("*.safetensors") if p.is_file())
    if not names:
        raise BadInput(f"{root}: no *.safetensors files; Apron reads safetensors headers (convert "
                       ".bin/.pt checkpoints to safetensors first)")
    return names


def read_headers(root: Path, names: list[str]) -> tuple[list[TensorInfo], int]:
    tensors: list[TensorInfo] = []
    seen: dict[str, str] = {}
    bytes_read = 0
    for name in names:
        shard, used = read_header(root / name, name)
        bytes_read += used
        for tensor in shard:
            if tensor.name in seen:
                raise BadInput(f"{root / name}: tensor '{tensor.name}' is also in {seen[tensor.name]}; "
                               "a checkpoint must store each tensor once")
            seen[tensor.name] = name
        tensors.extend(shard)
    return tensors, bytes_read


def read_header(path: Path, file_label: str) -> tuple[list[TensorInfo], int]:
    """Read one file's header: the 8-byte length, then exactly that many bytes. Never the data."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(LENGTH_PREFIX_BYTES)
        length = header_length(prefix, str(path), size)
        raw = handle.read(length)
    data_bytes = size - LENGTH_PREFIX_BYTES - length
    tensors = parse_header(raw, str(path), data_bytes)
    return [TensorInfo(t.name, t.dtype, t.shape, file_label) for t in tensors], LENGTH_PREFIX_BYTES + length
