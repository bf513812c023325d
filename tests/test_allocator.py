"""The caching-allocator model against the rules of c10/cuda/CUDACachingAllocator.cpp.

Each case is a short event list whose outcome the allocator's rules fix (segment sizes, best fit,
splitting, merging, what empty_cache can give back, max_split_size); plan/retained.py and a later GPU
replay rely on these.
"""

from __future__ import annotations

import pytest

from apron.plan.allocator import MIB, Event, allocation_size, load_block_bytes, replay, round_size


def test_rounding_and_segment_sizes():
    assert round_size(1) == 512 and round_size(513) == 1024
    assert allocation_size(MIB) == 2 * MIB  # small pool: 2 MiB segments
    assert allocation_size(MIB + 512) == 20 * MIB  # 1-10 MiB: a 20 MiB segment
    assert allocation_size(10 * MIB) == 10 * MIB  # from 10 MiB: rounded up to 2 MiB
    assert allocation_size(41 * MIB) == 42 * MIB


def test_freed_large_block_is_split_and_pins_its_segment():
    events = [("alloc", 1000 * MIB, "copy"), ("free", 0, "copy"), ("alloc", 32 * MIB, "ws"), ("empty_cache", 0, "")]
    result = replay(events)
    assert result.final.reserved_bytes == 1000 * MIB  # the whole segment stays
    assert result.final.allocated_bytes == 32 * MIB
    assert result.retained_free_bytes == 968 * MIB
    assert result.segments[0].live_tags == ("ws",)


def test_max_split_keeps_large_blocks_whole_and_releasable():
    events = [("alloc", 1000 * MIB, "copy"), ("free", 0, "copy"), ("alloc", 32 * MIB, "ws"), ("empty_cache", 0, "")]
    result = replay(events, max_split_bytes=20 * MIB)
    assert result.final.reserved_bytes == 32 * MIB and result.retained_free_bytes == 0
    # a request within 20 MiB of a cached over-limit block takes it whole, unsplit
    near = replay([("alloc", 40 * MIB, "a"), ("free", 0, "a"), ("alloc", 30 * MIB, "b")], max_split_bytes=20 * MIB)
    assert near.final.allocated_bytes == 40 * MIB and near.num_cuda_mallocs == 1


def test_best_fit_prefers_the_smallest_block_that_holds_the_request():
    events = [
        ("alloc", 100 * MIB, "big"),
        ("alloc", 40 * MIB, "mid"),
        ("free", 0, "big"),
        ("free", 0, "mid"),
        ("alloc", 32 * MIB, "ws"),
        ("empty_cache", 0, ""),
    ]
    result = replay(events)
    assert result.final.reserved_bytes == 40 * MIB  # the 100 MiB segment is released, the 40 MiB one kept


def test_small_requests_share_segments_and_merge_back():
    events = [("alloc", 4 * MIB, "a"), ("alloc", 4 * MIB, "b"), ("mark", 0, "both")]
    events += [("free", 0, "a"), ("free", 0, "b"), ("mark", 0, "freed"), ("empty_cache", 0, "")]
    result = replay(events)
    assert result.at("both").reserved_bytes == 20 * MIB  # one 20 MiB segment holds both
    assert result.at("freed").reserved_bytes == 20 * MIB and result.at("freed").allocated_bytes == 0
    assert result.final.reserved_bytes == 0  # merged into one free segment, released
    tiny = replay([("alloc", 100, "x"), ("alloc", 3 * MIB, "y")])
    assert tiny.final.reserved_bytes == 2 * MIB + 20 * MIB  # the small pool is separate


def test_remainder_of_at_most_1_mib_is_not_split_off():
    result = replay([("alloc", 11 * MIB + 512 * 1024, "t")])  # 12 MiB segment, 0.5 MiB left
    assert result.final.allocated_bytes == 12 * MIB  # the block keeps the whole segment


def test_peak_and_marks():
    events = [Event("alloc", 30 * MIB, "a"), Event("reset_peak"), Event("alloc", 50 * MIB, "b"), Event("free", 0, "b")]
    result = replay(events)
    assert result.final.peak_allocated_bytes == 80 * MIB and result.final.allocated_bytes == 30 * MIB


def test_bad_events_name_the_tag():
    with pytest.raises(ValueError, match="'x' is not live"):
        replay([("free", 0, "x")])
    with pytest.raises(ValueError, match="unknown op"):
        replay([("grow", 1, "x")])


def test_load_block_bytes_matches_a_replay_under_the_load_split_limit():
    for size in (300, 3 * MIB, 11 * MIB + 512 * 1024, 15 * MIB, 25 * MIB, 41 * MIB):
        alone = replay([("alloc", size, "w")], max_split_bytes=20 * MIB)
        assert load_block_bytes(size) == alone.final.allocated_bytes, size
    assert load_block_bytes(25 * MIB) == 26 * MIB  # never split at or over the limit
