"""A small SVG writer for the report's charts: scales with readable ticks, axes, and marks that carry
a <title> (the tooltip naming the record behind them). Standard library only; docs/report.md says why
Apron draws its own SVG instead of importing a chart library.
"""

from __future__ import annotations

import math
from html import escape

from apron.frozen import frozen

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
FONT_SIZE_PX = 11
CHAR_WIDTH_PX = 6.4  # a DejaVu Sans character at 11 px, on average: room for labels, not typesetting
GRID, AXIS, INK, MUTED = "#e6e6e6", "#555555", "#1d1d1d", "#666666"


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def text_width_px(text: str, size_px: float = FONT_SIZE_PX) -> float:
    return len(text) * CHAR_WIDTH_PX * size_px / FONT_SIZE_PX


class Canvas:
    """An <svg> built element by element, in drawing order."""

    def __init__(self, width_px: float, height_px: float, label: str) -> None:
        self.width_px, self.height_px, self.label = width_px, height_px, label
        self.parts: list[str] = []

    def _add(self, tag: str, attrs: dict[str, object], title: str | None = None, body: str = "") -> None:
        attributes = " ".join(
            f'{k.rstrip("_").replace("_", "-")}="{escape(str(v))}"' for k, v in attrs.items() if v is not None
        )
        inner = (f"<title>{escape(title)}</title>" if title else "") + body
        self.parts.append(f"<{tag} {attributes}>{inner}</{tag}>" if inner else f"<{tag} {attributes}/>")

    def rect(
        self, x: float, y: float, w: float, h: float, fill: str, title: str | None = None, **attrs: object
    ) -> None:
        self._add(
            "rect",
            {"x": _num(x), "y": _num(y), "width": _num(max(w, 0)), "height": _num(h), "fill": fill, **attrs},
            title,
        )

    def circle(
        self, cx: float, cy: float, r: float, fill: str, stroke: str, title: str | None = None, **attrs: object
    ) -> None:
        self._add(
            "circle", {"cx": _num(cx), "cy": _num(cy), "r": _num(r), "fill": fill, "stroke": stroke, **attrs}, title
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 1, **attrs: object) -> None:
        self._add(
            "line",
            {
                "x1": _num(x1),
                "y1": _num(y1),
                "x2": _num(x2),
                "y2": _num(y2),
                "stroke": stroke,
                "stroke_width": width,
                **attrs,
            },
        )

    def polygon(self, points: list[tuple[float, float]], fill: str, **attrs: object) -> None:
        self._add("polygon", {"points": " ".join(f"{_num(x)},{_num(y)}" for x, y in points), "fill": fill, **attrs})

    def text(
        self,
        x: float,
        y: float,
        text: str,
        anchor: str = "start",
        size_px: float = FONT_SIZE_PX,
        fill: str = INK,
        rotate: bool = False,
        **attrs: object,
    ) -> None:
        transform = f"rotate(-90 {_num(x)} {_num(y)})" if rotate else None
        self._add(
            "text",
            {
                "x": _num(x),
                "y": _num(y),
                "text_anchor": anchor,
                "font_size": _num(size_px),
                "fill": fill,
                "transform": transform,
                **attrs,
            },
            body=escape(text),
        )

    def to_string(self) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart-svg" role="img" aria-label="{escape(self.label)}" '
            f'width="{_num(self.width_px)}" height="{_num(self.height_px)}" viewBox="0 0 {_num(self.width_px)} '
            f'{_num(self.height_px)}" font-family="{FONT}" font-size="{FONT_SIZE_PX}">'
            f'<rect width="100%" height="100%" fill="white"/>{"".join(self.parts)}</svg>'
        )


@frozen
class Scale:
    """Data to pixels along one axis, linear or logarithmic."""

    low: float
    high: float
    px_low: float
    px_high: float
    is_log: bool = False

    def __call__(self, value: float) -> float:
        if self.is_log:
            value, low, high = math.log10(max(value, self.low)), math.log10(self.low), math.log10(self.high)
        else:
            low, high = self.low, self.high
        fraction = (value - low) / (high - low) if high != low else 0.5
        return self.px_low + fraction * (self.px_high - self.px_low)

    def ticks(self) -> list[tuple[float, str]]:
        return log_ticks(self.low, self.high) if self.is_log else linear_ticks(self.low, self.high)


def linear_ticks(low: float, high: float, target: int = 5) -> list[tuple[float, str]]:
    """Round steps of 1, 2 or 5 x 10^n, about `target` of them."""
    span = high - low
    if span <= 0:
        return [(low, format_tick(low))]
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    count = int(math.floor((high - first) / step + 1e-9)) + 1
    return [(first + i * step, format_tick(first + i * step)) for i in range(count)]


def log_ticks(low: float, high: float) -> list[tuple[float, str]]:
    """Powers of ten; 1-2-5 steps within each decade when the range spans two decades or fewer."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    multiples = (1, 2, 5) if last - first <= 2 else (1,)
    values = [m * 10.0**p for p in range(first, last + 1) for m in multiples]
    return [(v, format_tick(v)) for v in values if low <= v * (1 + 1e-9) and v <= high * (1 + 1e-9)]


def format_tick(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def x_axis(canvas: Canvas, scale: Scale, y_px: float, top_px: float, label: str) -> None:
    """Ticks, grid lines up to top_px, and the axis label under them."""
    for value, text in scale.ticks():
        x = scale(value)
        canvas.line(x, top_px, x, y_px, GRID)
        canvas.line(x, y_px, x, y_px + 4, AXIS)
        canvas.text(x, y_px + 16, text, anchor="middle", size_px=10, fill=MUTED)
    canvas.line(scale.px_low, y_px, scale.px_high, y_px, AXIS)
    canvas.text((scale.px_low + scale.px_high) / 2, y_px + 32, label, anchor="middle", class_="axis-label")


def y_axis(canvas: Canvas, scale: Scale, x_px: float, right_px: float, label: str) -> None:
    for value, text in scale.ticks():
        y = scale(value)
        canvas.line(x_px, y, right_px, y, GRID)
        canvas.line(x_px - 4, y, x_px, y, AXIS)
        canvas.text(x_px - 6, y + 3.5, text, anchor="end", size_px=10, fill=MUTED)
    canvas.line(x_px, scale.px_low, x_px, scale.px_high, AXIS)
    middle = (scale.px_low + scale.px_high) / 2
    canvas.text(x_px - 40, middle, label, anchor="middle", rotate=True, class_="axis-label")


def legend(canvas: Canvas, x_px: float, y_px: float, entries: list[tuple[str, str, str]]) -> None:
    """One row of (shape, colour, text) entries; shape is "dot", "ring" or "box"."""
    for shape, colour, text in entries:
        if shape == "box":
            canvas.rect(x_px, y_px - 8, 10, 10, colour)
        else:
            canvas.circle(x_px + 5, y_px - 3, 4.5, colour if shape == "dot" else "white", colour, stroke_width=1.5)
        canvas.text(x_px + 15, y_px + 1, text, size_px=10)
        x_px += 28 + text_width_px(text, 10)
