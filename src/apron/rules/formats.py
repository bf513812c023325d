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
from dataclasses import dataclass
from functools import cache, lru_cache

from apron.measure.logerrors import EXCEPTION
from apron.measure.logparse import Recognised
from apron.rules.pattern import TemplatePattern, anchor_of, compile_template, template_parts

# Python's logging names, as vLLM's formatter prints them.
_LEVELS = {"debug": "DEBUG", "info": "INFO", "warning": "WARNING", "error": "ERROR", "exception": "ERROR"}
_LEVELS |= {"critical": "CRITICAL", "fatal": "CRITICAL", "warn": "WARNING"}
_WORD = re.compile(r"\w+")
_PYDANTIC_ITEM = re.compile(r"^(?:Value|Assertion|Type|Key|Runtime) error, ")
_MIN_WORD = 3


@dataclass(frozen=True)
class _Format:
    template: str  # one line of the format string
    anchor: str
    level: str | None
    words: tuple[str, ...]  # the anchor's words that every rendering keeps whole


class ReleaseFormats:
    """The format strings of some releases, looked up by the words of a message."""

    def __init__(self, formats: list[_Format]):
        counts = Counter(word for f in formats for word in set(f.words))
        self._by_word: dict[str, list[_Format]] = {}
        self._unfiled: list[_Format] = []  # no whole word in the anchor: tried on every message
        for entry in formats:
            if entry.words:
                self._by_word.setdefault(min(entry.words, key=lambda w: (counts[w], -len(w))), []).append(entry)
            else:
                self._unfiled.append(entry)

    def __len__(self) -> int:
        return sum(map(len, self._by_word.values())) + len(self._unfiled)

    def recognise(self, message: str) -> Recognised | None:
        best: tuple[tuple[bool, int], _Format] | None = None
        for text in _message_texts(message):
            words = set(_WORD.findall(text))
            candidates = [f for word in words for f in self._by_word.get(word, ())] + self._unfiled
            for entry in candidates:
                if entry.anchor not in text or (pattern := _compiled(entry.template)) is None:
                    continue
                found = pattern.match(text)
                if found is None:
                    continue
                score = (found.exact, pattern.literal_chars)
                if best is None or score > best[0]:
                    best = (score, entry)
        return Recognised(best[1].template, best[1].level) if best else None


def _message_texts(message: str) -> list[str]:
    """The message, and what an exception line or a pydantic item says after its name."""
    texts = [message]
    if m := EXCEPTION.match(message):
        texts.append(m["msg"])
    if m := _PYDANTIC_ITEM.match(message):
        texts.append(message[m.end() :])
    return texts


def _anchor_words(parts: list, anchor: str) -> tuple[str, ...]:
    """The words of the anchor that stay whole in every rendering: a word at the edge of its literal
    is glued to the field beside it ("{name}Config"), unless the edge is the template's own."""
    index = next(i for i, p in enumerate(parts) if isinstance(p, str) and p.strip() == anchor)
    literal = parts[index]
    words = []
    for m in _WORD.finditer(literal):
        glued = (m.start() == 0 and index > 0) or (m.end() == len(literal) and index < len(parts) - 1)
        if len(m.group()) >= _MIN_WORD and not m.group().isdigit() and not glued:
            words.append(m.group())
    return tuple(words)


@lru_cache(maxsize=8192)
def _compiled(template: str) -> TemplatePattern | None:
    return compile_template(template)


def _entries(log_formats: list[dict], refusals: list[dict]) -> list[_Format]:
    """One entry per line of each distinct format string; a format logged at several levels keeps none."""
    levels: dict[str, set[str | None]] = {}
    for item in log_formats:
        for line in str(item.get("format", "")).split("\n"):
            levels.setdefault(line, set()).add(_LEVELS.get(str(item.get("level", "")).lower()))
    for item in refusals:
        for line in str(item.get("template", "")).split("\n"):
            levels.setdefault(line, set()).add(None)
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
    log_formats: list[dict] = []
    refusals: list[dict] = []
    for version in versions:
        try:
            facts = load_facts(version)
        except (ApronError, OSError, ValueError):
            continue
        log_formats += facts.log_formats
        refusals += facts_refusals(facts)
    return ReleaseFormats(_entries(log_formats, refusals))


FORMATS = FactsFormats()
