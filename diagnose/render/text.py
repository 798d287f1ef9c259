"""Terminal rendering with rich."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from diagnose.models.diagnosis import Diagnosis

_VERDICT_STYLE = {"confirmed": "bold red", "inconclusive": "yellow", "ruled_out": "green"}


def build(d: Diagnosis, verbose: bool = False) -> Group:
    parts: list[object] = []
    if d.symptoms:
        parts.append(Text("Symptoms: " + "; ".join(f"{s.kind} [{s.source}]" for s in d.symptoms), style="bold"))
    t = Table(title="Ranked causes", show_lines=False, expand=True)
    t.add_column("#", justify="right", width=2)
    t.add_column("cause", no_wrap=True)
    t.add_column("score", justify="right", width=5)
    t.add_column("verdict", no_wrap=True)
    t.add_column("where")
    t.add_column("why", ratio=2)
    for i, c in enumerate(d.causes, 1):
        t.add_row(str(i), c.id, f"{c.score:.2f}", Text(f"{c.verdict} ({c.confidence})", style=_VERDICT_STYLE[c.verdict]),
                  c.location.label(), c.summary)
    if not d.causes:
        t.add_row("-", "no cause supported by the evidence", "", "", "", "")
    parts.append(t)
    for c in [x for x in d.causes if x.verdict == "confirmed"] or d.causes[:1]:
        ev = Table.grid(padding=(0, 1), expand=True)
        ev.add_column(style="cyan", max_width=48, overflow="fold", ratio=1)
        ev.add_column(ratio=3, overflow="fold")
        for e in c.evidence[: (50 if verbose else 6)]:
            ev.add_row(f"{e.file}:{e.line}", e.text)
        for e in c.against[:3]:
            ev.add_row(Text(f"against {e.file}:{e.line}", style="green"), e.text)
        ev.add_row("playbook", c.playbook)
        parts.append(Panel(ev, title=f"{c.id}: {c.title}", title_align="left"))
    if d.ruled_out:
        r = Table(title="Ruled out", show_header=False, expand=True)
        r.add_column(style="green", no_wrap=True)
        r.add_column()
        for ro in d.ruled_out:
            r.add_row(ro.id, ro.why)
        parts.append(r)
    if d.missing_evidence:
        m = Table(title="Evidence that would decide", show_header=False, expand=True)
        m.add_column()
        m.add_column(style="dim")
        for me in d.missing_evidence:
            m.add_row(me.collect, ", ".join(me.would_decide))
        parts.append(m)
    f = Table(title="Files", expand=True)
    f.add_column("file")
    f.add_column("format")
    f.add_column("records", justify="right")
    f.add_column("problem", style="yellow")
    for fe in d.files:
        f.add_row(fe.path, fe.format, str(fe.records), fe.problem or "")
    parts.append(f)
    return Group(*parts)  # type: ignore[arg-type]


def render_text(d: Diagnosis, width: int | None = None, color: bool = True, verbose: bool = False) -> str:
    console = Console(width=width or 140, record=True, force_terminal=color, color_system="auto" if color else None,
                      file=io.StringIO())
    console.print(build(d, verbose))
    return console.export_text(styles=color)
