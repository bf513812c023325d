"""plan/retained.load_window_slack replays the load window pool by pool and goes on from a fork of
each pool's state after the parameters: it must give exactly what the whole window's replay gives
(load_window_events through plan/allocator.replay), on the sizes real plans have and on random ones."""

from __future__ import annotations

import random

import pytest

from apron.plan import retained
from apron.plan.allocator import MIB, CachingAllocator, load_block_bytes, replay


def _whole_window_slack(runner: tuple[int, ...], params: tuple[int, ...], buffers: tuple[int, ...]) -> int:
    result = replay(retained.load_window_events(runner, params, buffers))
    counted = sum(load_block_bytes(n) for n in params) + sum(runner) + sum(buffers)
    return max(result.final.reserved_bytes - counted, 0)


def _sizes(rng: random.Random, count: int) -> tuple[int, ...]:
    """Tensor sizes across the allocator's thresholds: sub-KiB, small pool, 1-10 MiB, 10-20 MiB, large."""
    ranges = [(1, 4096), (4096, MIB), (MIB, 10 * MIB), (10 * MIB, 20 * MIB), (20 * MIB, 400 * MIB)]
    return tuple(rng.randrange(*rng.choice(ranges)) for _ in range(count))


@pytest.mark.parametrize("seed", range(40))
def test_the_pools_replayed_apart_give_the_whole_window(seed):
    rng = random.Random(seed)
    runner, params, buffers = (
        _sizes(rng, rng.randrange(0, 10)),
        _sizes(rng, rng.randrange(1, 120)),
        _sizes(rng, rng.randrange(0, 15)),
    )
    assert retained.load_window_slack.__wrapped__(runner, params, buffers) == _whole_window_slack(
        runner, params, buffers
    )


def test_a_real_plan_s_window_and_its_neighbours_in_a_fit_share_the_loaded_state():
    """Qwen3-8B's parameters at TP 1 with the sampler buffers of two max_num_seqs: both equal the
    whole replay, and the second reuses the first's state after loading (one entry in the cache)."""
    from apron.checkpoint import load_checkpoint
    from apron.plan import weights
    from apron.plan.model_config import ModelConfig
    from apron.plan.weights import WeightSettings

    checkpoint = load_checkpoint("Qwen/Qwen3-8B")
    config = ModelConfig.from_config(checkpoint.config)
    params = weights.load_order_param_bytes(
        checkpoint, config, WeightSettings(tensor_parallel_size=1, runtime_dtype="bfloat16", capability=(9, 0))
    )
    retained._after_load.cache_clear()
    for seqs in (1024, 32):
        buffers = tuple(retained.sampler_buffer_bytes(seqs, config.vocab_size))
        runner = tuple(retained.runner_buffer_bytes(seqs, 8192))
        assert retained.load_window_slack.__wrapped__(runner, params, buffers) == _whole_window_slack(
            runner, params, buffers
        )
    info = retained._after_load.cache_info()
    assert info.hits >= 1  # the large pool's loaded state, shared by the two max_num_seqs


def test_a_fork_allocates_as_the_original_would_and_refuses_to_free():
    rng = random.Random(7)
    original = CachingAllocator(20 * MIB)
    for i, n in enumerate(_sizes(rng, 60)):
        original.malloc(n, f"p{i}")
    original.empty_cache()
    fork = original.fork()
    for i, n in enumerate(_sizes(rng, 20)):
        original.malloc(n, f"b{i}")
        fork.malloc(n, f"b{i}")
        assert (fork.reserved, fork.allocated, fork.requested) == (
            original.reserved,
            original.allocated,
            original.requested,
        )
    original.empty_cache()
    fork.empty_cache()
    assert fork.reserved == original.reserved
    with pytest.raises(ValueError):
        fork.free("b0")
    with pytest.raises(ValueError):
        fork.views()
