"""The cheapest GPU x count that serves N users at a context of C tokens (`apron fit`).

Every configuration is one in-process plan (`plan_checkpoint`) with `--max-model-len C` and
`--tensor-parallel-size` equal to the GPUs rented. A configuration is feasible when that plan fits
and the KV pool holds N requests of C tokens by vLLM's own concurrency formula (the plan's
`max_concurrency`: v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config, which counts
a hybrid's state blocks per request) with `max_num_seqs` >= N. Where the defaults fall short on KV,
a lower `--max-num-seqs` (smaller sampler and CUDA-graph terms) is tried, and `--kv-cache-dtype fp8`
(where the GPU and release support it) only with the user's consent (`--allow-fp8-kv`: it changes the
model's numerics); without it the row says what fp8 would hold. Each feasible row carries an upper
bound on decode speed per user (plan/decode.py); `--min-tokens-per-second` drops rows below it.
A degree vLLM refuses (plan/parallel.py) is never feasible: its plan does not fit.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from apron.checkpoint import Checkpoint, load_checkpoint
from apron.engine.facts import EngineFacts
from apron.errors import BadInput
from apron.frozen import field, frozen, replace
from apron.hardware import Gpu, all_gpus, resolve_gpu
from apron.hardware.prices import TIERS, Price, PriceTable, load_prices
from apron.plan.decode import DecodeBound, decode_bound
from apron.plan.memory import MARGIN_BYTES
from apron.plan.model_config import ModelConfig
from apron.plan.planner import choose_engine, model_config, plan_checkpoint, unsupported_summary
from apron.plan.quantity import Quantity
from apron.plan.result import Plan
from apron.plan.settings import UserSettings

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

    from apron.deploy import Candidate

SCHEMA = "apron.fit/1"
# Machines are rented in these sizes; a plan at TP 3 would rent 4 (research/gpu-prices.md).
GPU_COUNTS = (1, 2, 4, 8)
_KV_PROBLEMS = ("kv_cache_too_small", "no_kv_memory")
# Problems the plan works around with a flag or that do not stop a boot (plan/planner.py _ADVISORY).
_ADVISORY = ("max_num_seqs_exceeds_state_blocks", "reasoning_parser_missing", "tool_parser_missing")
FP8_KV = "--kv-cache-dtype fp8"
# What an fp8 KV cache changes, said wherever fit chooses it or offers it.
FP8_KV_EFFECT = (
    "fp8 KV cache: keys and values stored in 8 bits with an uncalibrated scale of 1.0 (accuracy may change); "
    "the attention backend can change with it"
)


@frozen
class FitRequest:
    users: int
    context_tokens: int
    gpus: tuple[Gpu, ...]
    max_gpus: int = 8
    tier: str = "on-demand"
    engine_version: str | None = None
    base: UserSettings = UserSettings()  # the user's settings; fit sets tensor_parallel_size and max_model_len
    extra: tuple[tuple[Gpu, int], ...] = ()  # configurations outside the sweep (a candidate's own)
    allow_fp8_kv: bool = False  # --allow-fp8-kv: fit may switch the KV cache to fp8 on its own
    provider: str | None = None  # --provider: one provider's prices (the table's spelling); None: the cheapest
    min_tokens_per_second: float | None = None  # --min-tokens-per-second: the decode bound per user must reach it

    def __post_init__(self) -> None:
        if self.users < 1:
            raise BadInput(f"--users {self.users} must be 1 or more")
        if self.context_tokens < 1:
            raise BadInput(f"--context {self.context_tokens} must be a positive number of tokens")
        if self.max_gpus < 1:
            raise BadInput(f"--max-gpus {self.max_gpus} must be 1 or more")
        if not self.gpus and not self.extra:
            raise BadInput("--gpus names no GPU")
        if self.min_tokens_per_second is not None and not self.min_tokens_per_second > 0:
            raise BadInput(f"--min-tokens-per-second {self.min_tokens_per_second} must be a positive number")


@frozen
class Outcome:
    status: str  # feasible | infeasible | unknown
    reason: str | None
    is_kv_short: bool = False  # a KV setting could change the answer
    concurrency: float | None = None
    concurrency_low: float | None = None  # the low end of the plan's stated range, where it has one


@frozen
class FitRow:
    gpu: Gpu
    count: int
    outcome: Outcome
    plan: Plan
    user: UserSettings  # the settings of the plan behind this row (what `apron plan` reproduces)
    changes: tuple[str, ...]  # settings fit chose beyond the user's, each with why
    tried: tuple[Tried, ...]  # other settings tried, with what each gave
    price: Price | None
    users: int
    is_candidate: bool = False
    decode: DecodeBound | None = None
    decode_note: str | None = None  # why there is no decode bound
    price_note: str | None = None  # why there is no price

    @property
    def status(self) -> str:
        return self.outcome.status

    @property
    def cost_per_hour(self) -> float | None:
        return None if self.price is None else round(self.price.usd_per_gpu_hour * self.count, 4)

    @property
    def headroom(self) -> float | None:
        """Spare KV capacity: max concurrency at C over the N users asked for, minus one."""
        conc = self.outcome.concurrency
        return None if conc is None else round(conc / self.users - 1, 4)

    @property
    def headroom_low(self) -> float | None:
        """The headroom at the low end of the plan's concurrency range (the value where it states none)."""
        conc = self.outcome.concurrency_low if self.outcome.concurrency_low is not None else self.outcome.concurrency
        return None if conc is None else round(conc / self.users - 1, 4)

    def rank_key(self) -> tuple[int, bool, float, float, str]:
        """By cost per hour, then KV headroom at the low end of its range; unpriced GPUs after the priced
        ones, fewest GPUs first."""
        order = {"feasible": 0, "infeasible": 1, "unknown": 2}[self.status]
        cost = self.cost_per_hour
        return (order, cost is None, self.count if cost is None else cost, -(self.headroom_low or 0.0), self.gpu.name)

    def plan_args(self) -> list[str]:
        """`apron plan` arguments that make the same plan."""
        user = self.user
        args = ["--gpu", self.gpu.name, "--tp", str(user.tensor_parallel_size)]
        args += ["--max-model-len", str(user.max_model_len), "--engine", f"vllm=={self.plan.engine_version}"]
        for flag, value in (
            ("--max-num-seqs", user.max_num_seqs),
            ("--gpu-memory-utilization", user.gpu_memory_utilization),
            ("--max-num-batched-tokens", user.max_num_batched_tokens),
        ):
            if value is not None:
                args += [flag, str(value)]
        if user.kv_cache_dtype != "auto":
            args += ["--kv-cache-dtype", user.kv_cache_dtype]
        if user.dtype != "auto":
            args += ["--dtype", user.dtype]
        args += ["--enforce-eager"] if user.enforce_eager else []
        args += ["--language-model-only"] if user.language_model_only else []
        return args

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.name,
            "count": self.count,
            "tensor_parallel_size": self.user.tensor_parallel_size,
            "status": self.status,
            "reason": self.outcome.reason,
            "candidate": self.is_candidate,
            "price": None if self.price is None else self.price.to_json(),
            "price_note": self.price_note,
            "cost_per_hour_usd": self.cost_per_hour,
            "max_concurrency": self.outcome.concurrency,
            "max_concurrency_low": self.outcome.concurrency_low,
            "kv_headroom": self.headroom,
            "kv_headroom_low": self.headroom_low,
            "interconnect": self.interconnect,
            "decode_bound": self._decode_json(),
            "tight": self.status == "feasible" and is_tight(self.plan, self.users),
            "verdict": self.plan.verdict,
            "flags": list(self.plan.flags),
            "changes": list(self.changes),
            "tried": [t.to_json() for t in self.tried],
            "command": self.plan.command,
            "apron_plan": ["apron", "plan", self.plan.model.source, *self.plan_args()],
            "settings": self.plan.settings.to_json(),
        }

    @property
    def interconnect(self) -> str:
        if self.count == 1:
            return "single GPU"
        return self.gpu.interconnect.for_count(self.count)[0] if self.gpu.interconnect else "unknown"

    def _decode_json(self) -> dict[str, Any] | None:
        if self.decode is not None:
            return self.decode.to_json()
        if self.decode_note is None:
            return None
        return {"tokens_per_second_per_user": None, "label": "unknown", "basis": self.decode_note}


