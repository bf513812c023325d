"""The release's own format strings as a recogniser of vLLM's lines (apron.measure.logparse.Formats).

A line pasted without vLLM's logger prefix is still vLLM's when its message renders one of the
release's format strings: a `logger.info(...)` format (the engine facts' `log_formats`, at the level
the release logs it) or the message of a `raise X(...)` (the facts' `refusals`, after the exception's
name or pydantic's "Value error, "). Each format becomes a regex through apron.rules.pattern, so a
field takes any value and a message cut short still matches.

Thousands of formats per release: each is filed under the rarest whole word of its anchor (the
literal every match contains), so a message is tried only against the formats filed under one of
its own words, and a format is compiled the first time a message could match it.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from apron.frozen import frozen
from apron.measure.logerrors import EXCEPTION
from apron.measure.logparse import Recognised
from apron.rules.pattern import TemplatePattern, anchor_of, compile_template, template_parts

if TYPE_CHECKING:
    from apron.engine.templates import Field

# Python's logging names, as vLLM's formatter prints them.
_LEVELS = {"debug": "DEBUG", "info": "INFO", "warning": "WARNING", "error": "ERROR", "exception": "ERROR"}
_LEVELS |= {"critical": "CRITICAL", "fatal": "CRITICAL", "warn": "WARNING"}
_WORD = re.compile(r"\w+")
_PYDANTIC_ITEM = re.compile(r"^(?:Value|Assertion|Type|Key|Runtime) error, ")
_MIN_WORD = 3


@frozen
class _Format:
    template: str  # one line of the format string
    anchor: str
    level: str | None  # None for a refusal (an exception's message), or a format logged at several levels
    words: tuple[str, ...]  # the anchor's words that every rendering keeps whole


# A logger line must render its format whole, and the format's own words must carry it: a short
# format around a text field ("%s is enabled.") would take any line that ends the same way.
MIN_LOG_LITERAL_CHARS = 16
MIN_LOG_LITERAL_SHARE = 0.3


class _Index:
    """Formats filed under the rarest whole word of their anchor."""

    def __init__(self, formats: list[_Format]):
        counts = Counter(word for f in formats for word in set(f.words))
        self.by_word: dict[str, list[_Format]] = {}
        self.unfiled: list[_Format] = []  # no whole word in the anchor: tried on every message
        for entry in formats:
            if entry.words:
                self.by_word.setdefault(min(entry.words, key=lambda w: (counts[w], -len(w))), []).append(entry)
            else:
                self.unfiled.append(entry)

    def __len__(self) -> int:
        return sum(map(len, self.by_word.values())) + len(self.unfiled)

    def best(self, text: str, *, whole: bool) -> _Format | None:
        """The format TEXT renders (WHOLE: fully, with enough words of its own), the most specific first."""
        words = set(_WORD.findall(text))
        best: tuple[tuple[bool, int], _Format] | None = None
        for entry in [f for word in words for f in self.by_word.get(word, ())] + self.unfiled:
            if entry.anchor not in text or (pattern := _compiled(entry.template)) is None:
                continue
            score = _whole_score(pattern, text) if whole else _any_score(pattern, text)
            if score is not None and (best is None or score > best[0]):
                best = (score, entry)
        return best[1] if best else None


def _whole_score(pattern: TemplatePattern, text: str) -> tuple[bool, int] | None:
    literal = pattern.literal_chars
    if literal < MIN_LOG_LITERAL_CHARS and literal < MIN_LOG_LITERAL_SHARE * len(text):
        return None
    rendered = pattern.regex.fullmatch(text) or pattern.loose.fullmatch(text)
    return (True, literal) if rendered else None


def _any_score(pattern: TemplatePattern, text: str) -> tuple[bool, int] | None:
    found = pattern.match(text)
    return (found.exact, pattern.literal_chars) if found is not None else None


class ReleaseFormats:
    """The log formats and refusal templates of some releases, asked of one message."""

    def __init__(self, log_formats: list[_Format], refusals: list[_Format]):
        self._logs, self._refusals = _Index(log_formats), _Index(refusals)

    def __len__(self) -> int:
        return len(self._logs) + len(self._refusals)

    def recognise(self, message: str) -> Recognised | None:
        """A logger's line renders a log format whole; an exception line (or pydantic's item, or a
        refusal pasted without its type) renders a refusal's message, whole or cut short."""
        raised = EXCEPTION.match(message)
        item = _PYDANTIC_ITEM.match(message)
        if raised is None and item is None and (logged := self._logs.best(message, whole=True)) is not None:
            return Recognised(logged.template, logged.level)
        text = raised["msg"] if raised is not None else message[item.end() :] if item is not None else message
        refused = self._refusals.best(text, whole=False)
        return Recognised(refused.template, None) if refused is not None else None


def _anchor_words(parts: list[str | Field], anchor: str) -> tuple[str, ...]:
    """The words of the anchor that stay whole in every rendering: a word at the edge of its literal
    is glued to the field beside it ("{name}Config"), unless the edge is the template's own."""
    index, literal = next((i, p) for i, p in enumerate(parts) if isinstance(p, str) and p.strip() == anchor)
    words = []
    for m in _WORD.finditer(literal):
        glued = (m.start() == 0 and index > 0) or (m.end() == len(literal) and index < len(parts) - 1)
        if len(m.group()) >= _MIN_WORD and not m.group().isdigit() and not glued:
            words.append(m.group())
    return tuple(words)


@lru_cache(maxsize=8192)
def _compiled(template: str) -> TemplatePattern | None:
    return compile_template(template)


def _entries(items: list[dict[str, Any]], key: str, *, logged: bool) -> list[_Format]:
    """One entry per line of each distinct format string; a format logged at several levels keeps none."""
    levels: dict[str, set[str | None]] = {}
    for item in items:
        level = _LEVELS.get(str(item.get("level", "")).lower()) if logged else None
        for line in str(item.get(key, "")).split("\n"):
            levels.setdefault(line, set()).add(level)
    out = []
    for line, seen in levels.items():
        parts = template_parts(line)
        anchor = anchor_of(parts)
        if anchor is not None:
            level = next(iter(seen)) if len(seen) == 1 else None
            out.append(_Format(line, anchor, level, _anchor_words(parts, anchor)))
    return out


class FactsFormats:
    """apron.measure.logparse.Formats over the engine facts: the release the log names when its
    facts are known, else every known release's."""

    def recognise(self, message: str, engine_version: str | None) -> Recognised | None:
        return release_formats(engine_version).recognise(message)


@cache
def release_formats(engine_version: str | None) -> ReleaseFormats:
    from apron.engine.facts import known_versions, load_facts
    from apron.errors import ApronError
    from apron.rules.catalog import facts_refusals

    try:
        versions = known_versions()
    except (ApronError, OSError):
        versions = []
    if engine_version in versions:
        versions = [engine_version]
    log_formats: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    for version in versions:
        try:
            facts = load_facts(version)
        except (ApronError, OSError, ValueError):
            continue
        log_formats += facts.log_formats
        refusals += facts_refusals(facts)
    return ReleaseFormats(_entries(log_formats, "format", logged=True), _entries(refusals, "template", logged=False))


FORMATS = FactsFormats()
