"""Groups, blocks and tokens, exactly as vLLM's KV planner computes them.

Mirrors v1/core/kv_cache_utils.py (0.29-0.32) / kv_cache_planning.py (0.33): get_kv_cache_groups,
unify_kv_cache_spec_page_size, _get_kv_cache_groups_uniform_page_size, _get_kv_cache_bytes_per_block,
get_kv_cache_configs, _check_enough_kv_cache_memory and get_max_concurrency_for_kv_cache_config.
The engine logs `int(max_concurrency * max_model_len)` as "KV cache size: N tokens" - not
available / bytes-per-token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from apron.plan.kv.specs import KVSpec, MambaSpec, SchedulingContext, blocks_per_request, cdiv

_FULLISH = ("full", "mla")


@dataclass(frozen=True)
class Group:
    layer_names: tuple[str, ...]
    spec: KVSpec  # the group's (merged) spec
    layer_specs: tuple[KVSpec, ...] = ()  # per layer, for UniformTypeKVCacheSpecs groups

    def bytes_per_block(self) -> int:
        if self.layer_specs:
            return sum(s.page_size_bytes() for s in self.layer_specs)
        return len(self.layer_names) * self.spec.page_size_bytes()

    def blocks_per_request(self, ctx: SchedulingContext) -> int:
        if self.layer_specs:
            return max(blocks_per_request(s, ctx) for s in self.layer_specs)
        return blocks_per_request(self.spec, ctx)


@dataclass(frozen=True)
class KVPlan:
    groups: tuple[Group, ...]
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_tokens: int
    refusal: str | None  # the engine's own message when one request does not fit
    estimated_max_model_len: int | None
    warnings: tuple[str, ...] = ()


def format_gib(num_bytes: int) -> str:
    """utils/mem_utils.py format_gib: str(round(b / 2**30, 2))."""
    return str(round(num_bytes / 2**30, 2))


def _merges(specs: list[KVSpec]) -> bool:
    """<Spec>.merge(specs) succeeds: equal specs (FullAttentionSpec also merges differing windows)."""
    first = specs[0]
    return all(s == first for s in specs)


def _uniform_type(specs: list[KVSpec]) -> bool:
    """UniformTypeKVCacheSpecs: same block size and one layout kind (e.g. full layers of different
    head sizes)."""
    key = specs[0].uniform_type_key()
    return all(s.uniform_type_key() == key for s in specs)


class NotModelled(Exception):
    """A grouping path vLLM takes that Apron does not model: the KV numbers are unknown."""


def unify_page_size(specs: dict[str, KVSpec]) -> dict[str, KVSpec]:
    """unify_kv_cache_spec_page_size: smaller pages grow to the largest one."""
    pages = {s.page_size_bytes() for s in specs.values()}
    if len(pages) <= 1:
        return specs
    largest = max(pages)
    out = {}
    for name, spec in specs.items():
        page = spec.page_size_bytes()
        if page == largest:
            out[name] = spec
        elif isinstance(spec, MambaSpec):
            out[name] = replace(spec, page_size_padded=largest)
        elif largest % page == 0:
            out[name] = spec.with_block_size(spec.block_size * (largest // page))
        elif spec.kind != "mla":
            out[name] = replace(spec, page_size_padded=largest)
        else:
            raise NotModelled(f"{name}: an MLA page that does not divide the largest page")
    return out


def kv_cache_groups(specs: dict[str, KVSpec]) -> tuple[list[Group], list[str]]:
    """get_kv_cache_groups for the default (layer-outer) layout: (groups, engine warnings)."""
    values = list(specs.values())
    if not values:
        return [], []
    if _merges(values):
        return [Group(tuple(specs), values[0])], []
    if _uniform_type(values):
        return [Group(tuple(specs), values[0], tuple(values))], []
    specs = unify_page_size(specs)
    buckets: list[tuple[KVSpec, list[str]]] = []
    for name, spec in specs.items():
        for bucket_spec, names in buckets:
            if bucket_spec == spec:
                names.append(name)
                break
        else:
            buckets.append((spec, [name]))
    sizes = [len(names) for _, names in buckets]
    smallest, largest = min(sizes), max(sizes)
    group_size = largest if largest < smallest * 1.5 else smallest
    groups, warnings = [], []
    for spec, names in buckets:
        pad = group_size - len(names) % group_size
        if pad != group_size:
            warnings.append(
                f"Add {pad} padding layers, may waste at most {pad / len(names) * 100:.2f}% KV cache memory"
            )
        num_groups = cdiv(len(names), group_size)
        groups += [Group(tuple(names[i::num_groups]), spec) for i in range(num_groups)]
    return groups, warnings


def plan_kv(specs: dict[str, KVSpec], available_bytes: int, ctx: SchedulingContext) -> KVPlan:
    groups, warnings = kv_cache_groups(specs)
    if not groups:
        raise NotModelled("the model has no KV cache layers")
    bytes_per_block = max(g.bytes_per_block() for g in groups)
    per_request = sum(g.blocks_per_request(ctx) for g in groups)
    refusal, estimate = _admission(groups, bytes_per_block, per_request, available_bytes, ctx)
    num_blocks = max(available_bytes, 0) // bytes_per_block
    concurrency = num_blocks / per_request
    return KVPlan(
        tuple(groups),
        bytes_per_block,
        num_blocks,
        per_request,
        concurrency,
        int(concurrency * ctx.max_model_len),
        refusal,
        estimate,
        tuple(warnings),
    )


def _admission(
    groups: list[Group], bytes_per_block: int, per_request: int, available: int, ctx: SchedulingContext
) -> tuple[str | None, int | None]:
    """_check_enough_kv_cache_memory against available minus the null block BlockPool keeps."""
    check = available - bytes_per_block
    if check <= 0:
        return (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine."
        ), None
    needed = bytes_per_block * per_request
    if needed <= check:
        return None, None
    estimate = estimate_max_model_len(groups, bytes_per_block, check, ctx)
    hint = f"Based on the available memory, the estimated maximum model length is {estimate}. " if estimate > 0 else ""
    return (
        f"To serve at least one request with the model's max seq len ({ctx.max_model_len}), "
        f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available KV cache "
        f"memory ({format_gib(check)} GiB). {hint}Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine."
    ), estimate


def estimate_max_model_len(groups: list[Group], bytes_per_block: int, budget: int, ctx: SchedulingContext) -> int:
    """_estimate_max_model_len_from_groups: binary search for the longest length that fits."""

    def fits(length: int) -> bool:
        trial = replace(ctx, max_model_len=length)
        return bytes_per_block * sum(g.blocks_per_request(trial) for g in groups) <= budget

    low, high, best = 1, ctx.max_model_len, 0
    while low <= high:
        mid = (low + high) // 2
        if fits(mid):
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best


def bytes_per_token(specs: dict[str, KVSpec]) -> int | None:
    """Bytes one token adds across all layers, where that is what capacity depends on: every layer
    full attention (or MLA). Sliding windows and fixed states make a per-token figure meaningless."""
    values = list(specs.values())
    if not values or any(s.kind not in _FULLISH for s in values):
        return None
    return sum(s.page_size_bytes() // s.block_size for s in values)