@frozen
class FitResult:
    request: FitRequest
    checkpoint: Checkpoint
    engine_version: str
    engine_note: str
    prices: PriceTable
    rows: tuple[FitRow, ...]  # ranked
    notes: tuple[str, ...] = field(default=())
    candidate: Candidate | None = None

    @property
    def feasible(self) -> list[FitRow]:
        return [r for r in self.rows if r.status == "feasible"]

    def to_json(self) -> dict[str, Any]:
        best = self.feasible[0] if self.feasible else None
        return {
            "schema": SCHEMA,
            "model": {
                "source": self.checkpoint.source,
                "repo_id": self.checkpoint.repo_id,
                "revision": self.checkpoint.revision,
                "architecture": self.checkpoint.architecture,
            },
            "engine": {"name": "vllm", "version": self.engine_version, "basis": self.engine_note},
            "request": {
                "users": self.request.users,
                "context_tokens": self.request.context_tokens,
                "gpus": [g.name for g in self.request.gpus],
                "gpu_counts": list(counts(self.request.max_gpus)),
                "tier": self.request.tier,
                "provider": self.request.provider,
                "allow_fp8_kv": self.request.allow_fp8_kv,
                "min_tokens_per_second": self.request.min_tokens_per_second,
            },
            "prices": {**self.prices.describe(), "label": "estimate: public list prices, not a quote"},
            "num_feasible": len(self.feasible),
            "best": None if best is None else best.to_json(),
            "configurations": [r.to_json() for r in self.rows],
            "notes": list(self.notes),
            "candidate": self._candidate_json(),
        }

    def _candidate_json(self) -> dict[str, Any] | None:
        if self.candidate is None:
            return None
        own = next((r for r in self.rows if r.is_candidate), None)
        return self.candidate.to_json(None if own is None else own.plan.verdict)


