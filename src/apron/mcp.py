"""`apron mcp`: Apron's tools for agents, over the Model Context Protocol on stdio.

Each tool returns the JSON document the matching CLI command prints with `--json` (as text, and as
structured content); bad arguments come back as a tool error carrying the CLI's one-line message.
Needs the official SDK: pip install 'apron[mcp]'.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from apron.errors import ApronError, BadInput

INSTRUCTIONS = (
    "Apron answers, before anyone rents a GPU, whether an exact LLM checkpoint fits, boots and answers on a "
    "GPU with a vLLM release, and with which flags. `plan` checks one GPU; `fit` finds the cheapest GPU x "
    "count for N users at a context of C tokens; `diagnose` reads a failed boot's log. Every number says "
    "how it is known (derived, predicted, measured or unknown)."
)


def _document(build: Callable[[], Any]) -> Any:
    """Run a tool body; Apron's own errors become MCP tool errors carrying the CLI's one-line message."""
    from mcp.types import CallToolResult, TextContent

    try:
        doc = build()
    except ApronError as exc:
        return CallToolResult(content=[TextContent(type="text", text=exc.message)], is_error=True)
    text = json.dumps(doc, indent=2, sort_keys=False)
    structured = doc if isinstance(doc, dict) else {"result": doc}
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _engine(spec: str | None) -> str | None:
    from apron.engine.facts import parse_engine_spec

    return parse_engine_spec(spec) if spec else None


def _settings(**given: Any) -> dict:
    return {name: value for name, value in given.items() if value is not None}


def plan(
    source: str | None = None,
    gpu: str | None = None,
    tp: int | None = None,
    engine: str | None = None,
    revision: str | None = None,
    max_model_len: int | None = None,
    gpu_memory_utilization: float | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    enforce_eager: bool | None = None,
    language_model_only: bool | None = None,
    from_file: str | None = None,
) -> Any:
    """Will SOURCE (a Hub repo id, a folder or a snapshot file) fit on GPU (a PyTorch device name or an
    alias like H100) with this vLLM release (engine: vllm==X)? Returns the apron.plan/1 document.
    from_file: a deployment another tool proposed (vllm serve command line, recipe, SkyPilot or
    Kubernetes YAML) to check instead of SOURCE."""
    given = _settings(
        tensor_parallel_size=tp,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_cache_dtype=kv_cache_dtype,
        dtype=dtype,
        enforce_eager=enforce_eager,
        language_model_only=language_model_only,
    )

    def build() -> dict:
        if from_file:
            from apron.plan.candidate import GpuRequest, deployments_json, plan_deployments

            plans = plan_deployments(from_file, None, source, GpuRequest(gpu), given, _engine(engine))
            return deployments_json(plans)
        if not source:
            raise BadInput("Missing argument 'SOURCE': give a model, or --from FILE (a deployment to check)")
        if not gpu:
            raise BadInput("Missing option '--gpu': the GPU to plan for (or --from FILE, a deployment naming one)")
        from apron.hardware import resolve_gpu
        from apron.plan.planner import PlanRequest, make_plan
        from apron.plan.settings import UserSettings

        request = PlanRequest(source, resolve_gpu(gpu), UserSettings(**given), _engine(engine), revision)
        return make_plan(request).to_json()

    return _document(build)


def fit(
    users: int,
    context: int | None = None,
    source: str | None = None,
    gpus: str | None = None,
    max_gpus: int = 8,
    engine: str | None = None,
    revision: str | None = None,
    prices: str | None = None,
    tier: str = "on-demand",
    gpu_memory_utilization: float | None = None,
    max_num_seqs: int | None = None,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    from_file: str | None = None,
    provider: str | None = None,
    allow_fp8_kv: bool = False,
    min_tokens_per_second: float | None = None,
) -> Any:
    """The cheapest GPU x count (from a dated price table) that serves `users` requests of `context`
    tokens each, with the flags it needs; infeasible configurations with their reason. Returns the
    apron.fit/1 document (num_feasible 0 when nothing serves the load). gpus: comma-separated names;
    provider: one provider's prices; allow_fp8_kv: fit may switch the KV cache to fp8;
    min_tokens_per_second: drop rows whose decode bound per user is lower."""
    from apron.plan.fit import FitQuery, run_fit

    settings = _settings(
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
        kv_cache_dtype=kv_cache_dtype,
        dtype=dtype,
    )
    return _document(
        lambda: run_fit(
            FitQuery(
                source,
                users,
                context,
                gpus=gpus,
                max_gpus=max_gpus,
                tier=tier,
                engine_version=_engine(engine),
                prices=prices,
                revision=revision,
                settings=settings,
                candidate_file=from_file,
                allow_fp8_kv=allow_fp8_kv,
                min_tokens_per_second=min_tokens_per_second,
                provider=provider,
            )
        ).to_json()
    )


def diagnose(log_text: str, plan: str | None = None, engine: str | None = None, records: str | None = None) -> Any:
    """The decisive error in a failed vLLM boot's log text, the correction rule that answers it, and
    whether the plan knew. plan: a plan JSON file or a plan record id (records: the store folder).
    Returns apron.diagnosis/1."""

    def build() -> dict[str, Any]:
        from apron.records.saved import not_a_plan, saved_plan
        from apron.records.store import RecordStore
        from apron.rules import StatusStore
        from apron.rules import diagnose as run

        store = RecordStore(records)
        known = saved_plan(plan, store) if plan else None
        if plan and known is None:
            raise not_a_plan(f"plan {plan}")
        return run(log_text, plan=known, engine_version=_engine(engine), store=StatusStore(store.rules_dir)).to_json()

    return _document(build)


def records_list(records: str | None = None, kind: str | None = None) -> Any:
    """Every plan, boot and fix record in the store (records: the store folder; kind: plan|boot|fix)."""
    from apron.records.store import RecordStore
    from apron.records.views import list_rows

    def build() -> list:
        if kind not in (None, "plan", "boot", "fix"):
            raise BadInput(f"kind {kind!r} must be plan, boot or fix")
        return list_rows(RecordStore(records), kind)

    return _document(build)


def records_show(record_id: str, records: str | None = None) -> Any:
    """One record by id (a unique prefix is enough)."""
    from apron.records.store import RecordStore
    from apron.records.views import show_document

    return _document(lambda: show_document(RecordStore(records), record_id))


def records_compare(record_id: str, records: str | None = None) -> Any:
    """A boot's measured numbers beside its plan's predictions, with the error per quantity."""
    from apron.records.store import RecordStore
    from apron.records.views import compare_document

    return _document(lambda: compare_document(RecordStore(records), record_id))


def engine_list() -> Any:
    """The vLLM releases Apron has engine facts for (shipped and synced)."""
    from apron.engine.summary import list_rows

    return _document(list_rows)


TOOLS = (plan, fit, diagnose, records_list, records_show, records_compare, engine_list)


def server() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise BadInput("`apron mcp` needs the MCP SDK: pip install 'apron[mcp]'") from None
    from importlib.metadata import version

    app = MCPServer("apron", instructions=INSTRUCTIONS, version=version("apron"), log_level="WARNING")
    for tool in TOOLS:
        app.add_tool(tool, structured_output=False)
    return app


def serve() -> None:
    """Serve on stdio until the client closes the connection."""
    server().run("stdio")
