"""One classifier, robust to what surrounds a message: every wrapper kind and every suffix kind, on the
engine's real template text (the refusal templates and log formats of the shipped engine facts, or the
source line quoted where the facts do not list it)."""

from __future__ import annotations

import pytest

from apron.plan.settings import UserSettings
from apron.rules import diagnose, fingerprint
from apron.rules.catalog import template_family
from rules_text import FACTS_VERSIONS, render, shipped_refusals, template_with

MAMBA = "exceeds available Mamba cache blocks"
KV = "To serve at least one request"
KV_VALUES = {
    "max_model_len": 131072,
    "format_gib(needed_memory)": 16.0,
    "format_gib(available_memory)": 9.31,
    "estimated_msg": "Based on the available memory, the estimated maximum model length is 76144. ",
}
# v1/executor/multiproc_executor.py (0.29.0-0.33.0) WorkerProc.wait_for_ready builds this Exception
# and raises it; it is no `raise X("...")` of its own, so the facts' refusals do not list it.
WORKERPROC = (
    "WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause."
)
TAG = "(EngineCore_DP0 pid=7) ERROR 12-01 10:00:00 [core.py:1] "


def message(version: str, phrase: str, values: dict) -> tuple[str, str]:
    refusal = template_with(shipped_refusals(version), phrase)
    return refusal["exception"], render(refusal["template"], values)


def mamba(version: str) -> tuple[str, str]:
    return message(version, MAMBA, {"max_num_reqs": 1024, "kv_cache_config.num_blocks": 733})


# ------------------------------------------------------------------ suffixes


SUFFIXES = {
    "summary location": " (config/compilation.py:1535 resolve_cudagraph_mode_and_sizes)",
    "ray fold": " [repeated 4x across cluster]",
    "pydantic tail": " [type=value_error, input_value=ArgsKwargs((), {'model_config': ...}), input_type=ArgsKwargs]",
    "a sentence more": " See https://docs.vllm.ai/en/latest/configuration/optimization.html for more details.",
    "a note in brackets": " (raised while capturing CUDA graphs on rank 0)",
}


@pytest.mark.parametrize("version", FACTS_VERSIONS)
@pytest.mark.parametrize("suffix", sorted(SUFFIXES))
def test_a_suffix_never_leaks_into_a_field(version, suffix):
    exception, text = mamba(version)
    for log in (f"{TAG}{exception}: {text}{SUFFIXES[suffix]}", f"{exception}: {text}{SUFFIXES[suffix]}"):
        found = fingerprint(log, engine_version=version)
        assert found.family == "mamba_blocks_below_max_num_seqs"
        assert (found.fields["num_blocks"], found.fields["max_num_seqs"]) == (733, 1024), found.fields
        corrected = _corrected(log, version)
        assert corrected.max_num_seqs is not None and corrected.max_num_seqs <= 733


def test_a_summary_with_its_location_first_or_last():
    exception, text = mamba("0.33.0")
    for line in (
        f"{exception} (config/compilation.py:1535 resolve_cudagraph_mode_and_sizes): {text}",
        f"{exception}: {text} (config/compilation.py:1535 resolve_cudagraph_mode_and_sizes)",
    ):
        found = fingerprint(line, engine_version="0.33.0")
        assert found.fields["num_blocks"] == 733
        assert found.frames == ("config/compilation.py:resolve_cudagraph_mode_and_sizes",)
        assert found.phase == "kv_cache"


def test_a_message_cut_inside_a_number_keeps_the_family_not_the_number():
    exception, text = mamba("0.33.0")
    cut = text[: text.index("(733)") + 3] + "..."  # "... Mamba cache blocks (73..."
    found = fingerprint(f"{exception}: {cut}", engine_version="0.33.0")
    assert found.family == "mamba_blocks_below_max_num_seqs" and "num_blocks" not in found.fields
    assert diagnose(f"{exception}: {cut}", user_settings=UserSettings(max_num_seqs=1024)).applicable == ()