def counts(max_gpus: int) -> tuple[int, ...]:
    return tuple(n for n in GPU_COUNTS if n <= max_gpus)


def fit(checkpoint: Checkpoint, request: FitRequest, prices: PriceTable) -> FitResult:
    """Plan every GPU x count in-process and rank the feasible ones by price, then KV headroom."""
    facts, engine_note = choose_engine(checkpoint.architecture, request.engine_version)
    config = model_config(checkpoint)
    configs = [(gpu, n, False) for gpu in request.gpus for n in counts(request.max_gpus)]
    for gpu, n in request.extra:
        matches = [i for i, (g, m, _) in enumerate(configs) if g.name == gpu.name and m == n]
        if matches:
            configs[matches[0]] = (gpu, n, True)
        else:
            configs.append((gpu, n, True))
    rows = []
    for gpu, n, is_candidate in configs:
        price = prices.price(gpu.name, request.tier, request.provider)
        row = search(checkpoint, gpu, n, request, facts, price)
        note = None if price else prices.no_price_reason(gpu.name, request.tier, request.provider)
        rows.append(with_decode_bound(replace(row, is_candidate=is_candidate, price_note=note), config, request))
    notes = () if request.tier == "on-demand" else (f"prices are the {request.tier} tier",)
    return FitResult(
        request, checkpoint, facts.version, engine_note, prices, tuple(sorted(rows, key=FitRow.rank_key)), notes
    )


def with_decode_bound(row: FitRow, config: ModelConfig, request: FitRequest) -> FitRow:
    """A feasible row with its decode bound (plan/decode.py); below --min-tokens-per-second it no
    longer serves the load, and says so."""
    min_tokens_per_second = request.min_tokens_per_second
    if row.status != "feasible":
        return row
    bound, note = decode_bound(row.plan, config, row.gpu, row.users)
    row = replace(row, decode=bound, decode_note=note)
    if min_tokens_per_second is None:
        return row
    if bound is None:
        reason = f"--min-tokens-per-second {min_tokens_per_second:g} cannot be checked: {note}"
    elif bound.tokens_per_second_per_user < min_tokens_per_second:
        reason = (
            f"decode is bounded at {bound.tokens_per_second_per_user:.1f} tokens/s per user, below "
            f"--min-tokens-per-second {min_tokens_per_second:g}"
        )
    else:
        return row
    return replace(row, outcome=replace(row.outcome, status="infeasible", reason=reason))


