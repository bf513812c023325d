"""What the allocator probe saw (measure/probe_hook.py's reading), typed, and matched to the planner's buffers:
the parts of a probe record. It lives with the records, not in measure/, because records/ imports nothing
from measure/ (the hook's output is a JSON document; reading it needs no log reader).

The hook writes one JSON reading per engine process that ran the profiling function. `read_reading`
turns it into a `ProbeReading` (BadInput-free: a damaged reading becomes a failed one, with the reason).
`match_buffers` sets the planner's predicted buffers - (name, shape, bytes) per moment, as the plan's
`details.activation` lists them - against the blocks alive at the peak: a buffer is *right* when a live
block of its size is there, *missing* when none is; a block no buffer claims is *extra* ("unmatched").
Sizes must agree exactly (CUDA blocks are counted at the caching allocator's 512-byte rounding), and where
the recorder saw a block's shape (CPU) so must its number of elements; among the blocks that fit, the one
whose shape, stack or readers name the buffer wins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from apron.frozen import field, frozen, replace

READING_SCHEMA = "apron.probe-reading/1"
CUDA_BLOCK_BYTES = 512  # c10/cuda/CUDACachingAllocator.cpp round_size (kMinBlockSize), as plan/allocator.py
_STOP_WORDS = {"the", "of", "and", "output", "outputs", "dtype", "model", "fp32", "first", "after", "its"}
Json = dict[str, Any]


@frozen
class ProbeBlock:
    """One block alive at the peak: its bytes, how it was made, and the planner buffer it is (or None)."""

    num_bytes: int
    frames: tuple[str, ...] = ()
    op: str | None = None
    source: str | None = None
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    buffer: str | None = None
    count: int = 1  # among a phase's largest allocations: how many alike (bytes, shape, operators, frame)
    used_by: tuple[str, ...] = ()  # the first operators that took it as an input (CPU)

    def to_json(self) -> Json:
        out: Json = {"bytes": self.num_bytes, "frames": list(self.frames), "buffer": self.buffer}
        if self.count != 1:
            out["count"] = self.count
        if self.used_by:
            out["used_by"] = list(self.used_by)
        for name in ("op", "source", "dtype"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.shape is not None:
            out["shape"] = list(self.shape)
        return out

    @classmethod
    def from_json(cls, document: Json) -> ProbeBlock:
        shape = document.get("shape")
        return cls(
            num_bytes=int(document["bytes"]),
            frames=tuple(str(f) for f in document.get("frames") or ()),
            op=document.get("op"),
            source=document.get("source"),
            shape=tuple(int(s) for s in shape) if shape is not None else None,
            dtype=document.get("dtype"),
            buffer=document.get("buffer"),
            count=int(document.get("count", 1)),
            used_by=tuple(str(u) for u in document.get("used_by") or ()),
        )


@frozen
class PredictedBuffer:
    """A buffer of the planner's moment beside what the probe found for it."""

    name: str
    shape: tuple[int, ...]
    num_bytes: int
    status: str = "missing"  # right | missing

    def to_json(self) -> Json:
        return {"name": self.name, "shape": list(self.shape), "bytes": self.num_bytes, "status": self.status}

    @classmethod
    def from_json(cls, document: Json) -> PredictedBuffer:
        return cls(
            str(document["name"]),
            tuple(int(s) for s in document.get("shape") or ()),
            int(document["bytes"]),
            str(document.get("status", "missing")),
        )


@frozen
class RetainedSegment:
    """An allocator segment that holds a live block and free bytes when profiling ends."""

    num_bytes: int
    free_bytes: int
    live: tuple[ProbeBlock, ...] = ()

    def to_json(self) -> Json:
        return {"bytes": self.num_bytes, "free_bytes": self.free_bytes, "live": [b.to_json() for b in self.live]}

    @classmethod
    def from_json(cls, document: Json) -> RetainedSegment:
        return cls(
            int(document["bytes"]),
            int(document["free_bytes"]),
            tuple(ProbeBlock.from_json(b) for b in document.get("live") or ()),
        )


