"""The report's figures as inline SVG: frame columns in, markup out, no script and nothing fetched.

Static SVG rather than plotly: the report is read, printed and mailed, and a plotly figure needs its 4.6 MB
plotly.js inlined in every file (whose source also names CDN URLs for map tiles and MathJax that a no-network
check would have to excuse). Each mark carries a <title>, which browsers show as a tooltip.
"""

from __future__ import annotations

import datetime as dt
import math
from html import escape

# Tableau 10: distinct in print and for the common colour-vision deficiencies.
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]
GREY = "#bab0ac"
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def color(i: int, name: str = "") -> str:
    return GREY if name.startswith("(") else PALETTE[i % len(PALETTE)]


def _nice_max(v: float) -> float:
    """The axis top: 1, 2, 2.5 or 5 times a power of ten, at or above v."""
    if v <= 0:
        return 1.0
    p = 10 ** math.floor(math.log10(v))
    return next(m * p for m in (1, 2, 2.5, 5, 10) if m * p >= v)


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or v == 0 else f"{v:,.2g}"


def _y_axis(top: float, x0: float, y0: float, h: float, w: float, label: str) -> list[str]:
    out = []
    for i in range(5):
        v = top * i / 4
        y = y0 + h - h * i / 4
        out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    out.append(
        f'<text x="12" y="{y0 + h / 2:.1f}" transform="rotate(-90 12 {y0 + h / 2:.1f})" text-anchor="middle">'
        f"{escape(label)}</text>"
    )
    return out


def _legend(names: list[str], x0: float, y: float, colors: list[str]) -> list[str]:
    out, x = [], x0
    for name, c in zip(names, colors, strict=True):
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{c}"/>')
        out.append(f'<text x="{x + 14}" y="{y}">{escape(name)}</text>')
        x += 24 + 6.5 * len(name)
    return out