def search(
    checkpoint: Checkpoint, gpu: Gpu, count: int, request: FitRequest, facts: EngineFacts, price: Price | None
) -> FitRow:
    """The plan at the user's settings; where KV falls short, the strongest alternative first (if even
    that fails, none will: each only adds KV memory), then the milder ones, keeping the mildest that works.
    fp8 KV is among them only with --allow-fp8-kv; without it a row that stays short says what fp8 gives."""
    users = request.users
    user = replace(request.base, tensor_parallel_size=count, max_model_len=request.context_tokens)

    def plan_for(settings: UserSettings) -> Plan:
        return plan_checkpoint(checkpoint, gpu, settings, facts.version)

    plan = plan_for(user)
    changes: list[str] = []
    default_seqs = plan.settings.max_num_seqs
    if request.base.max_num_seqs is None and default_seqs < users:
        user = replace(user, max_num_seqs=users)
        plan = plan_for(user)
        changes.append(f"--max-num-seqs {users}: the default {default_seqs} is below {users} users")
    outcome = evaluate(plan, users, request.context_tokens)
    row = FitRow(gpu, count, outcome, plan, user, tuple(changes), (), price, users)
    if outcome.status == "feasible" or not outcome.is_kv_short:
        return row
    options = alternatives(user, plan, request.base, users, gpu, facts, allow_fp8_kv=request.allow_fp8_kv)
    skipped = fp8_kv_refusal(facts, gpu, plan) if request.base.kv_cache_dtype == "auto" else None
    notes = (Tried(FP8_KV, None, f"not tried: {skipped}"),) if skipped else ()
    found, tried = _first_that_serves(options, plan_for, users, request.context_tokens)
    if found is None:
        offer = _fp8_offer(user, plan, request, gpu, facts, plan_for)
        return replace(row, tried=(*tried, *offer, *notes))
    change, settings, other, result = found
    why = f"the defaults hold only {outcome.concurrency or 0:.2f} requests of {request.context_tokens:,} tokens"
    chosen = f"{change}: {why}" + (f"; {_fp8_effect(plan, other)}" if FP8_KV in change else "")
    return FitRow(gpu, count, result, other, settings, (*changes, chosen), (*tried, *notes), price, users)


Found = tuple[str, UserSettings, Plan, Outcome]


def _first_that_serves(
    options: list[tuple[str, UserSettings]], plan_for: Callable[[UserSettings], Plan], users: int, context_tokens: int
) -> tuple[Found | None, tuple[Tried, ...]]:
    """The mildest option that serves the load, and what the ones tried before it gave. The strongest
    is planned first: if even it fails, every milder one does too (each only adds KV memory)."""
    if not options:
        return None, ()
    change, settings = options[-1]
    strongest = plan_for(settings)
    result = evaluate(strongest, users, context_tokens)
    if result.status != "feasible":
        return None, (Tried(change, result.concurrency, result.reason),)
    tried: list[Tried] = []
    for milder, milder_settings in options[:-1]:
        other = plan_for(milder_settings)
        outcome = evaluate(other, users, context_tokens)
        if outcome.status == "feasible":
            return (milder, milder_settings, other, outcome), tuple(tried)
        tried.append(Tried(milder, outcome.concurrency, outcome.reason))
    return (change, settings, strongest, result), tuple(tried)


