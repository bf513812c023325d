"""GPU rental prices: a bundled, dated table (one row per GPU, tier and provider, each with its source
and date), replaceable as a whole by the user's own file in the same schema (`apron fit --prices FILE`).
A GPU the table does not price can carry the reason (`unpriced`), so a row without a price says why.

Every cost Apron shows is an estimate from this table, never a quote.
"""

from __future__ import annotations

import json
import os

from apron.errors import BadInput
from apron.frozen import frozen
from apron.hardware.gpus import resolve_gpu
from apron.paths import read_bytes

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

SCHEMA = "apron.prices/1"
TIERS = ("on-demand", "spot")
BUNDLED = os.path.join(os.path.dirname(__file__), "prices.json")  # text: fit imports no pathlib
# The bundled table's sha256, recorded (tests/test_fit.py checks it against the file): hashlib's import
# (OpenSSL's) was ~3 ms of every `apron fit`, for a digest that changes only with the file.
BUNDLED_SHA256 = "6faa366a86ee8d5eeac3b52d426779f82fdfeb63d6e9b7a0818ea23d8c359959"
_ROW_FIELDS = {"gpu", "tier", "usd_per_gpu_hour", "provider", "source", "date"}


@frozen
class Price:
    gpu_name: str  # the catalog's name (PyTorch's device name)
    tier: str
    usd_per_gpu_hour: float
    source: str
    date: str  # ISO date the figure was published
    provider: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "tier": self.tier,
            "provider": self.provider,
            "source": self.source,
            "date": self.date,
        }


@frozen
class PriceTable:
    path: str  # "bundled" or the user's file
    sha256: str
    rows: tuple[Price, ...]
    unpriced: tuple[tuple[str, str], ...] = ()  # (GPU name, why the table has no price for it)

    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(sorted({p.provider for p in self.rows if p.provider}, key=str.lower))

    def provider(self, name: str | None) -> str | None:
        """The table's spelling of --provider NAME (any case); BadInput for a provider it does not list."""
        if name is None:
            return None
        match = next((p for p in self.providers if p.lower() == name.strip().lower()), None)
        if match is None:
            raise BadInput(f"--provider {name!r} is not in the price table; its providers: {', '.join(self.providers)}")
        return match

    def price(self, gpu_name: str, tier: str, provider: str | None = None) -> Price | None:
        """PROVIDER's price, or without one the cheapest any provider lists."""
        rows = [p for p in self.rows if p.gpu_name == gpu_name and p.tier == tier]
        if provider is not None:
            rows = [p for p in rows if p.provider == provider]
        return min(rows, key=lambda p: (p.usd_per_gpu_hour, p.provider or ""), default=None)

    def no_price_reason(self, gpu_name: str, tier: str, provider: str | None = None) -> str:
        others = sorted({p.provider or p.source for p in self.rows if p.gpu_name == gpu_name and p.tier == tier})
        if provider is not None and others:
            return f"{provider} has no {tier} price for it in the table (listed by {', '.join(others)})"
        why = dict(self.unpriced).get(gpu_name)
        if why:
            return why
        where = f"from {provider}" if provider else "in the table"
        return f"no {tier} price {where} for it" + ("" if self.path == "bundled" else f" ({self.path})")

    def describe(self) -> dict[str, Any]:
        dates = sorted({p.date for p in self.rows})
        return {
            "file": self.path,
            "sha256": self.sha256,
            "rows": len(self.rows),
            "dates": [dates[0], dates[-1]],
            "providers": list(self.providers),
        }


def load_prices(path: str | None = None) -> PriceTable:
    """The bundled table, or the user's file (which replaces it entirely)."""
    try:
        raw = read_bytes(path or BUNDLED)
    except OSError as exc:
        raise BadInput(f"--prices {path}: cannot read it ({exc.strerror}); give a JSON price table") from exc
    name = path or "bundled prices.json"
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(f"{name}: not valid JSON ({exc}); the schema is {SCHEMA}, see docs/fit.md") from exc
    # the bundled rows' dates are checked by the tests (datetime's import is ~1.5 ms of a fit); a
    # user's table is checked in full
    rows = parse_rows(document, name, is_trusted=not path)
    unpriced = parse_unpriced(document, name)
    if path:
        import hashlib

        digest = hashlib.sha256(raw).hexdigest()
    else:
        digest = BUNDLED_SHA256
    return PriceTable(str(path) if path else "bundled", digest, rows, unpriced)


