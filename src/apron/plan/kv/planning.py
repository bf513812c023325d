"""Groups, blocks and tokens, exactly as vLLM's KV planner computes them.

Mirrors v1/core/kv_cache_utils.py (0.29-0.32) / kv_cache_planning.py (0.33): get_kv_cache_groups,
unify_kv_cache_spec_page_size, _get_kv_cache_groups_uniform_page_size, _get_kv_cache_bytes_per_block,
get_kv_cache_configs, _check_enough_kv_cache_memory and get_max_concurrency_for_kv_cache_config.
The engine logs `int(max_concurrency * max_model_len)` as "KV cache size: N tokens" - not
available / bytes-per-token.
"""

from __future__ import annotations

import math
from collections import Counter

from apron.frozen import frozen, replace
from apron.plan.kv.specs import (
    CircularBufferSpec,
    FullAttentionSpec,
    KVSpec,
    MambaSpec,
    SchedulingContext,
    SlidingWindowSpec,
    blocks_per_request,
    cdiv,
    round_up,
)

_FULLISH = ("full", "mla")


@frozen
class Group:
    layer_names: tuple[str, ...]
    spec: KVSpec  # the group's (merged) spec
    layer_specs: tuple[KVSpec, ...] = ()  # per layer, for UniformTypeKVCacheSpecs groups

    def specs(self) -> tuple[KVSpec, ...]:
        return self.layer_specs or (self.spec,) * len(self.layer_names)

    def bytes_per_block(self, *, block_outermost: bool = True) -> int:
        """One block of every layer in the group: the pages packed side by side, or (layer-outer
        layouts, 0.31+) each page rounded up to its block stride alignment."""
        if block_outermost:
            return sum(s.page_size_bytes() for s in self.specs())
        return sum(round_up(s.page_size_bytes(), s.stride_alignment) for s in self.specs())

    def blocks_per_request(self, ctx: SchedulingContext) -> int:
        if self.layer_specs:
            return max(blocks_per_request(s, ctx) for s in self.layer_specs)
        return blocks_per_request(self.spec, ctx)


@frozen
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


@frozen
class Grouping:
    """A layout's KV cache groups and the block they share: they follow from its specs alone, so a
    layout works them out once however many budgets it is planned at (fit's sweep, a range's ends)."""

    groups: tuple[Group, ...]
    bytes_per_block: int
    warnings: tuple[str, ...] = ()


def group_specs(specs: dict[str, KVSpec], *, block_outermost: bool = False, grouping: str = "generic") -> Grouping:
    """GROUPING: the layout's grouping path (KVLayout.grouping)."""
    if grouping == "glm5_next":
        groups, bytes_per_block = glm5_next_groups(specs)
        return Grouping(tuple(groups), bytes_per_block)
    found, warnings = kv_cache_groups(specs, block_outermost=block_outermost)
    if not found:
        raise NotModelled("the model has no KV cache layers")
    return Grouping(tuple(found), pool_bytes_per_block(found, block_outermost=block_outermost), tuple(warnings))


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
        elif isinstance(spec, FullAttentionSpec) and spec.kind != "mla":
            out[name] = replace(spec, page_size_padded=largest)
        else:
            raise NotModelled(f"{name}: an MLA page that does not divide the largest page")
    return out