def _fp8_offer(
    user: UserSettings,
    plan: Plan,
    request: FitRequest,
    gpu: Gpu,
    facts: EngineFacts,
    plan_for: Callable[[UserSettings], Plan],
) -> tuple[Tried, ...]:
    """Without consent, what the strongest setting with fp8 KV would hold (planned, not chosen)."""
    if request.allow_fp8_kv or request.base.kv_cache_dtype != "auto" or fp8_kv_refusal(facts, gpu, plan):
        return ()
    lower = request.base.max_num_seqs is None and effective_max_num_seqs(plan) > request.users
    settings = replace(user, kv_cache_dtype="fp8", max_num_seqs=request.users if lower else user.max_num_seqs)
    change = (f"--max-num-seqs {request.users} " if lower else "") + FP8_KV
    result = evaluate(plan_for(settings), request.users, request.context_tokens)
    serves = "would serve the load" if result.status == "feasible" else (result.reason or "falls short")
    return (Tried(change, result.concurrency, f"not chosen without --allow-fp8-kv: {serves}", needs_consent=True),)


def _fp8_effect(before: Plan, after: Plan) -> str:
    backends = [(p.details.get("kv") or {}).get("backend") for p in (before, after)]
    effect = FP8_KV_EFFECT.replace("can change with it", "stays " + str(backends[0]))
    if backends[0] != backends[1]:
        effect = FP8_KV_EFFECT.replace("can change with it", f"changes from {backends[0]} to {backends[1]}")
    return effect


@frozen
class Tried:
    change: str
    concurrency: float | None
    result: str | None
    needs_consent: bool = False  # planned to show what it gives; fit may not choose it (--allow-fp8-kv)

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "max_concurrency": self.concurrency,
            "result": self.result,
            "needs_consent": self.needs_consent,
        }


def alternatives(
    user: UserSettings,
    plan: Plan,
    base: UserSettings,
    users: int,
    gpu: Gpu,
    facts: EngineFacts,
    *,
    allow_fp8_kv: bool = False,
) -> list[tuple[str, UserSettings]]:
    """Settings that leave more memory to the KV cache, mildest first: a lower max_num_seqs shrinks
    the sampler moment and the CUDA-graph capture sizes; fp8 halves a 16-bit KV cache (with consent)."""
    seqs = effective_max_num_seqs(plan)
    lower = base.max_num_seqs is None and seqs > users
    fp8 = allow_fp8_kv and base.kv_cache_dtype == "auto" and fp8_kv_refusal(facts, gpu, plan) is None
    lowered = replace(user, max_num_seqs=users)
    options = []
    if lower:
        options.append((f"--max-num-seqs {users}", lowered))
    if fp8:
        options.append((FP8_KV, replace(user, kv_cache_dtype="fp8")))
    if lower and fp8:
        options.append((f"--max-num-seqs {users} {FP8_KV}", replace(lowered, kv_cache_dtype="fp8")))
    return options


def evaluate(plan: Plan, users: int, context_tokens: int) -> Outcome:
    """Feasible, infeasible (with the one reason) or unknown, for N users at C tokens."""
    if plan.verdict == "unknown":
        return Outcome("unknown", plan.unknowns[0] if plan.unknowns else "the plan is unknown")
    if plan.verdict == "unsupported":
        return Outcome("infeasible", f"the release refuses: {unsupported_summary(plan)}")
    if plan.verdict != "fits":
        return _does_not_fit(plan, context_tokens)
    concurrency = plan.quantities["max_concurrency"].value
    if concurrency is None:
        return Outcome("unknown", plan.quantities["max_concurrency"].basis)
    seqs = effective_max_num_seqs(plan)
    low = low_end(plan.quantities["max_concurrency"])
    if concurrency < users:
        reason = f"KV holds only {concurrency:.2f} requests of {context_tokens:,} tokens"
        return Outcome("infeasible", reason, True, concurrency, low)
    if seqs < users:
        reason = f"--max-num-seqs {seqs} (the state blocks that fit) is below {users} users"
        return Outcome("infeasible", reason, True, concurrency, low)
    return Outcome("feasible", None, False, concurrency, low)


def low_end(quantity: Quantity) -> float | None:
    """The low end of a quantity's stated range (plan/quantity.py Quantity.low, where the release of
    Apron has it), else None: callers fall back to the value."""
    low = getattr(quantity, "low", None)
    return float(low) if isinstance(low, (int, float)) else None


