"""A pure-Python model of PyTorch's CUDA caching allocator (native backend, one device).

It replays a list of events - (op, bytes, tag) - and reports what the allocator would hold: reserved
(cudaMalloc'd segments), allocated (live blocks, counted at their rounded block size, as
`allocated_bytes.all.current` counts them) and the peak of allocated. vLLM's start-up accounting reads
exactly these: `total_consumed` is a driver-level free-memory drop, so it sees reserved segments, and
the activation peak is `allocated_bytes.all.peak - allocated_bytes.all.current` (utils/mem_utils.py).

The rules follow c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator), by function:
- round_size: requests are rounded up to a multiple of 512 bytes (kMinBlockSize); no power-of-two
  rounding unless roundup_power2_divisions is configured (it is not, in vLLM).
- get_pool: requests of at most 1 MiB (kSmallSize) go to the small pool, the rest to the large pool.
- get_allocation_size: a new segment is 2 MiB (kSmallBuffer) for the small pool, 20 MiB
  (large_segment_size) for requests under 10 MiB (kMinLargeAlloc), else the request rounded up to 2 MiB
  (kRoundLarge).
- get_free_block: best fit - the smallest cached free block of the same pool and stream that holds the
  request (ties by address); with a max_split_size, a request under it may not take a block at or over
  it, and a request at or over it may take a block only if the block is smaller than request +
  max_non_split_rounding_size (20 MiB by default). Only the best candidate is considered.
- should_split: a small-pool block is split when at least 512 bytes remain; a large-pool block when the
  request is under max_split_size and more than 1 MiB would remain. The request takes the front of
  the block; the remainder stays free in the same segment.
- free_block: a freed block merges with free neighbours in its segment and returns to its pool.
- release_cached_blocks (empty_cache): only a free block that is a whole segment (no neighbours) is
  returned to the driver; a segment with any live block keeps all of its bytes reserved.
The constants are checked against the header the torch 2.13.0 wheel ships (c10/core/AllocatorConfig.h:
kSmallBuffer, kMinBlockSize, kSmallSize, kMinLargeAlloc, kRoundLarge, large_segment_size_ 20 MiB,
max_split_size_ SIZE_MAX); the .cpp itself is not in the wheel. Not modelled: expandable segments,
garbage_collection_threshold, roundup_power2_divisions, cross-stream event recording, and CUDA-graph
private pools (give them a distinct `stream` to keep their blocks apart). Addresses are virtual: new
segments get increasing addresses, which decides best-fit ties between equal-size blocks - the real
driver's addresses are not known statically.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from apron.frozen import frozen

MIB = 2**20
K_MIN_BLOCK_SIZE = 512
K_SMALL_SIZE = 1 * MIB
K_SMALL_BUFFER = 2 * MIB
K_MIN_LARGE_ALLOC = 10 * MIB
K_ROUND_LARGE = 2 * MIB
LARGE_SEGMENT_SIZE = 20 * MIB
MAX_NON_SPLIT_ROUNDING = 20 * MIB
UNLIMITED = 2**64 - 1

OPS = ("alloc", "free", "empty_cache", "max_split", "reset_peak", "mark")


@frozen
class Event:
    """One step of the replay.

    alloc: `num_bytes` requested under `tag` (unique among live blocks); free: the block under `tag`;
    empty_cache: torch.cuda.empty_cache(); max_split: set max_split_size to `num_bytes` (0 = unlimited,
    as PYTORCH_CUDA_ALLOC_CONF max_split_size_mb); reset_peak: reset_peak_memory_stats(); mark: record
    the stats under `tag`."""

    op: str
    num_bytes: int = 0
    tag: str = ""
    stream: int = 0


@frozen
class Stats:
    reserved_bytes: int
    allocated_bytes: int
    peak_allocated_bytes: int
    requested_bytes: int


@frozen
class SegmentView:
    size_bytes: int
    live_tags: tuple[str, ...]
    free_bytes: int


@frozen
class Replay:
    final: Stats
    marks: tuple[tuple[str, Stats], ...]
    segments: tuple[SegmentView, ...]
    num_cuda_mallocs: int

    def at(self, tag: str) -> Stats:
        for name, stats in self.marks:
            if name == tag:
                return stats
        raise KeyError(tag)

    @property
    def retained_free_bytes(self) -> int:
        """Reserved bytes no live block uses: what empty_cache() could not give back."""
        return self.final.reserved_bytes - self.final.allocated_bytes


class _Block:
    """One block of a segment (mutable: the replay splits and merges them in place)."""

    __slots__ = ("segment", "addr", "size", "stream", "is_small", "tag", "requested", "prev", "next")

    def __init__(self, segment: int, addr: int, size: int, stream: int, is_small: bool) -> None:
        self.segment, self.addr, self.size, self.stream, self.is_small = segment, addr, size, stream, is_small
        self.tag: str | None = None
        self.requested = 0
        self.prev: _Block | None = None
        self.next: _Block | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.stream, self.size, self.addr)


class _Pool:
    """The free blocks of one pool, ordered as the allocator's set (stream, size, address)."""

    __slots__ = ("keys", "blocks")

    def __init__(self) -> None:
        self.keys: list[tuple[int, int, int]] = []
        self.blocks: dict[tuple[int, int, int], _Block] = {}

    def insert(self, block: _Block) -> None:
        bisect.insort(self.keys, block.key)
        self.blocks[block.key] = block

    def remove(self, block: _Block) -> None:
        self.keys.pop(bisect.bisect_left(self.keys, block.key))
        del self.blocks[block.key]

    def best_fit(self, stream: int, size: int) -> _Block | None:
        i = bisect.bisect_left(self.keys, (stream, size, -1))
        if i == len(self.keys) or self.keys[i][0] != stream:
            return None
        return self.blocks[self.keys[i]]


