"""Draw docs/scale.svg (triage time and parse floor against fabric size) from `diagnose bench scale --json`.

    diagnose bench scale --hosts 512 --hosts 1024 --hosts 2048 --hosts 4096 --json docs/scale.json
    python docs/render_scale_svg.py docs/scale.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
W, H, L, R, T, B = 640, 360, 70, 150, 30, 50  # size and margins


def _polyline(points: list[tuple[float, float]], colour: str, dash: str = "") -> str:
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    marks = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>' for x, y in points)
    return f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2.5"{extra}/>{marks}'


def render(rows: list[dict[str, float]], target_s: float = 5.0) -> str:
    hosts = [r["hosts"] for r in rows]
    top = max([r["wall_s"] for r in rows] + [target_s]) * 1.15
    x0, x1 = min(hosts), max(hosts)

    def x(h: float) -> float:
        return L + (W - L - R) * ((h - x0) / (x1 - x0) if x1 > x0 else 0.5)

    def y(s: float) -> float:
        return H - B - (H - T - B) * s / top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="12"><rect width="{W}" height="{H}" fill="white"/>']
    step = 10 ** max(0, len(str(int(top))) - 1)
    tick = 0.0
    while tick <= top:
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>'
                   f'<text x="{L - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
        tick += step
    for h in hosts:
        out.append(f'<text x="{x(h):.1f}" y="{H - B + 18}" text-anchor="middle">{int(h)}</text>')
    out.append(f'<text x="{(L + W - R) / 2:.0f}" y="{H - 12}" text-anchor="middle">hosts (8 GPUs, 8 HCAs each)</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2:.0f}" transform="rotate(-90 16 {(T + H - B) / 2:.0f})" '
               'text-anchor="middle">seconds</text>')
    out.append(_polyline([(x(r["hosts"]), y(r["wall_s"])) for r in rows], "#c0392b"))
    out.append(_polyline([(x(r["hosts"]), y(r["floor_s"])) for r in rows], "#2c3e50", "6 4"))
    out.append(f'<line x1="{L}" x2="{W - R}" y1="{y(target_s):.1f}" y2="{y(target_s):.1f}" stroke="#27ae60" '
               'stroke-width="1.5" stroke-dasharray="2 3"/>')
    legend = [("#c0392b", "triage (wall)"), ("#2c3e50", "parse floor"), ("#27ae60", f"target {target_s:g} s")]
    for i, (colour, label) in enumerate(legend):
        ly = T + 10 + 20 * i
        out.append(f'<line x1="{W - R + 12}" x2="{W - R + 36}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2.5"/>'
                   f'<text x="{W - R + 42}" y="{ly + 4}">{label}</text>')
    out.append("</svg>")
    return "".join(out)


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "scale.json"
    rows = json.loads(src.read_text())["rows"]
    (ROOT / "docs" / "scale.svg").write_text(render(rows) + "\n")


if __name__ == "__main__":
    main()