def _does_not_fit(plan: Plan, context_tokens: int) -> Outcome:
    refused = _layout_refusal(plan)
    if refused is not None:
        return Outcome("infeasible", refused)
    by_kind = {p.kind: p for p in reversed(plan.problems)}
    if "weights_exceed_request" in by_kind:
        return Outcome("infeasible", "weights do not fit: " + by_kind["weights_exceed_request"].message.split(";")[0])
    refusals = [p for p in plan.problems if p.label == "proven_constraint" and p.kind not in _ADVISORY]
    if refusals:
        return Outcome("infeasible", f"the release refuses: {refusals[0].message}")
    for kind in _KV_PROBLEMS:
        if kind in by_kind:
            return Outcome("infeasible", _less_than_one(by_kind[kind].message, context_tokens), True, 0.0)
    first = plan.problems[0].message if plan.problems else "the plan does not fit"
    return Outcome("infeasible", first)


def _layout_refusal(plan: Plan) -> str | None:
    """A parallel degree vLLM refuses (plan/parallel.py), in one line: first, since it never boots."""
    section = plan.details.get("parallel") or {}
    failing = [c for c in section.get("checks", []) if c.get("failure")]
    if not failing:
        return None
    passing = ", ".join(map(str, section.get("passing_tensor_parallel_sizes", []))) or "none up to 8"
    first = failing[0]
    return (
        f"the release refuses TP {plan.settings.tensor_parallel_size} (check {first['check']}: {first['failure']}); "
        f"TP that pass: {passing}"
    )


def _less_than_one(message: str, context_tokens: int) -> str:
    """The engine's refusal (v1/core/kv_cache_utils.py _check_enough_kv_cache_memory), in fewer words."""
    match = re.search(r"\(([\d.]+) GiB KV cache is needed.*?available KV cache memory \(([-\d.]+) GiB\)", message)
    if not match:
        return f"KV holds less than one request of {context_tokens:,} tokens: {message}"
    return (
        f"KV holds less than one request of {context_tokens:,} tokens "
        f"({match.group(1)} GiB needed, {match.group(2)} GiB predicted)"
    )


def is_tight(plan: Plan, users: int) -> bool:
    """The KV left over after N requests is within the budget prediction's error band (plan/memory.py
    MARGIN_BYTES): the real boot could hold fewer than N."""
    q = plan.quantities
    conc, blocks, block_bytes = q["max_concurrency"].value, q["num_kv_blocks"].value, q["kv_block_bytes"].value
    if not conc or blocks is None or block_bytes is None:
        return False
    spare_bytes = (conc - users) / conc * blocks * block_bytes
    return spare_bytes < MARGIN_BYTES


def effective_max_num_seqs(plan: Plan) -> int:
    """The batch the engine will run: the plan's own `--max-num-seqs K` (hybrids) wins over the setting."""
    seqs = plan.settings.max_num_seqs
    for flag in plan.flags:
        words = flag.split()
        if words[0] == "--max-num-seqs" and len(words) == 2:
            seqs = int(words[1])
    return seqs


def fp8_kv_refusal(facts: EngineFacts, gpu: Gpu, plan: Plan) -> str | None:
    """Why `--kv-cache-dtype fp8` is not tried here, or None where the release offers it on this GPU:
    a backend on the release's priority list for this compute capability (platforms/cuda.py
    _get_backend_priorities) that lists fp8 among its supported_kv_cache_dtypes. Below compute
    capability 8.0 only Triton attention is left, whose fp8 path is not modelled."""
    if gpu.compute_capability < (8, 0):
        return f"compute capability {gpu.compute_capability[0]}.{gpu.compute_capability[1]} is below 8.0"
    is_mla = "MLA" in str(plan.details.get("kv", {}).get("backend", ""))
    names = facts.backend_priority(gpu.compute_capability, use_mla=is_mla) or []
    for name in names:
        if "fp8" in ((facts.attention_backend(name) or {}).get("supported_kv_cache_dtypes") or []):
            return None
    return f"no {'MLA ' if is_mla else ''}attention backend of vLLM {facts.version} reads an fp8 KV cache here"