def _corrected(log: str, version: str) -> UserSettings:
    diagnosis = diagnose(log, engine_version=version, user_settings=UserSettings(max_num_seqs=1024))
    (candidate,) = [c for c in diagnosis.applicable if c.match.rule_id == "mamba_max_num_seqs"]
    assert candidate.corrected is not None
    return candidate.corrected


# ------------------------------------------------------------------ wrappers


@pytest.mark.parametrize("version", FACTS_VERSIONS)
def test_worker_failed_with_error_is_unwrapped(version):
    _, wrapper = message(version, "Worker failed with error '{result}'", {"result": render_kv(version)})
    found = fingerprint(f"{TAG}RuntimeError: {wrapper}", engine_version=version)
    assert found.family == "kv_cache_too_small" and found.fields["estimated_max_model_len"] == 76144
    assert found.matched["unwrapped"] == ["worker_failed"] and found.message.startswith(KV)


def render_kv(version: str) -> str:
    return message(version, KV, KV_VALUES)[1]


def test_workerproc_initialization_failed_points_above():
    exception, text = message("0.33.0", KV, KV_VALUES)
    cause = [
        "(Worker_TP0 pid=88) ERROR 12-01 10:00:00 [multiproc_executor.py:1] Traceback (most recent call last):",
        '(Worker_TP0 pid=88) ERROR 12-01 10:00:00 [multiproc_executor.py:1]   File "/x/vllm/v1/worker/gpu_worker.py", '
        "line 1, in determine_available_memory",
        "(Worker_TP0 pid=88) ERROR 12-01 10:00:00 [multiproc_executor.py:1]     raise ValueError(",
        f"(Worker_TP0 pid=88) ERROR 12-01 10:00:00 [multiproc_executor.py:1] {exception}: {text}",
    ]
    wrapper = f"{TAG}Exception: {WORKERPROC}"
    with_cause = fingerprint("\n".join([*cause, wrapper]))
    assert with_cause.family == "kv_cache_too_small" and with_cause.line_number == 4
    alone = fingerprint(wrapper)
    assert (alone.family, alone.blame, alone.fields) == ("cause_not_in_log", "unknown", {"wrapper": "worker_died"})


@pytest.mark.parametrize("version", FACTS_VERSIONS)
def test_enginecore_failed_to_start_then_its_cause(version, apron_home_with_facts):
    from apron.engine.facts import load_facts

    (started,) = {f["format"] for f in load_facts(version).log_formats if f["format"] == "EngineCore failed to start."}
    exception, text = mamba(version)
    head = f"{TAG}{started}"
    below = [
        f"{TAG}Traceback (most recent call last):",
        f'{TAG}  File "/x/vllm/config/compilation.py", line 1535, in resolve_cudagraph_mode_and_sizes',
        f"{TAG}    raise ValueError(",
        f"{TAG}{exception}: {text}",
    ]
    assert fingerprint("\n".join([head, *below]), engine_version=version).fields["num_blocks"] == 733
    inline = fingerprint(f"{head} {exception}: {text}", engine_version=version)
    assert inline.family == "mamba_blocks_below_max_num_seqs" and inline.matched["unwrapped"] == ["inline_cause"]
    alone = fingerprint(head, engine_version=version)
    assert alone.family == "cause_not_in_log" and alone.fields == {"wrapper": "engine_core_init_failed"}


@pytest.mark.parametrize("version", FACTS_VERSIONS)
def test_pydantic_validation_error_for_vllmconfig(version):
    _, text = message(
        version, "is smaller than max_model_len", {"self.max_num_batched_tokens": 2048, "max_model_len": 8192}
    )
    tail = " [type=value_error, input_value=ArgsKwargs((), {'scheduler_config': ...}), input_type=ArgsKwargs]"
    summary = f"ValidationError for VllmConfig: Value error, {text}{tail}"
    printed = "\n".join(
        [
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
            f"  Value error, {text}{tail}",
            "    For further information visit https://errors.pydantic.dev/2.11/v/value_error",
        ]
    )
    for log in (summary, printed):
        found = fingerprint(log, engine_version=version)
        assert found.family == "batched_tokens_below_max_model_len", log
        assert (found.fields["max_num_batched_tokens"], found.fields["max_model_len"]) == (2048, 8192)
        assert found.matched["unwrapped"] == ["pydantic"] and found.exception == "ValueError"