def round_size(size: int) -> int:
    """CUDACachingAllocator.cpp round_size (no power-of-two divisions configured)."""
    if size < K_MIN_BLOCK_SIZE:
        return K_MIN_BLOCK_SIZE
    return -(-size // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE


def allocation_size(size: int) -> int:
    """CUDACachingAllocator.cpp get_allocation_size: the segment a new cudaMalloc gets for `size`."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return LARGE_SEGMENT_SIZE
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


def load_block_bytes(num_bytes: int, max_split_bytes: int = 20 * MIB) -> int:
    """The block a persistent tensor gets when it has a fresh segment under `max_split_bytes` (vLLM
    loads weights under max_split_size_mb:20, gpu_worker.py 0.29.0:488-495): the small pool rounds to
    512 bytes; a large request under the limit is split off its segment when more than 1 MiB would
    remain; one at or over the limit is never split and keeps its whole 2 MiB-rounded segment, which
    memory_allocated() - vLLM's "weights" - counts in full."""
    size = round_size(num_bytes)
    if size <= K_SMALL_SIZE:
        return size
    segment = allocation_size(size)
    if size < max_split_bytes and segment - size > K_SMALL_SIZE:
        return size
    return segment


class CachingAllocator:
    """The allocator's state; `replay` is the usual entry point."""

    def __init__(self, max_split_bytes: int = UNLIMITED) -> None:
        self.max_split = max_split_bytes
        self.small, self.large = _Pool(), _Pool()
        self.live: dict[str, _Block] = {}
        self.segments: dict[int, _Block] = {}  # segment id -> its first block
        self.segment_sizes: dict[int, int] = {}
        self.next_addr = 0
        self.reserved = self.allocated = self.requested = self.peak = 0
        self.num_mallocs = 0
        self.is_fork = False

    def fork(self) -> CachingAllocator:
        """A copy to go on allocating from, cheaply: its free blocks are copied (a later request may
        take or split one) and its live ones are not (an allocation-only continuation never frees or
        merges them), so a fork takes malloc and empty_cache, and refuses free and views."""
        other = CachingAllocator(self.max_split)
        other.next_addr, other.num_mallocs, other.is_fork = self.next_addr, self.num_mallocs, True
        other.reserved, other.allocated, other.requested, other.peak = (
            self.reserved,
            self.allocated,
            self.requested,
            self.peak,
        )
        neighbour = _Block(-1, -1, 0, -1, False)  # stands in for the live blocks it did not copy
        neighbour.tag = "(live, not copied)"
        other.segment_sizes = dict(self.segment_sizes)
        other.segments = dict.fromkeys(self.segments, neighbour)  # only the ids: empty_cache deletes them
        for source, target in ((self.small, other.small), (self.large, other.large)):
            for key in source.keys:
                block = source.blocks[key]
                copy = _Block(block.segment, block.addr, block.size, block.stream, block.is_small)
                # whether it shares its segment (empty_cache frees only whole free segments)
                copy.prev = neighbour if block.prev is not None else None
                copy.next = neighbour if block.next is not None else None
                target.insert(copy)
        return other

    def stats(self) -> Stats:
        return Stats(self.reserved, self.allocated, self.peak, self.requested)

    def malloc(self, num_bytes: int, tag: str, stream: int = 0) -> None:
        if tag in self.live:
            raise ValueError(f"allocator replay: tag {tag!r} is already live")
        size = round_size(num_bytes)
        is_small = size <= K_SMALL_SIZE
        pool = self.small if is_small else self.large
        block = self._free_block(pool, stream, size) or self._new_segment(size, stream, is_small)
        if self._should_split(block, size):
            rest = _Block(block.segment, block.addr + size, block.size - size, stream, is_small)
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            pool.insert(rest)
        block.tag, block.requested = tag, num_bytes
        self.live[tag] = block
        self.allocated += block.size
        self.requested += num_bytes
        self.peak = max(self.peak, self.allocated)

    def free(self, tag: str) -> None:
        if self.is_fork:
            raise ValueError("allocator replay: a fork only allocates")
        block = self.live.pop(tag, None)
        if block is None:
            raise ValueError(f"allocator replay: tag {tag!r} is not live")
        self.allocated -= block.size
        self.requested -= block.requested
        block.tag = None
        pool = self.small if block.is_small else self.large
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.tag is None:
                pool.remove(neighbour)
                self._merge(block, neighbour)
        pool.insert(block)

    def empty_cache(self) -> None:
        """release_cached_blocks: give back every free block that is a whole segment."""
        for pool in (self.small, self.large):
            for key in list(pool.keys):
                block = pool.blocks[key]
                if block.prev is None and block.next is None:
                    pool.remove(block)
                    self.reserved -= block.size
                    del self.segments[block.segment]
                    del self.segment_sizes[block.segment]

    def views(self) -> tuple[SegmentView, ...]:
        if self.is_fork:
            raise ValueError("allocator replay: a fork keeps no live blocks to view")
        out = []
        for seg, first in sorted(self.segments.items()):
            tags, free, block = [], 0, first
            cursor: _Block | None = block
            while cursor is not None:
                if cursor.tag is None:
                    free += cursor.size
                else:
                    tags.append(cursor.tag)
                cursor = cursor.next
            out.append(SegmentView(self.segment_sizes[seg], tuple(tags), free))
        return tuple(out)

    def _free_block(self, pool: _Pool, stream: int, size: int) -> _Block | None:
        block = pool.best_fit(stream, size)
        if block is None:
            return None
        if size < self.max_split and block.size >= self.max_split:
            return None
        if size >= self.max_split and block.size >= size + MAX_NON_SPLIT_ROUNDING:
            return None
        pool.remove(block)
        return block

    def _new_segment(self, size: int, stream: int, is_small: bool) -> _Block:
        seg_size = allocation_size(size)
        seg = self.num_mallocs
        self.num_mallocs += 1
        block = _Block(seg, self.next_addr, seg_size, stream, is_small)
        self.next_addr += seg_size
        self.segments[seg] = block
        self.segment_sizes[seg] = seg_size
        self.reserved += seg_size
        return block

    def _should_split(self, block: _Block, size: int) -> bool:
        remaining = block.size - size
        if block.is_small:
            return remaining >= K_MIN_BLOCK_SIZE
        return size < self.max_split and remaining > K_SMALL_SIZE

    def _merge(self, block: _Block, neighbour: _Block) -> None:
        if neighbour is block.prev:
            block.addr, block.prev = neighbour.addr, neighbour.prev
            if neighbour.prev is not None:
                neighbour.prev.next = block
            if self.segments[block.segment] is neighbour:
                self.segments[block.segment] = block
        else:
            block.next = neighbour.next
            if neighbour.next is not None:
                neighbour.next.prev = block
        block.size += neighbour.size


def replay(events: Iterable[Event | tuple[str, int, str]], *, max_split_bytes: int = UNLIMITED) -> Replay:
    """Run `events` through a fresh allocator. Tuples (op, bytes, tag) are accepted for brevity."""
    alloc = CachingAllocator(max_split_bytes)
    marks: list[tuple[str, Stats]] = []
    for raw in events:
        event = raw if isinstance(raw, Event) else Event(*raw)
        if event.op == "alloc":
            alloc.malloc(event.num_bytes, event.tag, event.stream)
        elif event.op == "free":
            alloc.free(event.tag)
        elif event.op == "empty_cache":
            alloc.empty_cache()
        elif event.op == "max_split":
            alloc.max_split = event.num_bytes or UNLIMITED
        elif event.op == "reset_peak":
            alloc.peak = alloc.allocated
        elif event.op == "mark":
            marks.append((event.tag, alloc.stats()))
        else:
            raise ValueError(f"allocator replay: unknown op {event.op!r} (one of {', '.join(OPS)})")
    return Replay(alloc.stats(), tuple(marks), alloc.views(), alloc.num_mallocs)
