"""Numbers for people: one way to print bytes, counts and durations in every command's text output.

Bytes take the binary unit that keeps the figure between 1 and 1024 (B, KiB, MiB, GiB, TiB); counts
get thousands separators; durations print in ms below a second. A missing value says what is missing
(the caller's word), never Python's None.
"""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(value: float | None, missing: str = "not known") -> str:
    """1536 -> "1.50 KiB"; 67108864 -> "64.00 MiB"; 512 -> "512 B"; negative figures keep their sign."""
    if value is None:
        return missing
    size, unit = abs(float(value)), 0
    while size >= 1024 and unit < len(_UNITS) - 1:
        size, unit = size / 1024, unit + 1
    sign = "-" if value < 0 else ""
    return f"{sign}{int(size):,} B" if unit == 0 else f"{sign}{size:,.2f} {_UNITS[unit]}"


def format_count(value: float | None, unit: str = "", missing: str = "not known") -> str:
    """131072 -> "131,072"; 64.0 -> "64.00"; with a unit word after it."""
    if value is None:
        return missing
    text = f"{value:,.2f}" if isinstance(value, float) and not float(value).is_integer() else f"{int(value):,}"
    return f"{text} {unit}" if unit else text


def format_seconds(value: float | None, missing: str = "not known") -> str:
    """0.0123 -> "12.3 ms"; 2.5 -> "2.50 s"; 95 -> "1 min 35 s"."""
    if value is None:
        return missing
    if abs(value) < 1:
        return f"{value * 1000:.1f} ms" if abs(value) < 0.1 else f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.2f} s"
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds} s"


def shorten(text: str, limit: int) -> str:
    """TEXT cut at a word boundary with an ellipsis when longer than LIMIT characters (never mid-word)."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit - 1].rstrip(" ,;:") + "…"


# vLLM logs memory in GiB with two decimals: a logged value is known to within half of 0.01 GiB.
GIB_RESOLUTION_BYTES = round(0.005 * 2**30)