@pytest.mark.parametrize("version", FACTS_VERSIONS)
def test_printf_template_rendered_as_a_tuple(version):
    refusal = template_with(shipped_refusals(version), "The quantization method %s is deprecated")
    log = f"{TAG}{refusal['exception']}: {(refusal['template'], 'fp_quant')!r}"
    found = fingerprint(log, engine_version=version)
    assert (
        found.family == template_family(refusal["template"]) == "refusal.the-quantization-method-is-deprecated-and-will"
    )
    assert found.fields == {"arg0": "fp_quant"} and found.matched["unwrapped"] == ["printf_arguments"]
    assert found.message.startswith("The quantization method fp_quant is deprecated")


@pytest.mark.parametrize("version", FACTS_VERSIONS)
@pytest.mark.parametrize(
    "phrase, values, wrapper",
    [
        ("Engine core initialization failed. See root cause above", {"finished": "{}"}, "engine_core_init_failed"),
        ("Frontend process failed during engine core initialization", {}, "engine_core_init_failed"),
        ("Engine core process {engine_manager", {"engine_manager.failed_proc_name": "EngineCore_DP0"}, "worker_died"),
    ],
)
def test_a_cause_that_scrolled_out_gets_its_own_family_and_no_rule(version, phrase, values, wrapper):
    exception, text = message(version, phrase, values)
    log = f"(APIServer pid=1) ERROR 12-01 10:00:00 [api_server.py:1] {exception}: {text}"
    found = fingerprint(log, engine_version=version)
    assert (found.family, found.blame, found.fields) == ("cause_not_in_log", "unknown", {"wrapper": wrapper})
    assert found.matched["wrapper"] == wrapper and found.matched["template"] is None
    diagnosis = diagnose(log, engine_version=version, user_settings=UserSettings(max_model_len=8192))
    assert diagnosis.candidates == ()


def test_unclassified_only_when_nothing_matched_and_the_json_says_so():
    found = fingerprint("RuntimeError: the frobnicator is out of phase")
    assert found.family == "unclassified"
    assert found.to_json()["matched"] == {"template": None, "observed": None, "wrapper": None, "unwrapped": []}
    known = fingerprint(f"ValueError: {render_kv('0.33.0')}", engine_version="0.33.0").to_json()["matched"]
    assert known["template"].startswith("vllm 0.33.0 v1/core/") and known["wrapper"] is None
    observed = fingerprint("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.").to_json()
    assert observed["family"] == "cuda_oom" and observed["matched"]["observed"] == "cuda_oom"


# ------------------------------------------------------------------ every wrapper, inner text with and without a type

OOM = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB "
    "is free. Of the allocated memory 75.08 GiB is allocated by PyTorch, and 1.19 GiB is reserved by PyTorch but "
    "unallocated."
)


def _inner(version: str, which: str) -> tuple[str, str, str, dict]:
    """(exception, message, family, fields that must come out) of an inner error."""
    if which == "mamba":
        exception, text = mamba(version)
        return exception, text, "mamba_blocks_below_max_num_seqs", {"num_blocks": 733, "max_num_seqs": 1024}
    if which == "kv":
        exception, text = message(version, KV, KV_VALUES)
        return exception, text, "kv_cache_too_small", {"estimated_max_model_len": 76144}
    return "torch.OutOfMemoryError", OOM, "cuda_oom", {"tried_bytes": 2 * 2**30}


# How each wrapper kind carries its inner text (`inner` is the text with or without `Type: `).
WRAPPED = {
    "worker_failed": lambda inner: (
        "RuntimeError",
        f"Worker failed with error '{inner}', please check the stack trace above for the root cause",
    ),
    "worker_failed_cut_after_quote": lambda inner: ("RuntimeError", f"Worker failed with error '{inner}'"),
    "worker_failed_cut_inside": lambda inner: ("RuntimeError", f"Worker failed with error '{inner}"),
    "inline_cause": lambda inner: (None, f"EngineCore failed to start. {inner}"),
    "inline_cause_workerproc": lambda inner: ("Exception", f"WorkerProc failed to start: {inner}"),
    "pydantic": lambda inner: ("ValidationError", f"1 validation error for VllmConfig: Value error, {inner}"),
    "nested_exception": lambda inner: ("RuntimeError", inner),
}
KINDS = {k: k.split("_cut")[0].replace("_workerproc", "") for k in WRAPPED}