@frozen
class ReadingPhase:
    """The peak while the profiling function was inside one of its callees, and the blocks alive then."""

    name: str
    peak_bytes: int
    blocks: tuple[ProbeBlock, ...]
    allocated: tuple[ProbeBlock, ...] = ()  # the largest blocks the phase allocated, alive at its peak or not


@frozen
class ProbeReading:
    """One process's recording of the profiling function, as the hook wrote it."""

    status: str  # recorded | failed
    function: str
    platform: str | None = None  # cuda | cpu
    pid: int | None = None
    rank: int | None = None
    error: str | None = None
    raised: str | None = None  # the engine's own exception from the wrapped call (passed on untouched)
    seconds: float | None = None
    analysis_seconds: float | None = None
    peak_bytes: int | None = None  # the largest sum of blocks allocated in the call and alive together
    allocator_peak_bytes: int | None = None  # the allocator's (CUDA) or profiler's (CPU) own counter
    start_allocated_bytes: int | None = None
    num_events: int | None = None
    is_trace_truncated: bool = False
    peak_phase: str | None = None
    phases: tuple[ReadingPhase, ...] = ()
    segments: tuple[RetainedSegment, ...] = ()
    retained_free_bytes: int | None = None
    non_torch_growth_bytes: int | None = None
    non_torch_basis: str | None = None
    called_from: tuple[str, ...] = ()


def read_reading(document: Any) -> ProbeReading:
    """The hook's JSON as a reading; anything unreadable is a failed reading that says why."""
    if not isinstance(document, dict) or document.get("schema") != READING_SCHEMA:
        schema = document.get("schema") if isinstance(document, dict) else type(document).__name__
        return ProbeReading("failed", "?", error=f"not a probe reading (schema {schema!r}, expected {READING_SCHEMA})")
    try:
        non_torch = document.get("non_torch") or {}
        return ProbeReading(
            status="recorded" if document.get("status") == "recorded" else "failed",
            function=str(document.get("function") or "?"),
            platform=document.get("platform"),
            pid=_int(document.get("pid")),
            rank=_int(document.get("rank")),
            error=document.get("error"),
            raised=document.get("raised"),
            seconds=document.get("seconds"),
            analysis_seconds=document.get("analysis_seconds"),
            peak_bytes=_int(document.get("peak_bytes")),
            allocator_peak_bytes=_int(document.get("allocator_peak_bytes")),
            start_allocated_bytes=_int(document.get("start_allocated_bytes")),
            num_events=_int(document.get("num_events")),
            is_trace_truncated=bool(document.get("is_trace_truncated")),
            peak_phase=document.get("peak_phase"),
            phases=tuple(_reading_phase(p) for p in document.get("phases") or ()),
            segments=tuple(RetainedSegment.from_json(s) for s in document.get("segments") or ()),
            retained_free_bytes=_int(document.get("retained_free_bytes")),
            non_torch_growth_bytes=_int(non_torch.get("growth_bytes")),
            non_torch_basis=non_torch.get("basis"),
            called_from=tuple(str(f) for f in document.get("called_from") or ()),
        )
    except (KeyError, TypeError, ValueError) as exc:
        return ProbeReading("failed", str(document.get("function") or "?"), error=f"damaged reading ({exc})")


def _reading_phase(document: Json) -> ReadingPhase:
    blocks = tuple(ProbeBlock.from_json(b) for b in document.get("blocks") or ())
    allocated = tuple(ProbeBlock.from_json(b) for b in document.get("allocated") or ())
    return ReadingPhase(str(document["name"]), int(document["peak_bytes"]), blocks, allocated)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


# -- matching -------------------------------------------------------------------------------------------


