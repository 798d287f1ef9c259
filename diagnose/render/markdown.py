"""Markdown for a ticket comment."""

from __future__ import annotations

from diagnose.models.diagnosis import Diagnosis

MAX_EVIDENCE = 5


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\*_[]<>#"})


def escape(s: str) -> str:
    """Prose from the evidence or the catalog as markdown text: ``LinkBW*1e9*720`` keeps its stars, ``[rank3]``
    its brackets (code spans in it are kept as written)."""
    parts = s.split("`")
    return "`".join(p.translate(_MD_SPECIAL) if i % 2 == 0 else p for i, p in enumerate(parts)) if len(parts) % 2 \
        else s.translate(_MD_SPECIAL)


def _esc(s: str) -> str:
    """:func:`escape`, safe in a table cell too (no pipe, no backtick)."""
    return s.translate(_MD_SPECIAL).replace("|", "\\|").replace("`", "'")


def _code(s: str) -> str:
    """A quoted line as a code span (in a list item, never a table): shown exactly, a backtick inside becoming '."""
    return "`" + s.replace("`", "'") + "`"


def render_markdown(d: Diagnosis, playbook_base: str = "") -> str:
    out: list[str] = ["## diagnose: triage result", ""]
    if d.symptoms:
        out.append("**Symptoms:** " + "; ".join(f"{s.kind} ({_esc(s.source)})" for s in d.symptoms))
        out.append("")
    confirmed = [c for c in d.causes if c.verdict == "confirmed"]
    if not d.causes:
        out += ["No cause is supported by the evidence given.", ""]
    else:
        out += ["| # | cause | score | verdict | where |", "|---|---|---|---|---|"]
        for i, c in enumerate(d.causes, 1):
            out.append(f"| {i} | `{c.id}` {_esc(c.title)} | {c.score:.2f} | {c.verdict} ({c.confidence}) "
                       f"| {_esc(c.location.label())} |")
        out.append("")
    for c in confirmed or d.causes[:1]:
        out.append(f"### `{c.id}`: {_esc(c.title)}")
        out.append("")
        out.append(_esc(c.summary))
        out.append("")
        out.append("Evidence:")
        for e in c.evidence[:MAX_EVIDENCE]:
            out.append(f"- {_code(f'{e.file}:{e.line}')} {_code(e.text)}")
        if len(c.evidence) > MAX_EVIDENCE:
            out.append(f"- ... {len(c.evidence) - MAX_EVIDENCE} more")
        if c.against:
            out.append("")
            out.append("Against:")
            for e in c.against[:3]:
                out.append(f"- {_code(f'{e.file}:{e.line}')} {_code(e.text)}")
        out.append("")
        out.append(f"Playbook: [{_esc(c.playbook)}]({playbook_base}{c.playbook})")
        out.append("")
    if d.ruled_out:
        out.append("**Ruled out:**")
        for r in d.ruled_out:
            out.append(f"- `{r.id}`: {_esc(r.why)}")
        out.append("")
    if d.missing_evidence:
        out.append("**Would help decide:**")
        for m in d.missing_evidence:
            out.append(f"- {_esc(m.collect)} (decides {', '.join(f'`{x}`' for x in m.would_decide)})")
        out.append("")
    bad = [f for f in d.files if f.problem]
    out.append(f"<sub>{len(d.files)} file(s) read" + (f", {len(bad)} with problems" if bad else "") + "</sub>")
    return "\n".join(out) + "\n"