# An exception whose message has no type of its own wraps nothing: nested_exception is typed only.
WRAPPER_CASES = [(w, t) for w in sorted(WRAPPED) for t in (True, False) if t or w != "nested_exception"]


@pytest.mark.parametrize("version", ["0.29.0", "0.33.0"])
@pytest.mark.parametrize("which", ["mamba", "kv", "oom"])
@pytest.mark.parametrize(
    "wrapper, typed", WRAPPER_CASES, ids=[f"{w}-{'typed' if t else 'untyped'}" for w, t in WRAPPER_CASES]
)
def test_every_wrapper_with_an_inner_text_with_and_without_its_type(wrapper, typed, which, version):
    exception, text, family, fields = _inner(version, which)
    inner = f"{exception}: {text}" if typed else text
    outer, wrapped = WRAPPED[wrapper](inner)
    line = f"{TAG}{outer}: {wrapped}" if outer else f"{TAG}{wrapped}"
    found = fingerprint(line, engine_version=version)
    assert found.family == family, (line, found.matched)
    assert {k: found.fields.get(k) for k in fields} == fields
    assert KINDS[wrapper] in found.matched["unwrapped"]
    assert found.message.startswith(text[:40])
    if typed and wrapper != "pydantic":
        assert found.exception == exception


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "untyped"])
@pytest.mark.parametrize("wrapper", sorted(set(WRAPPED) - {"nested_exception"}))
def test_printf_arguments_inside_every_wrapper(wrapper, typed):
    refusal = template_with(shipped_refusals("0.33.0"), "The quantization method %s is deprecated")
    printed = repr((refusal["template"], "fp_quant"))
    outer, wrapped = WRAPPED[wrapper](f"{refusal['exception']}: {printed}" if typed else printed)
    found = fingerprint(f"{TAG}{outer}: {wrapped}" if outer else f"{TAG}{wrapped}", engine_version="0.33.0")
    assert found.family == template_family(refusal["template"]) and found.fields == {"arg0": "fp_quant"}
    assert found.matched["unwrapped"][-1] == "printf_arguments" and KINDS[wrapper] in found.matched["unwrapped"]


def test_the_issue_s_worker_line_cut_after_its_quote(apron_home):
    """`RuntimeError: Worker failed with error 'max_num_seqs (1024) exceeds available Mamba cache blocks
    (626). ...'`: the hybrid's refusal and its rule, not cause_not_in_log."""
    line = (
        "(EngineCore_DP0 pid=5) ERROR 12-01 10:00:00 [core.py:1] RuntimeError: Worker failed with error "
        "'max_num_seqs (1024) exceeds available Mamba cache blocks (626). ...'"
    )
    found = fingerprint(line, engine_version="0.32.0")
    assert found.family == "mamba_blocks_below_max_num_seqs"
    assert (found.fields["max_num_seqs"], found.fields["num_blocks"]) == (1024, 626)
    corrected = _corrected(line, "0.32.0")
    assert corrected.max_num_seqs is not None and corrected.max_num_seqs <= 626


@pytest.mark.parametrize(
    "wrapped, family",
    [
        ("EngineCore failed to start. See the traceback above.", "cause_not_in_log"),
        ("Engine core initialization failed. See root cause above. Failed core proc(s): {}", "cause_not_in_log"),
        ("Worker 0 failed to initialize: {'status': 'FAILED'}", "cause_not_in_log"),
        ("Worker failed with error 'the frobnicator is out of phase'", "unclassified"),
    ],
)
def test_words_after_a_wrapper_that_nothing_knows(wrapped, family):
    """Untyped words after a wrapper are a cause only when something knows them; a worker's quoted
    message is its cause even unknown (the log holds it: unclassified, not cause_not_in_log)."""
    found = fingerprint(f"{TAG}RuntimeError: {wrapped}")
    assert found.family == family