@frozen
class FitQuery:
    """`apron fit` as the CLI and the MCP tool receive it."""

    source: str | None
    users: int
    context_tokens: int | None
    gpus: str | None = None  # comma-separated names or aliases; None: the whole catalog
    max_gpus: int = 8
    tier: str = "on-demand"
    engine_version: str | None = None
    prices: str | None = None  # a price file replacing the bundled table
    revision: str | None = None
    use_catalog: bool = True
    settings: dict[str, Any] = field(default_factory=dict)  # UserSettings fields the user set
    candidate_file: str | None = None  # --from FILE: a deployment to seed the search with
    candidate_name: str | None = None  # --name: which deployment of the file
    allow_fp8_kv: bool = False
    min_tokens_per_second: float | None = None
    provider: str | None = None


def run_fit(query: FitQuery) -> FitResult:
    if query.tier not in TIERS:
        raise BadInput(f"--tier {query.tier!r} must be one of {', '.join(TIERS)}")
    if query.candidate_file:
        from apron.plan import candidate as seeded  # deployment files are read for --from only
    candidate = _one_candidate(query) if query.candidate_file else None
    written = (
        str(candidate.model.value) if candidate and candidate.model and not candidate.model_is_unresolved else None
    )
    if query.source and written and query.source != written:
        raise BadInput(f"SOURCE {query.source} differs from the model {written} in {query.candidate_file}; give one")
    source = query.source or written
    if not source:
        raise BadInput("give SOURCE (a model) or --from FILE (a deployment naming one)")
    engine, note = (
        seeded.candidate_engine(candidate, query.engine_version) if candidate else (query.engine_version, None)
    )
    if candidate is not None and engine and engine != candidate.release_read:
        candidate = candidate.for_release(engine)
    context = query.context_tokens or (candidate.args.settings.get("max_model_len") if candidate else None)
    if not context:
        raise BadInput("--context is required (the tokens each request may hold; --max-model-len is the same)")
    base = seeded.candidate_settings(candidate, query.settings) if candidate else UserSettings(**query.settings)
    gpus = tuple(resolve_gpu(g.strip()) for g in query.gpus.split(",") if g.strip()) if query.gpus else all_gpus()
    extra: tuple[tuple[Gpu, int], ...] = ()
    if candidate is not None and candidate.gpu is not None:
        # the file's own shape: the GPUs vLLM uses (its tensor parallel size), else the GPUs it rents
        count = base.tensor_parallel_size if "tensor_parallel_size" in candidate.settings else None
        rented = candidate.gpu_count.value if candidate.gpu_count and isinstance(candidate.gpu_count.value, int) else 1
        extra = ((seeded.candidate_gpu(candidate), count or rented),)
    prices = load_prices(query.prices)
    request = FitRequest(
        query.users,
        context,
        gpus,
        query.max_gpus,
        query.tier,
        engine,
        base,
        extra,
        allow_fp8_kv=query.allow_fp8_kv,
        provider=prices.provider(query.provider),
        min_tokens_per_second=query.min_tokens_per_second,
    )
    revision = query.revision or (str(candidate.revision.value) if candidate and candidate.revision else None)
    checkpoint = load_checkpoint(source, revision, use_catalog=query.use_catalog)
    result = fit(checkpoint, request, prices)
    notes = result.notes + ((note,) if note else ())
    if candidate is not None:
        rows = tuple(replace(r, plan=replace(r.plan, command=seeded.file_command(candidate, checkpoint, r.plan, r.user)))
                     for r in result.rows)  # fmt: skip
        refused = candidate.args.of("refused")
        if refused:
            notes += (f"vllm serve {candidate.release_read} refuses the file's {', '.join(refused)}: drop it",)
        result = replace(result, rows=rows)
    return replace(result, candidate=candidate, notes=notes)


def _one_candidate(query: FitQuery) -> Candidate:
    from apron.deploy import pick, read_deployments

    assert query.candidate_file is not None
    chosen = pick(read_deployments(query.candidate_file), query.candidate_name)
    if len(chosen) > 1:
        names = ", ".join(repr(c.name) for c in chosen)
        raise BadInput(f"{query.candidate_file} holds {len(chosen)} deployments ({names}): pick one with --name")
    return chosen[0]