def kv_cache_groups(specs: dict[str, KVSpec], *, block_outermost: bool = False) -> tuple[list[Group], list[str]]:
    """get_kv_cache_groups: (groups, engine warnings). Mixed page sizes on a block-outermost layout
    take the packed path (0.30-0.33 _get_packed_kv_cache_groups); otherwise pages are unified."""
    values = list(specs.values())
    if not values:
        return [], []
    if _merges(values):
        return [Group(tuple(specs), values[0])], []
    if _uniform_type(values):
        return [Group(tuple(specs), values[0], tuple(values))], []
    if block_outermost and len({s.page_size_bytes() for s in values}) > 1:
        return packed_groups(specs), []
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


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """_approximate_gcd: the chunk d >= lower_bound with the least total upward padding, ties to
    the larger d."""
    low, high = max(1, lower_bound), max(values)
    if low > high:
        return low
    best, best_pad = low, None
    for d in range(low, high + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


class _Bucket:
    """Layers of one uniform type, bucketed as `_get_packed_kv_cache_groups` does (mutable: layers are added
    as they are met)."""

    __slots__ = ("specs",)

    def __init__(self, specs: dict[str, KVSpec]) -> None:
        self.specs = specs

    def by_page(self) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for name, spec in self.specs.items():
            out.setdefault(spec.page_size_bytes(), []).append(name)
        return out

    @property
    def first(self) -> KVSpec:
        return next(iter(self.specs.values()))

    def is_balanced(self) -> bool:
        return len({len(names) for names in self.by_page().values()}) == 1

    def max_layers_per_page(self) -> int:
        return Counter(s.page_size_bytes() for s in self.specs.values()).most_common(1)[0][1]


def packed_groups(specs: dict[str, KVSpec]) -> list[Group]:
    """_get_packed_kv_cache_groups (kv_cache_utils.py 0.30-0.32, kv_cache_planning.py 0.33): layers
    bucketed by uniform type; balanced buckets split into groups of `repeats` pattern repeats;
    state buckets (Mamba, rings, and windows when nothing repeats) split so they never widen the
    block the other groups need."""
    buckets: list[_Bucket] = []
    for name, spec in specs.items():
        for bucket in buckets:
            if _uniform_type([*bucket.specs.values(), spec]):
                bucket.specs[name] = spec
                break
        else:
            buckets.append(_Bucket({name: spec}))
    mixed = [b.max_layers_per_page() for b in buckets if b.is_balanced() and len(b.by_page()) > 1]
    min_repeats = max(mixed, default=0)
    balanced = [b.max_layers_per_page() for b in buckets if b.is_balanced()]
    repeats = approximate_gcd(balanced, min_repeats) if min_repeats else None

    def num_groups(bucket: _Bucket) -> int:
        return cdiv(bucket.max_layers_per_page(), repeats) if bucket.is_balanced() and repeats else 1

    def is_state(bucket: _Bucket) -> bool:
        first = bucket.first
        return isinstance(first, (MambaSpec, CircularBufferSpec)) or (
            repeats is None and isinstance(first, SlidingWindowSpec)
        )

    def widest(bucket: _Bucket, n: int) -> int:
        return sum(cdiv(len(names), n) * page for page, names in bucket.by_page().items())

    anchor = max((widest(b, len(b.specs) if is_state(b) else num_groups(b)) for b in buckets), default=0)
    groups = []
    for bucket in buckets:
        n = num_groups(bucket)
        if anchor and is_state(bucket):
            states_per_block = max(anchor // bucket.first.page_size_bytes(), 1)
            n = max(n, cdiv(len(bucket.specs), states_per_block))
        if n == 1:
            groups.append(Group(tuple(bucket.specs), bucket.first, tuple(bucket.specs.values())))
            continue
        pattern = list(zip(*bucket.by_page().values(), strict=False))
        for i in range(n):
            names = tuple(name for repeat in pattern[i::n] for name in repeat)
            groups.append(Group(names, specs[names[0]], tuple(specs[name] for name in names)))
    return groups


def glm5_next_groups(specs: dict[str, KVSpec]) -> tuple[list[Group], int]:
    """v1/core/kv_cache_utils.py _get_kv_cache_groups_glm5_next (0.30.0:1195-1274, 0.31.0:1213-1292),
    tried after the uniform paths: (groups, bytes per block). One group of every MLA and indexer
    layer; one of the kpool tails, each padded to the indexer page; the state layers dealt
    round-robin into cdiv(states, MLA layers) groups (one pipeline stage), padded to the MLA page.
    A block holds the MLA and indexer pages only (0.30.0:1592-1594): the i-th state of every state
    group and the i-th tail alias MLA layer i's and indexer i's regions (0.30.0:1682-1735)."""
    states = {n: s for n, s in specs.items() if isinstance(s, MambaSpec)}
    tails = {n: s for n, s in specs.items() if isinstance(s, CircularBufferSpec)}
    attention = {n: s for n, s in specs.items() if n not in states and n not in tails}
    latent = [n for n, s in attention.items() if s.tokens_per_state == 1]  # type: ignore[attr-defined]
    pooled = [n for n, s in attention.items() if s.tokens_per_state > 1]  # type: ignore[attr-defined]
    latent_pages = {attention[n].page_size_bytes() for n in latent}
    pooled_pages = {attention[n].page_size_bytes() for n in pooled}
    if not states or not pooled or len(latent_pages) != 1 or len(pooled_pages) != 1:
        raise NotModelled("the GLM-5.3-Flash grouping needs one MLA page, one indexer page and state layers")
    latent_page, pooled_page = latent_pages.pop(), pooled_pages.pop()
    state = next(iter(states.values()))
    if state.real_page_size_bytes() > latent_page:
        raise NotModelled(f"the state page does not fit the MLA page ({latent_page} B): vLLM refuses")
    groups = [Group(tuple(attention), next(iter(attention.values())), tuple(attention.values()))]
    if tails:
        padded = tuple(replace(s, page_size_padded=pooled_page) for s in tails.values())
        groups.append(Group(tuple(tails), padded[0], padded))
    num_state_groups = cdiv(len(states), len(latent))
    spec = replace(state, page_size_padded=latent_page)
    names = list(states)
    groups += [Group(tuple(names[i::num_state_groups]), spec) for i in range(num_state_groups)]
    return groups, len(latent) * latent_page + len(pooled) * pooled_page


def pool_bytes_per_block(groups: list[Group], *, block_outermost: bool) -> int:
    """_get_kv_cache_bytes_per_block: the widest group's block; block-outermost blocks round up to
    every layer's block stride alignment (0.31+; 1 where a spec has none)."""
    widest = max(g.bytes_per_block(block_outermost=block_outermost) for g in groups)
    if not block_outermost:
        return widest
    return round_up(widest, math.lcm(*(s.stride_alignment for g in groups for s in g.specs())))


def plan_kv(
    specs: dict[str, KVSpec],
    available_bytes: int,
    ctx: SchedulingContext,
    *,
    block_outermost: bool = False,
    grouping: str = "generic",
    like: KVPlan | Grouping | None = None,
) -> KVPlan:
    """GROUPING: the layout's grouping path (KVLayout.grouping). LIKE: the specs' groups already
    worked out (a Grouping, or a plan of the same specs at another budget): they do not depend on it."""
    if like is None:
        like = group_specs(specs, block_outermost=block_outermost, grouping=grouping)
    groups, bytes_per_block, warnings = list(like.groups), like.bytes_per_block, list(like.warnings)
    per_request = sum(g.blocks_per_request(ctx) for g in groups)
    refusal, estimate = _admission(groups, bytes_per_block, per_request, available_bytes, ctx)
    num_blocks = num_blocks_for(bytes_per_block, available_bytes)
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


def num_blocks_for(bytes_per_block: int, available_bytes: int) -> int:
    """get_kv_cache_config_from_groups: available // bytes per block - the block count, and so the
    state blocks a hybrid's max_num_seqs must not exceed (config/compilation.py). One function, so a
    plan can ask it at the low end of its available-bytes range as well as at the central value."""
    return max(available_bytes, 0) // bytes_per_block


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


def describe_layers(specs: dict[str, KVSpec]) -> str:
    """Per-token basis in each cache's own terms (K and V for attention, one record for MLA)."""
    counts: dict[str, int] = {}
    for spec in specs.values():
        what = spec.describe()
        counts[what] = counts.get(what, 0) + 1
    return f"{len(specs)} layer caches: " + "; ".join(f"{n} x {what}" for what, n in counts.items())


def layer_kinds(specs: dict[str, KVSpec]) -> dict[str, int]:
    """Layers per kind of page, "<kind> page <bytes> B, block <tokens>" (the plan's details.kv.layers)."""
    kinds: dict[str, int] = {}
    for spec in specs.values():
        key = f"{spec.kind} page {spec.page_size_bytes()} B, block {spec.block_size}"
        kinds[key] = kinds.get(key, 0) + 1
    return kinds


def bytes_per_token(specs: dict[str, KVSpec]) -> int | None:
    """Bytes one token adds across all layers, where that is what capacity depends on: every layer
    full attention (or MLA) with one state per token. Sliding windows, fixed states and compressed
    caches make a per-token figure meaningless."""
    values = list(specs.values())
    if not values or any(s.kind not in _FULLISH or not s.is_per_token() for s in values):
        return None
    return sum(s.page_size_bytes() // s.block_size for s in values)
