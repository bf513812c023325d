"""Classifying one error: the family of `SomeError: message`, its blame and its typed fields, from
the release's templates (apron.rules.catalog) and the observed failures (apron.rules.families)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from apron.rules.catalog import CatalogEntry, catalog
from apron.rules.families import _OBSERVED_FIELDS, OBSERVED, WRAPPERS, family_blame, typed_fields
from apron.rules.pattern import coerce


@dataclass(frozen=True)
class Classification:
    family: str
    blame: str
    fields: dict = field(compare=False)
    source: str  # where the family's text comes from
    template: str | None = None
    exact: bool = True  # the whole template matched (False: the message was cut short)
    literal_chars: int = 0  # how much of the message the template's own words account for


def classify(
    exception: str | None, message: str, engine_version: str | None = None, *, wrappers: bool = True
) -> Classification:
    text = f"{exception}: {message}" if exception else message
    for wrapper in WRAPPERS if wrappers else ():
        if wrapper.regex.search(text):
            return Classification(wrapper.name, wrapper.blame, {}, "observed")
    by_template = _by_template(message, engine_version)
    observed = _by_observed(text)
    if by_template is not None and observed is not None and observed.family == by_template.family:
        return replace(by_template, fields={**observed.fields, **by_template.fields})
    if by_template is not None and (observed is None or _covers(by_template, message)):
        return by_template
    if observed is not None:
        return observed
    return Classification("unclassified", "unknown", {}, "none")


def _covers(found: Classification, message: str) -> bool:
    """A template that is mostly a field ("Error in profiling: {e}") must not hide the observed
    failure inside the field."""
    return found.literal_chars >= 0.4 * len(message)


def _by_template(message: str, engine_version: str | None) -> Classification | None:
    best: tuple[tuple, CatalogEntry, dict] | None = None
    for entry in catalog(engine_version):
        if entry.anchor not in message:
            continue
        result = entry.pattern.match(message)
        if result is None:
            continue
        raw, exact = result
        score = (exact, entry.pattern.literal_chars)
        if best is None or score > best[0]:
            best = (score, entry, raw)
    if best is None:
        return None
    (exact, _), entry, raw = best
    fields = typed_fields(entry.family, raw)
    return Classification(
        entry.family,
        family_blame(entry.family),
        fields,
        entry.source,
        entry.template,
        exact,
        entry.pattern.literal_chars,
    )


def _by_observed(text: str) -> Classification | None:
    for observed in OBSERVED:
        m = observed.regex.search(text)
        if m:
            fields = {k: coerce(v) for k, v in m.groupdict().items() if v is not None}
            fields.update(_OBSERVED_FIELDS.get(observed.name, lambda t: {})(text))
            return Classification(observed.name, observed.blame, fields, "observed")
    return None
