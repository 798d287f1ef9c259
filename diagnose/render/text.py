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
    parts.append(_files(d, verbose))
    return Group(*parts)  # type: ignore[arg-type]


FILES_LISTED = 40  # more files than this: the ones with a problem are listed, the others counted per format
_NOT_READ = ("unknown", "unreadable", "empty")  # listed by name like files with a problem


def _files(d: Diagnosis, verbose: bool) -> Table:
    """Every file read, or for a large bundle (thousands of per-host files) the files with a problem or not read and
    one row per format for the rest: a table of 8,000 rows is not read by anyone, and rich takes seconds to lay it out."""
    f = Table(title="Files", expand=True)
    f.add_column("file")
    f.add_column("format")
    f.add_column("records", justify="right")
    f.add_column("problem", style="yellow")
    if verbose or len(d.files) <= FILES_LISTED:
        for fe in d.files:
            f.add_row(fe.path, fe.format, str(fe.records), fe.problem or "")
        return f
    quiet: dict[str, list[int]] = {}
    shown = 0
    for fe in d.files:
        if (fe.problem or fe.format in _NOT_READ) and shown < FILES_LISTED:
            f.add_row(fe.path, fe.format, str(fe.records), fe.problem)
            shown += 1
        else:
            n = quiet.setdefault(fe.format, [0, 0, 0])
            n[0] += 1
            n[1] += fe.records
            n[2] += bool(fe.problem) or fe.format in _NOT_READ
    for fmt, (n, records, problems) in sorted(quiet.items(), key=lambda kv: (-kv[1][0], kv[0])):
        note = f"{problems} more with a problem (--verbose lists them)" if problems else ""
        f.add_row(Text(f"{n:,} file(s)", style="dim"), fmt, f"{records:,}", note)
    f.caption = f"{len(d.files):,} files; --verbose lists every one"
    return f


def render_text(d: Diagnosis, width: int | None = None, color: bool = True, verbose: bool = False) -> str:
    console = Console(width=width or 140, record=True, force_terminal=color, color_system="auto" if color else None,
                      file=io.StringIO())
    console.print(build(d, verbose))
    return console.export_text(styles=color)
