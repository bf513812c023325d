"""Safetensors headers: parse and validate the header alone, never the data region.

Fetching bytes (from a file, a Hub range request, a snapshot) is the caller's business; this module
only turns header bytes into tensor records and refuses headers the real loader would refuse.
Format: 8-byte little-endian header length N, then N bytes of UTF-8 JSON, then the data region.
"""

from __future__ import annotations

import json
import math
import struct

from apron.errors import BadInput
from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# The safetensors reader refuses headers above 100 MB (MAX_HEADER_SIZE in the safetensors crate).
MAX_HEADER_BYTES = 100_000_000
LENGTH_PREFIX_BYTES = 8

# Bits per element of every dtype the safetensors format defines (safetensors `Dtype` enum).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}


@frozen
class TensorInfo:
    """One tensor as a safetensors header describes it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def num_bytes(self) -> int:
        return tensor_bytes(self.dtype, self.shape)


def tensor_bytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.ceil(math.prod(shape) * DTYPE_BITS[dtype] / 8)


def header_length(prefix: bytes, file_label: str, file_size: int | None = None) -> int:
    """Read the 8-byte length prefix and check it against the limits and the file size."""
    if len(prefix) < LENGTH_PREFIX_BYTES:
        raise BadInput(
            f"{file_label}: truncated safetensors file ({len(prefix)} bytes, the 8-byte "
            "header length is missing); re-download the file"
        )
    length: int = struct.unpack("<Q", prefix[:LENGTH_PREFIX_BYTES])[0]
    if length > MAX_HEADER_BYTES:
        raise BadInput(
            f"{file_label}: safetensors header length {length:,} bytes is over the 100 MB "
            "limit; the file is corrupt or not safetensors"
        )
    if length < 2:
        raise BadInput(
            f"{file_label}: safetensors header length {length} is too small to hold a JSON object; the file is corrupt"
        )
    if file_size is not None and LENGTH_PREFIX_BYTES + length > file_size:
        raise BadInput(
            f"{file_label}: safetensors header length {length:,} bytes runs past the end "
            f"of the file ({file_size:,} bytes); the file is truncated"
        )
    return length


def header_metadata(raw: bytes) -> dict[str, str]:
    """The header's __metadata__ strings ({} when absent or unreadable: parse_header reports damage)."""
    try:
        metadata = json.loads(raw).get("__metadata__")
    except (ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, dict) else {}


def parse_header(raw: bytes, file_label: str, data_bytes: int | None = None) -> list[TensorInfo]:
    """Parse header JSON bytes into tensors, validating what the safetensors loader validates.

    `data_bytes` is the size of the data region when known (file size - 8 - header length); offsets
    are then checked against it. Tensors come back in data-offset order.
    """
    header = _decode(raw, file_label)
    return validate_header(header, file_label, data_bytes)


def _decode(raw: bytes, file_label: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{file_label}: safetensors header is not UTF-8 (byte {exc.start}); the file is corrupt"
        ) from None
    try:
        header = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{file_label}: safetensors header is not valid JSON ({exc.msg} at char "
            f"{exc.pos}); the file is truncated or corrupt"
        ) from None
    if not isinstance(header, dict):
        raise BadInput(f"{file_label}: safetensors header is a JSON {type(header).__name__}, expected an object")
    return header


def validate_header(header: dict[str, Any], file_label: str, data_bytes: int | None = None) -> list[TensorInfo]:
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise BadInput(f"{file_label}: field '__metadata__' must map strings to strings")
    tensors, spans = [], []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensor, span = _tensor(name, entry, file_label)
        tensors.append(tensor)
        spans.append((span[0], span[1], name))
    _check_spans(spans, file_label, data_bytes)
    order = {name: begin for begin, _, name in spans}
    return sorted(tensors, key=lambda t: order[t.name])


def trusted_header(header: dict[str, Any], file_label: str) -> list[TensorInfo]:
    """validate_header's tensors, in file order, from a header known to pass it (Apron's own catalog)."""
    entries = sorted(
        (entry["data_offsets"][0], name, entry) for name, entry in header.items() if name != "__metadata__"
    )
    return [TensorInfo(name, entry["dtype"], tuple(entry["shape"]), file_label) for _, name, entry in entries]


def _tensor(name: str, entry: object, file_label: str) -> tuple[TensorInfo, tuple[int, int]]:
    where = f"{file_label}: tensor '{name}'"
    if not isinstance(entry, dict):
        raise BadInput(f"{where} must be an object with dtype, shape and data_offsets")
    dtype = entry.get("dtype")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise BadInput(f"{where} field 'dtype' is {dtype!r}, not a safetensors dtype ({', '.join(sorted(DTYPE_BITS))})")
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise BadInput(f"{where} field 'shape' is {shape!r}; expected a list of non-negative integers")
    offsets = entry.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
    ):
        raise BadInput(f"{where} field 'data_offsets' is {offsets!r}; expected [begin, end] integers")
    begin, end = offsets
    expected = tensor_bytes(dtype, tuple(shape))
    if end < begin or end - begin != expected:
        raise BadInput(
            f"{where} field 'data_offsets' {offsets} spans {end - begin:,} bytes but "
            f"{dtype} {shape} needs {expected:,}; the header is corrupt"
        )
    return TensorInfo(name=name, dtype=dtype, shape=tuple(shape), file=file_label), (begin, end)


def _check_spans(spans: list[tuple[int, int, str]], file_label: str, data_bytes: int | None) -> None:
    position, previous = 0, None
    for begin, end, name in sorted(spans):
        if begin < position:
            raise BadInput(
                f"{file_label}: tensor '{name}' field 'data_offsets' [{begin}, {end}] overlaps "
                f"tensor '{previous}'; the header is corrupt"
            )
        if begin > position:
            raise BadInput(
                f"{file_label}: tensor '{name}' field 'data_offsets' [{begin}, {end}] leaves a "
                f"hole after byte {position:,}; the safetensors loader refuses such files"
            )
        position, previous = end, name
    if data_bytes is not None and position > data_bytes:
        raise BadInput(
            f"{file_label}: tensor '{previous}' field 'data_offsets' ends at byte {position:,}, "
            f"past the data region ({data_bytes:,} bytes); the file is truncated"
        )