def _svg(fig_id: str, w: int, h: int, body: list[str], title: str) -> str:
    return (
        f'<svg id="{fig_id}" class="figure" viewBox="0 0 {w} {h}" width="100%" role="img" '
        f'aria-label="{escape(title)}" {FONT}>'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def stacked_days(
    fig_id: str,
    days: list[dt.date],
    series: dict[str, list[float]],
    title: str,
    y_label: str,
    ref: tuple[float, str] | None = None,
) -> str:
    """A bar per day, stacked by series (in the given order); `ref` a dashed horizontal line (value, label)."""
    w, h, x0, y0, pw, ph = 900, 300, 64, 30, 820, 220
    totals = [sum(vals[i] or 0 for vals in series.values()) for i in range(len(days))]
    top = _nice_max(max([*totals, ref[0] if ref else 0, 0]))
    body = _y_axis(top, x0, y0, ph, pw, y_label)
    n = max(len(days), 1)
    bw = pw / n
    names = list(series)
    colors = [color(i, s) for i, s in enumerate(names)]
    for i, day in enumerate(days):
        y = y0 + ph
        for name, c in zip(names, colors, strict=True):
            v = series[name][i] or 0
            bh = ph * v / top
            y -= bh
            body.append(
                f'<rect x="{x0 + i * bw + 1:.1f}" y="{y:.1f}" width="{max(bw - 2, 1):.1f}" height="{bh:.1f}" '
                f'fill="{c}"><title>{day:%Y-%m-%d} {escape(name)}: {v:,.2f}</title></rect>'
            )
        if n <= 31 and (i % max(1, n // 10) == 0):
            body.append(f'<text x="{x0 + (i + 0.5) * bw:.1f}" y="{y0 + ph + 14}" text-anchor="middle">{day:%d}</text>')
    if ref is not None:
        y = y0 + ph - ph * ref[0] / top
        body.append(
            f'<line x1="{x0}" x2="{x0 + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#333" stroke-dasharray="5 4">'
            f"<title>{escape(ref[1])}: {ref[0]:,.2f}</title></line>"
        )
        names, colors = [*names, ref[1]], [*colors, "#333"]
    body += _legend(names, x0, h - 18, colors)
    return _svg(fig_id, w, h, body, title)


def stacked_rows(
    fig_id: str, rows: list[tuple[str, list[float]]], names: list[str], colors: list[str], title: str, unit: str
) -> str:
    """A horizontal bar per row, split into `names` (each row's values in that order), as shares of the row."""
    lw, w, bar, gap = 230, 900, 22, 10
    pw = w - lw - 80
    h = 40 + len(rows) * (bar + gap) + 30
    body = []
    for r, (label, vals) in enumerate(rows):
        y = 20 + r * (bar + gap)
        total = sum(v or 0 for v in vals)
        body.append(f'<text x="{lw - 8}" y="{y + bar / 2 + 4}" text-anchor="end">{escape(label)}</text>')
        x = lw
        for name, c, v in zip(names, colors, vals, strict=True):
            bw = pw * (v or 0) / total if total else 0
            pct = 100 * (v or 0) / total if total else 0
            body.append(
                f'<rect x="{x:.1f}" y="{y}" width="{bw:.1f}" height="{bar}" fill="{c}">'
                f"<title>{escape(label)} {escape(name)}: {v or 0:,.1f} {escape(unit)} ({pct:.1f} %)</title></rect>"
            )
            if pct >= 8:
                body.append(
                    f'<text x="{x + bw / 2:.1f}" y="{y + bar / 2 + 4}" text-anchor="middle" fill="#fff">'
                    f"{pct:.0f} %</text>"
                )
            x += bw
        body.append(f'<text x="{lw + pw + 6}" y="{y + bar / 2 + 4}">{_fmt(total)}</text>')
    body += _legend(names, lw, h - 12, colors)
    return _svg(fig_id, w, h, body, title)


def forecast_panel(
    fig_id: str, title: str, days: list[dt.datetime], actual: list, supply: list, mean: list, lo: list, hi: list
) -> str:
    """History (demand and supply) and the forecast's mean with its 80 % band, one GPU model."""
    w, h, x0, y0, pw, ph = 440, 220, 48, 24, 376, 150
    vals = [v for col in (actual, supply, mean, hi) for v in col if v is not None]
    top = _nice_max(max(vals, default=1.0))
    n = max(len(days) - 1, 1)

    def xy(i: int, v: float) -> str:
        return f"{x0 + pw * i / n:.1f},{y0 + ph - ph * v / top:.1f}"

    def path(col: list, stroke: str, dash: str = "") -> str:
        pts = [xy(i, v) for i, v in enumerate(col) if v is not None]
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return f'<polyline points="{" ".join(pts)}" fill="none" stroke="{stroke}" stroke-width="1.6"{extra}/>'

    body = _y_axis(top, x0, y0, ph, pw, "GPUs")
    band = [(i, lo_v, hi_v) for i, (lo_v, hi_v) in enumerate(zip(lo, hi, strict=True)) if hi_v is not None]
    if band:
        pts = [xy(i, hv) for i, _, hv in band] + [xy(i, lv or 0) for i, lv, _ in reversed(band)]
        body.append(f'<polygon points="{" ".join(pts)}" fill="{PALETTE[1]}" opacity="0.2"/>')
    body += [path(supply, "#333", "4 3"), path(actual, PALETTE[0]), path(mean, PALETTE[1])]
    if days:
        body.append(f'<text x="{x0}" y="{y0 + ph + 14}">{days[0]:%Y-%m-%d}</text>')
        body.append(f'<text x="{x0 + pw}" y="{y0 + ph + 14}" text-anchor="end">{days[-1]:%Y-%m-%d}</text>')
    body += _legend(["demand", "supply", "forecast (80 % band)"], x0, h - 8, [PALETTE[0], "#333", PALETTE[1]])
    body.insert(0, f'<text x="{x0}" y="14" font-weight="600">{escape(title)}</text>')
    return _svg(fig_id, w, h, body, title)
