"""Classifying one error: the family of `SomeError: message`, its blame and its typed fields, from
the release's templates (apron.rules.catalog) and the observed failures (apron.rules.families),
after unwrapping the messages that carry another one inside:

- `RuntimeError: Worker failed with error '<str(exc)>', please check the stack trace above for the
  root cause` (v1/executor/multiproc_executor.py collective_rpc): the worker's message, quoted (and
  `str(exc)` carries no exception type); also when a harness or a paste cut the line after it;
- pydantic's `ValidationError for VllmConfig: Value error, <message>` (the config's own refusal);
- a cause written after its wrapper on one line (`EngineCore failed to start. ValueError: ...`, or
  the message alone) or an exception message that is itself `OtherError: message`;
- `('The quantization method %s is deprecated ...', 'fp_quant')`: a message raised with printf
  arguments, `ValueError(fmt, value)`, which Python prints as the tuple; it is rendered first.

The inner message is matched against the templates with or without an exception type of its own. A
cause taken from after a wrapper's words that carries no type is only a cause when something knows
it (a template or an observed failure); otherwise the wrapper stays what the line is.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from apron.frozen import field, frozen, replace
from apron.measure.logerrors import EXCEPTION
from apron.rules.catalog import CatalogEntry, catalog
from apron.rules.families import (
    _OBSERVED_FIELDS,
    OBSERVED,
    PROCESS_EXIT,
    WRAPPERS,
    Fields,
    family_blame,
    typed_fields,
)
from apron.rules.pattern import TemplateMatch, coerce


@frozen
class Classification:
    family: str
    blame: str
    fields: Fields = field(compare=False)
    source: str  # where the family's text comes from: "vllm 0.33.0 file fn", "observed", "none"
    template: str | None = None
    exact: bool = True  # the whole template matched (False: the message was cut short)
    literal_chars: int = 0  # how much of the message the template's own words account for
    unwrapped: tuple[str, ...] = ()  # the wrappers taken off to reach the message, outermost first
    observed: str | None = None  # the observed pattern that matched (also when a template decided)
    wrapper: str | None = None  # the wrapper the (unwrapped) message is
    suffix: str | None = None  # text after the whole template (a summary's "(file.py:12 fn)")
    inner: tuple[str | None, str] | None = None  # (exception, message) inside the wrappers taken off

    @property
    def matched(self) -> dict[str, Any]:
        """What decided the family, for the JSON: "unclassified" has every entry empty."""
        return {
            "template": self.source if self.template else None,
            "observed": self.observed,
            "wrapper": self.wrapper,
            "unwrapped": list(self.unwrapped),
        }


# The closing quote and the words after it may be missing: a line cut by a harness or a paste.
_WORKER_FAILED = re.compile(
    r"^Worker failed with error '(?P<inner>.*?)'?(?:,\s*please check the\s+stack trace above for the root cause\.?)?$",
    re.S,
)
_PYDANTIC = re.compile(
    r"^(?:\d+ validation errors? for \w+:?\s*)?(?P<kind>Value|Assertion|Type|Key|Runtime) error, (?P<inner>.+)$", re.S
)
_INLINE_CAUSE = re.compile(
    r"^(?:EngineCore failed to start|Engine core initialization failed|WorkerProc (?:initialization )?failed"
    r"(?: to start)?)[^:]*?[.:]\s+(?P<inner>.+)$",
    re.S,
)
MAX_UNWRAP = 6


@frozen
class _Level:
    """One message on the way in: what it says, the wrappers taken off to reach it, and whether it is
    surely the cause (False: words after a wrapper's, with no exception type of their own)."""

    exception: str | None
    message: str
    taken: tuple[str, ...]
    is_sure: bool = True


def unwrap(exception: str | None, message: str) -> tuple[str | None, str, tuple[str, ...]]:
    """The innermost (exception, message) and the wrappers taken off, outermost first."""
    level = _levels(exception, message)[-1]
    return level.exception, level.message, level.taken


def _levels(exception: str | None, message: str) -> list[_Level]:
    """The message and each one found inside it, outermost first."""
    levels = [_Level(exception, message.strip(), ())]
    for _ in range(MAX_UNWRAP):
        last = levels[-1]
        step = _unwrap_once(last.exception, last.message)
        if step is None:
            break
        inner_exception, inner, kind, is_sure = step
        levels.append(_Level(inner_exception, inner.strip(), (*last.taken, kind), is_sure))
    return levels


def _unwrap_once(exception: str | None, message: str) -> tuple[str | None, str, str, bool] | None:
    if m := _WORKER_FAILED.match(message):
        return (*_typed(m["inner"]), "worker_failed", True)
    pydantic = exception is None or "ValidationError" in exception or message[:1].isdigit()
    if pydantic and (m := _PYDANTIC.match(message)):
        return f"{m['kind']}Error", m["inner"], "pydantic", True
    if printf := _printf_rendered(message):
        return exception, printf, "printf_arguments", True
    if m := _INLINE_CAUSE.match(message):
        inner_exception, inner = _typed(m["inner"])
        return inner_exception, inner, "inline_cause", inner_exception is not None
    if exception is not None and (nested := EXCEPTION.match(message)) and nested["exc"] not in ("INFO", "ERROR"):
        return nested["exc"], nested["msg"], "nested_exception", True
    return None


def _typed(text: str) -> tuple[str | None, str]:
    """`ValueError: message` -> ("ValueError", "message"); a message with no type of its own as it is."""
    nested = EXCEPTION.match(text.strip())
    return (nested["exc"], nested["msg"]) if nested else (None, text)


def _printf_rendered(message: str) -> str | None:
    """`('fmt %s ...', 'value')` -> `fmt value ...`: what the engine meant to print."""
    if not (message.startswith("(") and message.endswith(")") and "%" in message):
        return None
    try:
        value = ast.literal_eval(message)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not (isinstance(value, tuple) and len(value) > 1 and isinstance(value[0], str)):
        return None
    try:
        return value[0] % value[1:]
    except (TypeError, ValueError, KeyError):
        return " ".join(str(v) for v in value)


def classify(
    exception: str | None, message: str, engine_version: str | None = None, *, wrappers: bool = True
) -> Classification:
    levels = _levels(exception, message)
    for level in reversed(levels):
        found = _classify_level(level, engine_version, wrappers)
        if found.family != "unclassified" or level.is_sure:
            return found
    return found


def _classify_level(level: _Level, engine_version: str | None, wrappers: bool) -> Classification:
    exception, message, unwrapped = level.exception, level.message, level.taken
    inner = (exception, message) if unwrapped else None
    text = f"{exception}: {message}" if exception else message
    for wrapper in WRAPPERS if wrappers else ():
        if not wrapper.regex.search(text):
            continue
        if named := _by_observed(text):  # a summary that names the cause it wraps ("root cause: CUDA OOM ...")
            return replace(named, unwrapped=unwrapped, wrapper=wrapper.name, inner=inner)
        return Classification(
            wrapper.name, wrapper.blame, {}, "observed", unwrapped=unwrapped, wrapper=wrapper.name, inner=inner
        )
    found = _family(text, message, engine_version)
    if found is None and PROCESS_EXIT.regex.search(text):
        found = Classification(PROCESS_EXIT.name, PROCESS_EXIT.blame, {}, "observed", observed=PROCESS_EXIT.name)
    found = found or Classification("unclassified", "unknown", {}, "none")
    return replace(found, unwrapped=unwrapped, inner=inner)


def _family(text: str, message: str, engine_version: str | None) -> Classification | None:
    by_template = _by_template(message, engine_version)
    observed = _by_observed(text)
    if by_template is not None and observed is not None and observed.family == by_template.family:
        return replace(by_template, fields={**observed.fields, **by_template.fields}, observed=observed.family)
    if by_template is not None and (observed is None or _covers(by_template, message)):
        return replace(by_template, observed=observed.family if observed else None)
    return observed


def _covers(found: Classification, message: str) -> bool:
    """A template that is mostly a field ("Error in profiling: {e}") must not hide the observed
    failure inside the field."""
    return found.literal_chars >= 0.4 * len(message)


def _by_template(message: str, engine_version: str | None) -> Classification | None:
    best: tuple[tuple[bool, int, bool], CatalogEntry, TemplateMatch] | None = None
    for entry in catalog(engine_version):
        if entry.anchor not in message:
            continue
        result = entry.pattern.match(message)
        if result is None:
            continue
        score = (result.exact, entry.pattern.literal_chars, result.suffix is None)
        if best is None or score > best[0]:
            best = (score, entry, result)
    if best is None:
        return None
    _, entry, result = best
    return Classification(
        entry.family,
        family_blame(entry.family),
        typed_fields(entry.family, result.values),
        entry.source,
        entry.template,
        result.exact,
        entry.pattern.literal_chars,
        suffix=result.suffix,
    )


def _by_observed(text: str) -> Classification | None:
    for observed in OBSERVED:
        m = observed.regex.search(text)
        if m:
            fields = {k: coerce(v) for k, v in m.groupdict().items() if v is not None}
            fields.update(_OBSERVED_FIELDS.get(observed.name, lambda t: {})(text))
            return Classification(observed.name, observed.blame, fields, "observed", observed=observed.name)
    return None
