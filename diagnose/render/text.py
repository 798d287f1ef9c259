"""Terminal rendering with rich.

Quoted evidence is never read as markup: every string from the evidence or the catalog goes in as a
:class:`rich.text.Text` (``[rank10]``, ``[send]`` stay as they are). At widths under :data:`CARD_BELOW` each cause
is a card (cause, verdict, where, why, then each evidence line as ``file:line`` and the line), wrapped at spaces and
never inside a token: a ``file:line`` or a counter name is never broken into a false line number.
"""

from __future__ import annotations

import io
import textwrap

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from diagnose.models.diagnosis import Diagnosis

_VERDICT_STYLE = {"confirmed": "bold red", "inconclusive": "yellow", "ruled_out": "green"}
CARD_BELOW = 100  # columns: narrower terminals get one card per cause instead of the table


def _t(s: object, style: str = "") -> Text:
    """A plain string as rich text: brackets and backslashes in it are not markup."""
    return Text(str(s), style=style)


def build(d: Diagnosis, verbose: bool = False) -> Group:
    parts: list[object] = []
    if d.symptoms:
        parts.append(_t("Symptoms: " + "; ".join(f"{s.kind} [{s.source}]" for s in d.symptoms), style="bold"))
    t = Table(title="Ranked causes", show_lines=False, expand=True)
    t.add_column("#", justify="right", width=2)
    t.add_column("cause", no_wrap=True)
    t.add_column("score", justify="right", width=5)
    t.add_column("verdict", no_wrap=True)
    t.add_column("where")
    t.add_column("why", ratio=2)
    for i, c in enumerate(d.causes, 1):
        t.add_row(str(i), _t(c.id), f"{c.score:.2f}", Text(f"{c.verdict} ({c.confidence})", style=_VERDICT_STYLE[c.verdict]),
                  _t(c.location.label()), _t(c.summary))
    if not d.causes:
        t.add_row("-", "no cause supported by the evidence", "", "", "", "")
    parts.append(t)
    for c in [x for x in d.causes if x.verdict == "confirmed"] or d.causes[:1]:
        ev = Table.grid(padding=(0, 1), expand=True)
        ev.add_column(style="cyan", max_width=48, overflow="fold", ratio=1)
        ev.add_column(ratio=3, overflow="fold")
        for e in c.evidence[: (50 if verbose else 6)]:
            ev.add_row(_t(f"{e.file}:{e.line}"), _t(e.text))
        for e in c.against[:3]:
            ev.add_row(Text(f"against {e.file}:{e.line}", style="green"), _t(e.text))
        ev.add_row("playbook", _t(c.playbook))
        parts.append(Panel(ev, title=_t(f"{c.id}: {c.title}"), title_align="left"))
    if d.ruled_out:
        r = Table(title="Ruled out", show_header=False, expand=True)
        r.add_column(style="green", no_wrap=True)
        r.add_column()
        for ro in d.ruled_out:
            r.add_row(_t(ro.id), _t(ro.why))
        parts.append(r)
    if d.missing_evidence:
        m = Table(title="Evidence that would decide", show_header=False, expand=True)
        m.add_column()
        m.add_column(style="dim")
        for me in d.missing_evidence:
            m.add_row(_t(me.collect), _t(", ".join(me.would_decide)))
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
            f.add_row(_t(fe.path), _t(fe.format), str(fe.records), _t(fe.problem or ""))
        return f
    quiet: dict[str, list[int]] = {}
    shown = 0
    for fe in d.files:
        if (fe.problem or fe.format in _NOT_READ) and shown < FILES_LISTED:
            f.add_row(_t(fe.path), _t(fe.format), str(fe.records), _t(fe.problem or ""))
            shown += 1
        else:
            counts = quiet.setdefault(fe.format, [0, 0, 0])
            counts[0] += 1
            counts[1] += fe.records
            counts[2] += bool(fe.problem) or fe.format in _NOT_READ
    for fmt, (n, records, problems) in sorted(quiet.items(), key=lambda kv: (-kv[1][0], kv[0])):
        note = f"{problems} more with a problem (--verbose lists them)" if problems else ""
        f.add_row(Text(f"{n:,} file(s)", style="dim"), _t(fmt), f"{records:,}", _t(note))
    f.caption = f"{len(d.files):,} files; --verbose lists every one"
    return f


def _wrap(text: str, width: int, indent: str) -> list[str]:
    """Lines of at most ``width`` columns, broken at spaces only (a token longer than the line stays whole)."""
    return textwrap.wrap(text, width=max(20, width), initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent]


def _cards(d: Diagnosis, width: int, verbose: bool) -> list[Text]:
    """The narrow view: one card per cause, then what was ruled out, what would decide, the files."""
    out: list[Text] = []

    def line(s: str, style: str = "") -> None:
        out.append(_t(s, style))

    def para(label: str, text: str, style: str = "", indent: str = "   ") -> None:
        for ln in _wrap(f"{label}{text}", width, indent):
            line(ln, style)

    def quote(head: str, style: str, text: str) -> None:
        line(f"   {head}", style)
        para("", text.strip(), indent="     ")

    def section(title: str, items: list[str]) -> None:
        if items:
            line(title, "bold")
            for it in items:
                para("", it)
            line("")

    if d.symptoms:
        for ln in _wrap("Symptoms: " + "; ".join(f"{s.kind} [{s.source}]" for s in d.symptoms), width, ""):
            line(ln, "bold")
    line("")
    if not d.causes:
        line("No cause is supported by the evidence.", "bold")
    shown_ev = {c.id for c in d.causes if c.verdict == "confirmed"} or {c.id for c in d.causes[:1]}
    for i, c in enumerate(d.causes, 1):
        out.append(Text.assemble((f"{i}. {c.id}", "bold"), "  ",
                                 (f"{c.verdict} ({c.confidence})", _VERDICT_STYLE[c.verdict]), f"  score {c.score:.2f}"))
        para("", c.title)
        para("where: ", c.location.label() or "-")
        para("why: ", c.summary)
        if c.id in shown_ev or verbose:
            for e in c.evidence[: (50 if verbose else 6)]:
                quote(f"{e.file}:{e.line}", "cyan", e.text)
            for e in c.against[:3]:
                quote(f"against {e.file}:{e.line}", "green", e.text)
            para("playbook: ", c.playbook)
        line("")
    section("Ruled out", [f"{ro.id}: {ro.why}" for ro in d.ruled_out])
    section("Evidence that would decide", [f"{', '.join(me.would_decide)}: {me.collect}" for me in d.missing_evidence])
    line("Files", "bold")
    for fe in d.files[: (None if verbose else FILES_LISTED)]:
        note = f"  ({fe.problem})" if fe.problem else ""
        for ln in _wrap(f"{fe.path}  {fe.format}  {fe.records} record(s){note}", width, "   "):
            line(ln)
    if not verbose and len(d.files) > FILES_LISTED:
        line(f"   ... {len(d.files) - FILES_LISTED:,} more file(s); --verbose lists every one", "dim")
    return out


def render_text(d: Diagnosis, width: int | None = None, color: bool = True, verbose: bool = False) -> str:
    width = width or 140
    console = Console(width=width, record=True, force_terminal=color, color_system="auto" if color else None,
                      file=io.StringIO())
    if width < CARD_BELOW:
        for ln in _cards(d, width, verbose):
            console.print(ln, soft_wrap=True)  # already wrapped at spaces: rich must not fold a long token
    else:
        console.print(build(d, verbose))
    return console.export_text(styles=color)