def parse_rows(document: object, name: str, *, is_trusted: bool = False) -> tuple[Price, ...]:
    """The table's rows, each checked; IS_TRUSTED (the bundled table) leaves out the date's calendar
    check, which tests/test_fit.py runs on it."""
    if not isinstance(document, dict):
        raise BadInput(f"{name}: the top level must be an object with 'schema' and 'rows'")
    if document.get("schema") != SCHEMA:
        raise BadInput(f"{name}: field 'schema' must be {SCHEMA!r} (got {document.get('schema')!r})")
    if document.get("currency", "USD") != "USD":
        raise BadInput(f"{name}: field 'currency' must be 'USD' (got {document.get('currency')!r})")
    rows = document.get("rows")
    if not isinstance(rows, list) or not rows:
        raise BadInput(f"{name}: field 'rows' must be a non-empty list of price rows")
    prices = tuple(_row(raw, f"{name}: rows[{i}]", check_date=not is_trusted) for i, raw in enumerate(rows))
    seen: set[tuple[str, str, str | None]] = set()
    for i, price in enumerate(prices):
        key = (price.gpu_name, price.tier, price.provider)
        if key in seen:
            raise BadInput(
                f"{name}: rows[{i}] repeats GPU {price.gpu_name!r} tier {price.tier!r} provider "
                f"{price.provider!r}; keep one row"
            )
        seen.add(key)
    return prices


def parse_unpriced(document: dict[str, Any], name: str) -> tuple[tuple[str, str], ...]:
    """`unpriced`: [{"gpu": ..., "why": ...}], the GPUs the table leaves out and why (optional)."""
    entries = document.get("unpriced", [])
    if not isinstance(entries, list):
        raise BadInput(f"{name}: field 'unpriced' must be a list of {{gpu, why}} objects")
    out = []
    for i, entry in enumerate(entries):
        where = f"{name}: unpriced[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"gpu", "why"}:
            raise BadInput(f"{where} must be an object with exactly 'gpu' and 'why'")
        try:
            gpu_name = resolve_gpu(_text(entry, "gpu", where)).name
        except BadInput as exc:
            raise BadInput(
                f"{where}.gpu {entry.get('gpu')!r} is not in Apron's GPU catalog (see `apron gpus`)"
            ) from exc
        out.append((gpu_name, _text(entry, "why", where)))
    return tuple(out)


def _row(raw: object, where: str, *, check_date: bool = True) -> Price:
    if not isinstance(raw, dict):
        raise BadInput(f"{where} must be an object")
    unknown = sorted(set(raw) - _ROW_FIELDS)
    if unknown:
        raise BadInput(f"{where} has unknown field {unknown[0]!r}; fields are {', '.join(sorted(_ROW_FIELDS))}")
    gpu = _text(raw, "gpu", where)
    try:
        gpu_name = resolve_gpu(gpu).name
    except BadInput as exc:
        raise BadInput(f"{where}.gpu {gpu!r} is not in Apron's GPU catalog (see `apron gpus`)") from exc
    tier = _text(raw, "tier", where)
    if tier not in TIERS:
        raise BadInput(f"{where}.tier must be one of {', '.join(TIERS)} (got {tier!r})")
    value = raw.get("usd_per_gpu_hour")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise BadInput(f"{where}.usd_per_gpu_hour must be a positive number (got {value!r})")
    date = _text(raw, "date", where)
    if check_date:
        import datetime

        try:
            datetime.date.fromisoformat(date)
        except ValueError as exc:
            raise BadInput(f"{where}.date must be an ISO date like 2026-03-10 (got {date!r})") from exc
    provider = raw.get("provider")
    if provider is not None and not isinstance(provider, str):
        raise BadInput(f"{where}.provider must be text")
    return Price(gpu_name, tier, float(value), _text(raw, "source", where), date, provider)


def _text(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{where}.{key} is missing or empty; every row needs gpu, tier, usd_per_gpu_hour, source, date")
    return value
