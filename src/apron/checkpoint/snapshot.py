"""Snapshot files: a checkpoint's config files and full safetensors headers in one JSON document.

The format is the fixtures' `snapshot.json` (see tests/fixtures/README.md): `repo_id`, `revision`,
`files` {name: JSON object or text}, `safetensors` {file: header object}, `unindexed` [file, ...].
Files the repo ships but its index does not list are skipped, as vLLM skips them.
"""

from __future__ import annotations

import os

from apron.checkpoint import files as cf
from apron.checkpoint.model import Checkpoint, SourceKind
from apron.checkpoint.safetensors import TensorInfo, trusted_header, validate_header
from apron.errors import BadInput
from apron.paths import read_bytes

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any


def read_snapshot_document(path: str | os.PathLike[str]) -> dict[str, Any]:
    import gzip  # a file's snapshot only (the catalog's are read by catalog.py)

    path = os.fspath(path)
    try:
        raw = read_bytes(path)
        if path.endswith(".gz"):
            raw = gzip.decompress(raw)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read snapshot ({exc.strerror or exc})") from None
    except gzip.BadGzipFile:
        raise BadInput(f"{path}: not a gzip file; name plain snapshots *.json") from None
    return cf.parse_json(raw, str(path))


def load_snapshot(
    path: str | os.PathLike[str],
    *,
    source_kind: SourceKind = "snapshot",
    source: str | None = None,
    document: dict[str, Any] | None = None,
    is_trusted: bool = False,
) -> Checkpoint:
    """The checkpoint a snapshot document describes, every header checked as a real file's would be
    (IS_TRUSTED: Apron's own bundled catalog, whose headers tests/test_catalog.py checks once, is read
    without the per-tensor checks a plan would otherwise repeat on every start)."""
    label = str(path)
    doc = document if document is not None else read_snapshot_document(path)
    files = doc.get("files")
    if not isinstance(files, dict) or cf.CONFIG not in files:
        raise BadInput(f"{label}: field 'files' has no 'config.json'; a snapshot needs the model config")
    config = _json_file(files, cf.CONFIG, label)
    headers = doc.get("safetensors")
    if not isinstance(headers, dict) or not headers:
        raise BadInput(f"{label}: field 'safetensors' is missing or empty; it maps shard names to headers")
    unindexed = set(doc.get("unindexed") or [])
    tensors: list[TensorInfo] = []
    seen: dict[str, str] = {}
    loaded = [name for name in headers if name not in unindexed]
    for name in loaded:
        header = headers[name]
        if not isinstance(header, dict):
            raise BadInput(f"{label}: field 'safetensors.{name}' must be a header object")
        checked = trusted_header if is_trusted else validate_header
        for tensor in checked(header, f"{label}: {name}"):
            if tensor.name in seen:
                raise BadInput(f"{label}: tensor '{tensor.name}' is in both {seen[tensor.name]} and {name}")
            seen[tensor.name] = name
            tensors.append(TensorInfo(tensor.name, tensor.dtype, tensor.shape, name))
    tok = _json_file(files, cf.TOKENIZER_CONFIG, label) if cf.TOKENIZER_CONFIG in files else None
    gen = _json_file(files, cf.GENERATION_CONFIG, label) if cf.GENERATION_CONFIG in files else None
    template = files.get(cf.CHAT_TEMPLATE) if isinstance(files.get(cf.CHAT_TEMPLATE), str) else None
    processor = {name: _json_file(files, name, label) for name in cf.PROCESSOR_FILES if name in files}
    return Checkpoint(
        source=source or label,
        source_kind=source_kind,
        repo_id=_optional_str(doc, "repo_id", label),
        revision=_optional_str(doc, "revision", label),
        config=cf.check_config(config, label),
        tensors=tuple(tensors),
        files=tuple(loaded),
        generation_config=gen,
        tokenizer_config=tok,
        chat_template=cf.chat_template_of(tok, template),
        header_bytes_read=0,
        notes=(),
        extra={"exact": doc.get("exact")},
        processor_configs=processor,
    )


def _json_file(files: dict[str, Any], name: str, label: str) -> dict[str, Any]:
    value = files[name]
    if isinstance(value, str):
        return cf.parse_json(value, f"{label}: files.{name}")
    if not isinstance(value, dict):
        raise BadInput(f"{label}: field 'files.{name}' must be a JSON object")
    return value


def _optional_str(doc: dict[str, Any], key: str, label: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise BadInput(f"{label}: field '{key}' must be a string")
    return value
