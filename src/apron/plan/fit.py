"""The cheapest GPU x count that serves N users at a context of C tokens (`apron fit`).

Every configuration is one in-process plan (`plan_checkpoint`) with `--max-model-len C` and
`--tensor-parallel-size` equal to the GPUs rented. A configuration is feasible when that plan fits
and the KV pool holds N requests of C tokens by vLLM's own concurrency formula (the plan's
`max_concurrency`: v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config, which counts
a hybrid's state blocks per request) with `max_num_seqs` >= N. Where the defaults fall short on KV,
a lower `--max-num-seqs` (smaller sampler and CUDA-graph terms) and `--kv-cache-dtype fp8` (where
the GPU and release support it) are tried, and the row says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from apron.checkpoint import Checkpoint, load_checkpoint
from apron.deploy import Candidate, pick, read_deployments
from apron.engine.facts import EngineFacts
from apron.errors import BadInput
from apron.hardware import Gpu, all_gpus, resolve_gpu
from apron.hardware.prices import TIERS, Price, PriceTable, load_prices
from apron.plan.candidate import candidate_engine, candidate_gpu, candidate_settings, file_command
from apron.plan.memory import MARGIN_BYTES
from apron.plan.planner import choose_engine, plan_checkpoint, unsupported_summary
from apron.plan.result import Plan
from apron.plan.settings import UserSettings

SCHEMA = "apron.fit/1"
# Machines are rented in these sizes; a plan at TP 3 would rent 4 (research/gpu-prices.md).
GPU_COUNTS = (1, 2, 4, 8)
_KV_PROBLEMS = ("kv_cache_too_small", "no_kv_memory")
# Problems the plan works around with a flag or that do not stop a boot (plan/planner.py _ADVISORY).
_ADVISORY = ("max_num_seqs_exceeds_state_blocks", "reasoning_parser_missing", "tool_parser_missing")


@dataclass(frozen=True)
class FitRequest:
    users: int
    context_tokens: int
    gpus: tuple[Gpu, ...]
    max_gpus: int = 8
    tier: str = "on-demand"
    engine_version: str | None = None
    base: UserSettings = UserSettings()  # the user's settings; fit sets tensor_parallel_size and max_model_len
    extra: tuple[tuple[Gpu, int], ...] = ()  # configurations outside the sweep (a candidate's own)

    def __post_init__(self) -> None:
        if self.users < 1:
            raise BadInput(f"--users {self.users} must be 1 or more")
        if self.context_tokens < 1:
            raise BadInput(f"--context {self.context_tokens} must be a positive number of tokens")
        if self.max_gpus < 1:
            raise BadInput(f"--max-gpus {self.max_gpus} must be 1 or more")
        if not self.gpus and not self.extra:
            raise BadInput("--gpus names no GPU")


@dataclass(frozen=True)
class Outcome:
    status: str  # feasible | infeasible | unknown
    reason: str | None
    is_kv_short: bool = False  # a KV setting could change the answer
    concurrency: float | None = None


@dataclass(frozen=True)
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

    def rank_key(self) -> tuple[int, bool, float, float, str]:
        """By cost per hour, then KV headroom; unpriced GPUs after the priced ones, fewest GPUs first."""
        order = {"feasible": 0, "infeasible": 1, "unknown": 2}[self.status]
        cost = self.cost_per_hour
        return (order, cost is None, self.count if cost is None else cost, -(self.headroom or 0.0), self.gpu.name)

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
            "cost_per_hour_usd": self.cost_per_hour,
            "max_concurrency": self.outcome.concurrency,
            "kv_headroom": self.headroom,
            "tight": self.status == "feasible" and is_tight(self.plan, self.users),
            "verdict": self.plan.verdict,
            "flags": list(self.plan.flags),
            "changes": list(self.changes),
            "tried": [t.to_json() for t in self.tried],
            "command": self.plan.command,
            "apron_plan": ["apron", "plan", self.plan.model.source, *self.plan_args()],
            "settings": self.plan.settings.to_json(),
        }


@dataclass(frozen=True)
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
    configs = [(gpu, n, False) for gpu in request.gpus for n in counts(request.max_gpus)]
    for gpu, n in request.extra:
        matches = [i for i, (g, m, _) in enumerate(configs) if g.name == gpu.name and m == n]
        if matches:
            configs[matches[0]] = (gpu, n, True)
        else:
            configs.append((gpu, n, True))
    rows = [
        replace(
            search(checkpoint, gpu, n, request, facts, prices.price(gpu.name, request.tier)),
            is_candidate=is_candidate,
        )
        for gpu, n, is_candidate in configs
    ]
    notes = () if request.tier == "on-demand" else (f"prices are the {request.tier} tier",)
    return FitResult(
        request, checkpoint, facts.version, engine_note, prices, tuple(sorted(rows, key=FitRow.rank_key)), notes
    )


def search(
    checkpoint: Checkpoint, gpu: Gpu, count: int, request: FitRequest, facts: EngineFacts, price: Price | None
) -> FitRow:
    """The plan at the user's settings; where KV falls short, the strongest alternative first (if even
    that fails, none will: each only adds KV memory), then the milder ones, keeping the mildest that works."""
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
    options = list(alternatives(user, plan, request.base, users, gpu, facts))
    skipped = fp8_kv_refusal(facts, gpu, plan) if request.base.kv_cache_dtype == "auto" else None
    notes = (Tried("--kv-cache-dtype fp8", None, f"not tried: {skipped}"),) if skipped else ()
    if not options:
        return replace(row, tried=notes)
    why = f"the defaults hold only {outcome.concurrency or 0:.2f} requests of {request.context_tokens:,} tokens"
    change, settings = options[-1]
    other = plan_for(settings)
    result = evaluate(other, users, request.context_tokens)
    if result.status != "feasible":
        # The strongest option failed, so every milder one does too: each only adds KV memory.
        return replace(row, tried=(Tried(change, result.concurrency, result.reason), *notes))
    found = FitRow(gpu, count, result, other, settings, (*changes, f"{change}: {why}"), notes, price, users)
    tried: list[Tried] = []
    for change, settings in options[:-1]:
        other = plan_for(settings)
        result = evaluate(other, users, request.context_tokens)
        if result.status == "feasible":
            return FitRow(
                gpu, count, result, other, settings, (*changes, f"{change}: {why}"), tuple(tried), price, users
            )
        tried.append(Tried(change, result.concurrency, result.reason))
    return replace(found, tried=(*tried, *notes))


@dataclass(frozen=True)
class Tried:
    change: str
    concurrency: float | None
    result: str | None

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "max_concurrency": self.concurrency, "result": self.result}


def alternatives(
    user: UserSettings, plan: Plan, base: UserSettings, users: int, gpu: Gpu, facts: EngineFacts
) -> list[tuple[str, UserSettings]]:
    """Settings that leave more memory to the KV cache, mildest first: a lower max_num_seqs shrinks
    the sampler moment and the CUDA-graph capture sizes; fp8 halves a 16-bit KV cache."""
    seqs = effective_max_num_seqs(plan)
    lower = base.max_num_seqs is None and seqs > users
    fp8 = base.kv_cache_dtype == "auto" and fp8_kv_refusal(facts, gpu, plan) is None
    lowered = replace(user, max_num_seqs=users)
    options = []
    if lower:
        options.append((f"--max-num-seqs {users}", lowered))
    if fp8:
        options.append(("--kv-cache-dtype fp8", replace(user, kv_cache_dtype="fp8")))
    if lower and fp8:
        options.append((f"--max-num-seqs {users} --kv-cache-dtype fp8", replace(lowered, kv_cache_dtype="fp8")))
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
    if concurrency < users:
        reason = f"KV holds only {concurrency:.2f} requests of {context_tokens:,} tokens"
        return Outcome("infeasible", reason, True, concurrency)
    if seqs < users:
        reason = f"--max-num-seqs {seqs} (the state blocks that fit) is below {users} users"
        return Outcome("infeasible", reason, True, concurrency)
    return Outcome("feasible", None, False, concurrency)


def _does_not_fit(plan: Plan, context_tokens: int) -> Outcome:
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


@dataclass(frozen=True)
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


def run_fit(query: FitQuery) -> FitResult:
    if query.tier not in TIERS:
        raise BadInput(f"--tier {query.tier!r} must be one of {', '.join(TIERS)}")
    candidate = _one_candidate(query) if query.candidate_file else None
    written = (
        str(candidate.model.value) if candidate and candidate.model and not candidate.model_is_unresolved else None
    )
    if query.source and written and query.source != written:
        raise BadInput(f"SOURCE {query.source} differs from the model {written} in {query.candidate_file}; give one")
    source = query.source or written
    if not source:
        raise BadInput("give SOURCE (a model) or --from FILE (a deployment naming one)")
    engine, note = candidate_engine(candidate, query.engine_version) if candidate else (query.engine_version, None)
    if candidate is not None and engine and engine != candidate.release_read:
        candidate = candidate.for_release(engine)
    context = query.context_tokens or (candidate.args.settings.get("max_model_len") if candidate else None)
    if not context:
        raise BadInput("--context is required (the tokens each request may hold; --max-model-len is the same)")
    base = candidate_settings(candidate, query.settings) if candidate else UserSettings(**query.settings)
    gpus = tuple(resolve_gpu(g.strip()) for g in query.gpus.split(",") if g.strip()) if query.gpus else all_gpus()
    extra: tuple[tuple[Gpu, int], ...] = ()
    if candidate is not None and candidate.gpu is not None:
        # the file's own shape: the GPUs vLLM uses (its tensor parallel size), else the GPUs it rents
        count = base.tensor_parallel_size if "tensor_parallel_size" in candidate.settings else None
        rented = candidate.gpu_count.value if candidate.gpu_count and isinstance(candidate.gpu_count.value, int) else 1
        extra = ((candidate_gpu(candidate), count or rented),)
    request = FitRequest(query.users, context, gpus, query.max_gpus, query.tier, engine, base, extra)
    revision = query.revision or (str(candidate.revision.value) if candidate and candidate.revision else None)
    checkpoint = load_checkpoint(source, revision, use_catalog=query.use_catalog)
    result = fit(checkpoint, request, load_prices(query.prices))
    notes = result.notes + ((note,) if note else ())
    if candidate is not None:
        rows = tuple(replace(r, plan=replace(r.plan, command=file_command(candidate, checkpoint, r.plan, r.user)))
                     for r in result.rows)  # fmt: skip
        refused = candidate.args.of("refused")
        if refused:
            notes += (f"vllm serve {candidate.release_read} refuses the file's {', '.join(refused)}: drop it",)
        result = replace(result, rows=rows)
    return replace(result, candidate=candidate, notes=notes)


def _one_candidate(query: FitQuery) -> Candidate:
    assert query.candidate_file is not None
    chosen = pick(read_deployments(query.candidate_file), query.candidate_name)
    if len(chosen) > 1:
        names = ", ".join(repr(c.name) for c in chosen)
        raise BadInput(f"{query.candidate_file} holds {len(chosen)} deployments ({names}): pick one with --name")
    return chosen[0]
