"""A checkpoint folder on disk: config files plus the header of every safetensors file it loads.

Every entry the checkpoint needs must be a file: a symlink whose target is gone (a Hugging Face cache
snapshot whose blob was removed), a symlink loop or a folder in its place is named, with what is
wrong, never skipped as if absent.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from apron.checkpoint import files as cf
from apron.checkpoint.model import RANDOM_WEIGHTS_KEY, Checkpoint
from apron.checkpoint.safetensors import LENGTH_PREFIX_BYTES, TensorInfo, header_length, header_metadata, parse_header
from apron.errors import BadInput


def load_local(folder: str | os.PathLike[str]) -> Checkpoint:
    root = Path(folder)
    config_path = root / cf.CONFIG
    if not os.path.lexists(config_path):
        raise BadInput(
            f"{root}: no config.json; point Apron at the checkpoint folder that holds "
            "config.json and the *.safetensors files"
        )
    bytes_read = 0
    texts: dict[str, bytes] = {}
    for name in (cf.CONFIG, *cf.OPTIONAL_FILES):
        path = root / name
        if os.path.lexists(path):
            require_file(path)
            texts[name] = path.read_bytes()
            bytes_read += len(texts[name])
    small = cf.parse_small_files(texts, lambda name: str(root / name))
    names = _weight_files(root)
    tensors, header_bytes = read_headers(root, names)
    return Checkpoint(
        source=str(folder),
        source_kind="local",
        repo_id=None,
        revision=None,
        config=small.config,
        tensors=tuple(tensors),
        files=tuple(names),
        generation_config=small.generation_config,
        tokenizer_config=small.tokenizer_config,
        chat_template=small.chat_template,
        processor_configs=small.processor_configs,
        header_bytes_read=bytes_read + header_bytes,
        extra={"random_weights": True} if _random_weights(root, names) else {},
    )


def _random_weights(root: Path, names: list[str]) -> bool:
    """The first shard's metadata marks the weights random (`apron example tiny` writes one small
    shard; a header over 1 MiB is a real checkpoint's and is not read again)."""
    with open(root / names[0], "rb") as handle:
        length = int.from_bytes(handle.read(LENGTH_PREFIX_BYTES), "little")
        raw = handle.read(length) if length <= 2**20 else b""
    return RANDOM_WEIGHTS_KEY.encode() in raw and header_metadata(raw).get(RANDOM_WEIGHTS_KEY) == "true"


def require_file(path: Path) -> None:
    """BadInput naming PATH when it is not a file one can read: a dangling symlink, a loop, a folder."""
    problem = entry_problem(path)
    if problem is not None:
        raise BadInput(f"{path}: {problem}")


def entry_problem(path: Path) -> str | None:
    """What is wrong with an entry that should be a file (None: it is one)."""
    try:
        path.stat()
    except OSError as exc:
        target = os.readlink(path) if path.is_symlink() else None
        if exc.errno == errno.ELOOP:
            link = f" ({path.name} -> {target})" if target is not None else ""
            return f"a symlink loop{link} that never reaches a file; replace it with the file"
        if target is not None and exc.errno == errno.ENOENT:
            return (
                f"a symlink to {target}, which does not exist (in a Hugging Face cache snapshot: its blob was "
                "removed); download the file again"
            )
        return f"unreadable ({exc.strerror}); check the path and its permissions"
    if path.is_dir():
        return "a folder, not a file; the checkpoint needs the file itself here"
    if not path.is_file():
        return "not a regular file (a pipe, socket or device); the checkpoint needs the file itself here"
    if not os.access(path, os.R_OK):
        return "not readable (permission denied); check its permissions"
    return None


def _weight_files(root: Path) -> list[str]:
    index_path = root / cf.INDEX
    if os.path.lexists(index_path):
        require_file(index_path)
        index = cf.parse_json(index_path.read_bytes(), str(index_path))
        names = cf.weight_files_from_index(index, str(index_path))
        missing = [n for n in names if not os.path.lexists(root / n)]
        if missing:
            raise BadInput(
                f"{index_path}: field 'weight_map' names {missing[0]}, which is not in the "
                "folder; download the missing shard"
            )
        for name in names:
            require_file(root / name)
        return names
    entries = sorted(root.glob("*.safetensors"))
    for entry in entries:  # vLLM globs the same names and would fail on the broken one
        require_file(entry)
    names = [p.name for p in entries]
    if not names:
        raise BadInput(
            f"{root}: no *.safetensors files; Apron reads safetensors headers (convert "
            ".bin/.pt checkpoints to safetensors first)"
        )
    return names


def read_headers(root: Path, names: list[str]) -> tuple[list[TensorInfo], int]:
    shards: list[tuple[str, list[TensorInfo]]] = []
    bytes_read = 0
    for name in names:
        shard, used = read_header(root / name, name)
        bytes_read += used
        shards.append((name, shard))
    return cf.merge_shards(shards, str(root)), bytes_read


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
