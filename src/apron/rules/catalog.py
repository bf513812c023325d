"""The catalog of the engine's refusal templates: every `raise X(f"...")` message the engine facts
read from a release's source, each with the family it belongs to (apron.rules.families)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from apron.frozen import frozen
from apron.rules.families import NAMED
from apron.rules.pattern import PRINTF, TemplatePattern, anchor_of, compile_template, template_parts

if TYPE_CHECKING:
    from apron.engine.facts import EngineFacts


@frozen
class CatalogEntry:
    family: str
    exception: str
    template: str
    anchor: str  # the template's longest literal run: a message without it cannot match
    source: str  # "vllm 0.30.0 v1/core/kv_cache_utils.py _check_enough_kv_cache_memory"

    @property
    def pattern(self) -> TemplatePattern:
        compiled = _compiled(self.template)
        if compiled is None:  # an entry has an anchor, and a template with an anchor compiles
            raise ValueError(f"template {self.template!r} does not compile")
        return compiled


@lru_cache(maxsize=4096)
def _compiled(template: str) -> TemplatePattern | None:
    # Compiling ~7,000 regexes per release costs seconds; only templates whose anchor is in a
    # message are ever compiled.
    return compile_template(template)


def template_family(template: str) -> str:
    """The family of an engine template: a named one through its signature, else its first words."""
    for family in NAMED:
        if any(sig in template for sig in family.signatures):
            return family.name
    words = re.findall(r"[a-z0-9]+", PRINTF.sub(" ", re.sub(r"\{[^{}]*\}", " ", template)).lower())
    return "refusal." + "-".join(words[:7] or ["unnamed"])


@lru_cache(maxsize=16)
def catalog(engine_version: str | None) -> tuple[CatalogEntry, ...]:
    """The templates of this release (or of every known release when None or unknown), then the
    fallback templates of the named families those facts lack."""
    entries: list[CatalogEntry] = []
    seen: set[tuple[str, str]] = set()
    for version, refusals in _refusals(engine_version):
        for refusal in refusals:
            key = (refusal.get("exception", ""), refusal.get("template", ""))
            anchor = _anchor(key[1])
            if key in seen or anchor is None:
                continue
            seen.add(key)
            source = f"vllm {version} {refusal.get('file', '?')} {refusal.get('function', '?')}"
            entries.append(CatalogEntry(template_family(key[1]), key[0], key[1], anchor, source))
    present = {e.family for e in entries}
    for family in NAMED:
        if family.name in present:
            continue
        for exception, template in family.fallback_templates:
            anchor = _anchor(template)
            if anchor is None:
                continue
            entries.append(
                CatalogEntry(
                    family.name,
                    exception,
                    template,
                    anchor,
                    "apron fallback template (vLLM 0.29-0.33 source)",
                )
            )
    return tuple(entries)


def _anchor(template: str) -> str | None:
    return anchor_of(template_parts(template))


def _refusals(engine_version: str | None) -> list[tuple[str, list[dict[str, Any]]]]:
    """(version, refusals) from the engine facts; empty when no facts are installed."""
    from apron.engine.facts import known_versions, load_facts
    from apron.errors import ApronError

    try:
        versions = known_versions()
    except (ApronError, OSError):
        return []
    if engine_version in versions:
        versions = [engine_version]
    out = []
    for version in versions:
        try:
            out.append((version, facts_refusals(load_facts(version))))
        except (ApronError, OSError, ValueError):
            continue
    return out


def facts_refusals(facts: EngineFacts) -> list[dict[str, Any]]:
    """The refusal templates of a facts file: the `refusals` table, which the loader keeps out of
    the core data it reads for plans and loads on first use."""
    return list(facts.refusals)