@frozen
class Moment:
    """A predicted moment of the profiling run: the plan's details.activation.moments[i]."""

    name: str
    buffers: tuple[PredictedBuffer, ...]


@frozen
class Match:
    moment: str
    blocks: tuple[ProbeBlock, ...]  # every live block, largest first, with its buffer name or None
    predicted: tuple[PredictedBuffer, ...]  # the moment's buffers with right / missing
    considered: tuple[tuple[str, int], ...] = field(default=())  # (moment, matched bytes) for each

    @property
    def matched_bytes(self) -> int:
        return sum(b.num_bytes for b in self.blocks if b.buffer is not None)

    @property
    def unmatched_bytes(self) -> int:
        return sum(b.num_bytes for b in self.blocks if b.buffer is None)


def moments_from_plan(details: Json) -> list[Moment]:
    """The predicted moments in a plan document's details.activation."""
    moments = []
    for moment in (details.get("activation") or {}).get("moments") or ():
        buffers = tuple(
            PredictedBuffer(str(b["name"]), tuple(int(s) for s in b.get("shape") or ()), int(b["bytes"]))
            for b in moment.get("buffers") or ()
        )
        moments.append(Moment(str(moment["name"]), buffers))
    return moments


def match_buffers(blocks: Sequence[ProbeBlock], moments: Sequence[Moment], granularity: int = 1) -> Match:
    """The moment whose buffers account for most of the live bytes, buffer by buffer."""
    ordered = tuple(sorted(blocks, key=lambda b: -b.num_bytes))
    if not moments:
        return Match("none predicted", tuple(replace(b, buffer=None) for b in ordered), ())
    results = [(_match_moment(ordered, m, granularity), m.name) for m in moments]
    considered = tuple((name, match.matched_bytes) for match, name in results)
    best, _ = max(results, key=lambda r: r[0].matched_bytes)  # first wins a tie: the plan's order
    return replace(best, considered=considered)


def _match_moment(blocks: tuple[ProbeBlock, ...], moment: Moment, granularity: int) -> Match:
    claimed: dict[int, str] = {}
    predicted = []
    for buffer in sorted(moment.buffers, key=lambda b: -b.num_bytes):
        size = _round_up(buffer.num_bytes, granularity)
        candidates = [
            i for i, b in enumerate(blocks) if i not in claimed and b.num_bytes == size and _same_elements(buffer, b)
        ]
        if not candidates:
            predicted.append(replace(buffer, status="missing"))
            continue
        chosen = max(candidates, key=lambda i: (_affinity(buffer, blocks[i]), -i))
        claimed[chosen] = buffer.name
        predicted.append(replace(buffer, status="right"))
    order = {b.name: i for i, b in enumerate(moment.buffers)}
    named = tuple(replace(b, buffer=claimed.get(i)) for i, b in enumerate(blocks))
    return Match(moment.name, named, tuple(sorted(predicted, key=lambda b: order[b.name])))


def _same_elements(buffer: PredictedBuffer, block: ProbeBlock) -> bool:
    """Where the recorder saw the block's shape, it must hold as many elements as the buffer (a view of
    another shape is the same tensor; an int64 sort index of the same bytes is not)."""
    return block.shape is None or math.prod(block.shape) == math.prod(buffer.shape)


def _affinity(buffer: PredictedBuffer, block: ProbeBlock) -> int:
    """How well a block of the right size fits the buffer: its shape, then the buffer's words in its stack."""
    score = 100 if block.shape is not None and tuple(block.shape) == buffer.shape else 0
    text = " ".join((*block.frames, *block.used_by, block.source or "", block.op or "")).lower()
    return score + sum(1 for word in _words(buffer.name) if word in text)


def _words(name: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9_]+", name.lower()) if len(w) > 2 and w not in _STOP_WORDS]


def _round_up(value: int, granularity: int) -> int:
    return -(-value // granularity) * granularity if granularity > 1 else value
