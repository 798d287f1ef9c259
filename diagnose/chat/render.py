"""Answers -> chat messages: Slack Block Kit, a Teams message (Adaptive Card or markdown), Mattermost markdown.

Every answer is first laid out once as a platform-neutral :class:`Doc` (title, intro lines, parts, footer,
feedback choices); the three renderers only translate that layout and enforce their platform's limits, so a
diagnosis reads the same everywhere. Long evidence is collapsed: each cause shows its first
:data:`EVIDENCE_SHOWN` lines and a "Show evidence" control expands the rest (Slack: a button whose
``block_actions`` replaces the message; Mattermost: an interactive button; Teams: ``Action.ShowCard``).

Platform limits enforced here (the messages are cut, never rejected):

- Slack: 50 blocks per message, 3000 characters per section text, 150 per header, 75 per button or option
  text, 2000 per button value, 10 context elements, 25 action elements, 100 select options
  (https://api.slack.com/reference/block-kit/blocks, https://api.slack.com/reference/block-kit/block-elements).
  Slack also rejects messages whose blocks hold ~13k characters in total (``msg_blocks_too_long``,
  slackapi/bolt-js#2509), so the blocks are kept under :data:`SLACK_TOTAL_BUDGET` characters.
- Teams: about 28 KB per message
  (https://learn.microsoft.com/en-us/connectors/teams/#known-issues-and-limitations; outgoing webhook replies,
  https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-outgoing-webhook).
- Mattermost: 16383 characters per post
  (https://developers.mattermost.com/integrate/slash-commands/#tips-and-best-practices).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal

from diagnose.chat.answers import (
    Answer,
    HelpAnswer,
    IncidentAnswer,
    NoticeAnswer,
    PlaybookAnswer,
    QueuedAnswer,
    RecentAnswer,
    WhyAnswer,
)
from diagnose.chat.grammar import HELP_TEXT
from diagnose.models.diagnosis import EvidenceRef

EVIDENCE_SHOWN = 2
MAX_CAUSES = 5
MAX_EVIDENCE_LINE = 300
SLACK_MAX_BLOCKS = 50
SLACK_MAX_TEXT = 3000
SLACK_MAX_HEADER = 150
SLACK_TOTAL_BUDGET = 11_000
SLACK_MAX_OPTIONS = 100
TEAMS_MAX_BYTES = 28 * 1024
MATTERMOST_MAX_CHARS = 16_383

# Slack action_ids, routed by diagnose.chat.slack
A_SHOW = "diag_show_evidence"
A_PLAYBOOK = "diag_playbook"
A_RIGHT = "diag_right"
A_WRONG = "diag_wrong"
A_ITWAS = "diag_it_was"


# ---------------------------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Line:
    """One line of a part. ``evidence``/``against``: ``ref`` is file:line; ``md``: markdown with code fences."""

    text: str
    kind: Literal["text", "evidence", "against", "md", "muted"] = "text"
    ref: str = ""


@dataclass
class Part:
    heading: str
    lines: list[Line] = field(default_factory=list)
    more: list[Line] = field(default_factory=list)
    cause: str | None = None
    expanded: bool = False


@dataclass
class Doc:
    """A platform-neutral message. Inline markup is limited to ``**bold**`` and `` `code` ``."""

    title: str
    intro: list[Line] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)
    incident_id: int | None = None
    top_cause: str | None = None
    feedback_options: tuple[str, ...] = ()
    ok: bool = True

    def fallback(self) -> str:
        """Plain one-paragraph text for notifications and clients that show no rich content."""
        bits = [self.title] + [ln.text for ln in self.intro[:2]]
        if self.parts:
            bits.append("; ".join(p.heading for p in self.parts[:3]))
        return _plain(" | ".join(b for b in bits if b))[:2900]


def _plain(s: str) -> str:
    return s.replace("**", "").replace("`", "")


def _safe(s: str, limit: int = MAX_EVIDENCE_LINE) -> str:
    """Text from evidence files is data: no backticks (they would close our code spans), one line, clipped."""
    s = " ".join(s.replace("`", "'").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _ev(e: EvidenceRef, kind: Literal["evidence", "against"] = "evidence") -> Line:
    return Line(_safe(e.text), kind, ref=_safe(f"{e.file}:{e.line}", 160))


def _ago(dt: datetime, now: datetime) -> str:
    s = (now - (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc))).total_seconds()
    if s < 90:
        return "just now"
    if s < 5400:
        return f"{round(s / 60)} min ago"
    if s < 172800:
        return f"{round(s / 3600)} h ago"
    return f"{round(s / 86400)} d ago"


def _hosts(hosts: list[str], n: int = 4) -> str:
    return ", ".join(hosts[:n]) + (f" (+{len(hosts) - n})" if len(hosts) > n else "")


def _incident_line(a: IncidentAnswer) -> Line:
    inc = a.incident
    bits = [inc.status, f"source {inc.source}"]
    if inc.job_id:
        bits.append(f"job {inc.job_id}")
    if inc.hosts:
        bits.append(f"hosts {_hosts(inc.hosts)}")
    if inc.group_key:
        bits.append(f"behind {inc.group_key}")
    if inc.alert_count > 1:
        bits.append(f"{inc.alert_count} alerts")
    return Line(" · ".join(bits), "muted")


def incident_doc(a: IncidentAnswer) -> Doc:
    """The ranked causes of one incident, or its state while it has none."""
    inc = a.incident
    doc = Doc(title=f"Incident {inc.id}: {inc.title}", incident_id=inc.id)
    doc.intro.append(_incident_line(a))
    if a.state == "pending":
        doc.intro.append(Line(f"Still diagnosing (status {inc.status}). Ask `incident {inc.id}` again in a minute."))
        return doc
    if a.state == "failed":
        doc.ok = False
        doc.intro.append(Line(f"Diagnosis failed: {_safe(inc.error or a.problem or 'no reason recorded', 600)}"))
        return doc
    d = a.diagnosis
    assert d is not None
    if d.symptoms:
        doc.intro.append(Line("Symptoms: " + "; ".join(f"{s.kind} ({_safe(s.source, 80)})" for s in d.symptoms[:6])))
    if not d.causes:
        doc.intro.append(Line("No cause is supported by the evidence given."))
    for rank, c in enumerate(d.causes[:MAX_CAUSES], 1):
        expanded = c.id in a.expanded
        head = f"{rank}. `{c.id}` {c.title}"
        lines = [Line(f"**{c.verdict}** ({c.confidence}, score {c.score:.2f}) at {c.location.label()}"),
                 Line(_safe(c.summary, 500))]
        ev = [_ev(e) for e in c.evidence] + [_ev(e, "against") for e in c.against]
        shown, more = (ev, []) if expanded else (ev[:EVIDENCE_SHOWN], ev[EVIDENCE_SHOWN:])
        doc.parts.append(Part(head, lines + shown, more, cause=c.id, expanded=expanded))
    if len(d.causes) > MAX_CAUSES:
        rest = d.causes[MAX_CAUSES:]
        doc.footer.append(f"{len(rest)} more with less support: " + ", ".join(f"`{c.id}`" for c in rest[:8]))
    if d.ruled_out:
        ids = ", ".join(f"`{r.id}`" for r in d.ruled_out[:8])
        extra = f" (+{len(d.ruled_out) - 8})" if len(d.ruled_out) > 8 else ""
        doc.footer.append(f"Ruled out: {ids}{extra}. Ask `why <cause> {inc.id}` for the reason.")
    for m in d.missing_evidence[:3]:
        doc.footer.append(f"Would help decide: {_safe(m.collect, 300)} (decides "
                          + ", ".join(f"`{x}`" for x in m.would_decide[:4]) + ")")
    bad = sum(1 for f in d.files if f.problem)
    doc.footer.append(f"{len(d.files)} file(s) read" + (f", {bad} with problems" if bad else ""))
    if d.causes:
        doc.top_cause = d.causes[0].id
    return doc


def queued_doc(a: QueuedAnswer) -> Doc:
    inc = a.incident
    how = "is already being diagnosed" if a.reused else "was queued"
    return Doc(title=f"Diagnosing {a.scope}", incident_id=inc.id, intro=[Line(
        f"Incident {inc.id} {how}. The ranked causes follow here when the worker is done; "
        f"or ask `incident {inc.id}` in a minute.")])


def why_doc(a: WhyAnswer) -> Doc:
    inc = a.incident
    doc = Doc(title=f"Why `{a.cause}`: {a.title}", incident_id=inc.id if inc else None)
    if inc is not None:
        doc.intro.append(Line(f"Incident {inc.id}: {_safe(inc.title, 200)}", "muted"))
    if a.result is not None:
        c = a.result
        doc.intro.append(Line(f"Ranked {a.rank}: **{c.verdict}** ({c.confidence}, score {c.score:.2f}) at "
                              f"{c.location.label()}"))
        doc.intro.append(Line(_safe(c.summary, 600)))
        doc.parts.append(Part(f"Evidence for ({len(c.evidence)})", [_ev(e) for e in c.evidence]
                              or [Line("none recorded", "muted")], expanded=True))
        doc.parts.append(Part(f"Evidence against ({len(c.against)})", [_ev(e, "against") for e in c.against]
                              or [Line("nothing argues against it", "muted")], expanded=True))
        doc.footer.append(f"Playbook: `playbook {a.cause}` ({c.playbook})")
    elif a.ruled_out is not None:
        doc.intro.append(Line(f"**Ruled out**: {_safe(a.ruled_out.why, 1500)}"))
    if a.note:
        doc.intro.append(Line(a.note))
    if a.would_show:
        doc.parts.append(Part("What would show it", [Line(_safe(s, 400)) for s in a.would_show], expanded=True))
    for m in a.missing:
        doc.footer.append(f"Would help decide: {_safe(m.collect, 300)}")
    return doc


def playbook_doc(a: PlaybookAnswer) -> Doc:
    f = a.front
    yes = {True: "yes", False: "no"}
    meta = (f"risk {f.get('risk', '?')} · needs root: {yes.get(bool(f.get('needs_root')), '?')} · "
            f"maintenance window: {yes.get(bool(f.get('maintenance_window')), '?')}")
    doc = Doc(title=f"Playbook `{a.cause}`: {a.title}", intro=[Line(meta, "muted")])
    for name, steps in a.sections:
        doc.parts.append(Part(name, [Line(s, "md") for s in steps], expanded=True))
    doc.footer.append(f"Full text with 'Tell apart from' and references: {a.path} or `diagnose playbook {a.cause}`")
    return doc


def recent_doc(a: RecentAnswer, now: datetime | None = None) -> Doc:
    now = now or datetime.now(timezone.utc)
    doc = Doc(title="Recent incidents")
    if not a.incidents:
        doc.intro.append(Line("No incidents are stored yet."))
    lines = []
    for inc in a.incidents:
        top = "no cause yet"
        causes = (inc.diagnosis or {}).get("causes") or []
        if causes:
            c0 = causes[0]
            top = f"`{c0.get('id')}` {c0.get('verdict', '')} {float(c0.get('score', 0.0)):.2f}"
        elif inc.status == "failed":
            top = "failed"
        lines.append(Line(f"`#{inc.id}` {inc.status} · {_ago(inc.created_at, now)} · {_safe(inc.title, 120)} · {top}"))
    if lines:
        doc.parts.append(Part("", lines, expanded=True))
    return doc


def help_doc(a: HelpAnswer) -> Doc:
    doc = Doc(title="diagnose: ask me about an incident", ok=a.error is None)
    if a.error:
        doc.intro.append(Line(a.error))
    doc.parts.append(Part("Commands", [Line(ln) for ln in HELP_TEXT.split("\n")], expanded=True))
    return doc


def to_doc(answer: Answer, now: datetime | None = None) -> Doc:
    """Lay out any answer."""
    if isinstance(answer, IncidentAnswer):
        return incident_doc(answer)
    if isinstance(answer, QueuedAnswer):
        return queued_doc(answer)
    if isinstance(answer, WhyAnswer):
        return why_doc(answer)
    if isinstance(answer, PlaybookAnswer):
        return playbook_doc(answer)
    if isinstance(answer, RecentAnswer):
        return recent_doc(answer, now)
    if isinstance(answer, HelpAnswer):
        return help_doc(answer)
    if isinstance(answer, NoticeAnswer):
        return Doc(title=answer.text, ok=answer.ok)
    raise TypeError(f"no layout for {type(answer).__name__}")


def with_feedback(doc: Doc, cause_ids: list[str]) -> Doc:
    """Offer "right cause" / "wrong cause, it was X" on a diagnosed incident (X from every known cause)."""
    if doc.incident_id is None or doc.top_cause is None:
        return doc
    return replace(doc, feedback_options=tuple(c for c in cause_ids if c != doc.top_cause))


# ---------------------------------------------------------------------------------------------- Slack


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def slack_mrkdwn(s: str) -> str:
    """Our markdown -> Slack mrkdwn (https://api.slack.com/reference/surfaces/formatting).

    ``&``, ``<`` and ``>`` must be escaped; bold is ``*x*``; links are ``<url|text>``; code fences take no
    language tag.
    """
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = re.sub(r"\*\*(.+?)\*\*", r"*\1*", s)
    s = re.sub(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)", r"<\2|\1>", s)
    return re.sub(r"^```[\w+-]+[ \t]*$", "```", s, flags=re.M)


def _slack_line(ln: Line) -> str:
    if ln.kind == "evidence":
        return slack_mrkdwn(f"`{ln.ref}` {ln.text}")
    if ln.kind == "against":
        return slack_mrkdwn(f"_against_ `{ln.ref}` {ln.text}")
    if ln.kind == "muted":
        return "_" + slack_mrkdwn(ln.text) + "_"
    return slack_mrkdwn(ln.text)


def _chunks(lines: list[str], limit: int) -> list[str]:
    """Join lines into texts of at most ``limit`` characters (a longer line is cut)."""
    out: list[str] = []
    cur = ""
    for ln in lines:
        ln = _clip(ln, limit)
        if cur and len(cur) + 1 + len(ln) > limit:
            out.append(cur)
            cur = ln
        else:
            cur = f"{cur}\n{ln}" if cur else ln
    if cur:
        out.append(cur)
    return out


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _clip(text, SLACK_MAX_TEXT)}}


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "button", "text": {"type": "plain_text", "text": _clip(text, 75), "emoji": True},
                         "action_id": action_id, "value": value[:2000]}
    if style:
        b["style"] = style
    return b


def action_value(incident_id: int | None, cause: str | None = None, actual: str | None = None) -> str:
    """The compact JSON carried by a Slack button or option (option values are limited to 150 characters)."""
    v: dict[str, Any] = {"i": incident_id}
    if cause:
        v["c"] = cause
    if actual:
        v["a"] = actual
    return json.dumps(v, separators=(",", ":"))


def slack_message(doc: Doc) -> dict[str, Any]:
    """``{"text", "blocks"}`` for chat.postMessage, a slash-command reply or a ``response_url`` POST.

    Block Kit reference: https://api.slack.com/reference/block-kit/blocks
    """
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(_plain(doc.title), SLACK_MAX_HEADER),
                                    "emoji": False}}]
    budget = SLACK_TOTAL_BUDGET - len(blocks[0]["text"]["text"])
    # reserve room for the footer and the feedback controls so they survive a long body
    tail: list[dict[str, Any]] = []
    if doc.footer:
        tail.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": _clip(slack_mrkdwn(t), 2000)} for t in doc.footer[:10]]})
    if doc.feedback_options and doc.incident_id is not None and doc.top_cause:
        opts = [{"text": {"type": "plain_text", "text": _clip(c, 75)},
                 "value": action_value(doc.incident_id, doc.top_cause, c)}
                for c in doc.feedback_options[:SLACK_MAX_OPTIONS]]
        tail.append({"type": "actions", "block_id": f"fb:{doc.incident_id}", "elements": [
            _button("Right cause", A_RIGHT, action_value(doc.incident_id, doc.top_cause), "primary"),
            _button("Wrong cause", A_WRONG, action_value(doc.incident_id, doc.top_cause), "danger"),
            {"type": "static_select", "action_id": A_ITWAS,
             "placeholder": {"type": "plain_text", "text": "Wrong, it was…"}, "options": opts},
        ]})
    budget -= sum(len(t) for t in doc.footer[:10])
    if doc.intro:
        for chunk in _chunks([_slack_line(ln) for ln in doc.intro], SLACK_MAX_TEXT):
            blocks.append(_section(chunk))
            budget -= len(chunk)
    omitted = 0
    for i, part in enumerate(doc.parts):
        room = SLACK_MAX_BLOCKS - len(tail) - 2 - len(blocks)  # keep one for the "not shown" note
        texts = ([f"*{slack_mrkdwn(part.heading)}*"] if part.heading else []) + [_slack_line(ln) for ln in part.lines]
        if part.expanded and part.more:
            texts += [_slack_line(ln) for ln in part.more]
        chunks = _chunks(texts, SLACK_MAX_TEXT)
        need = len(chunks) + (1 if part.cause and doc.incident_id is not None else 0)
        if room < need or budget <= 0:
            omitted = len(doc.parts) - i
            break
        for ch in chunks:
            if budget <= 0:
                blocks.append(_section("_… cut to fit Slack's message size_"))
                break
            if len(ch) > budget:  # cut at a line boundary so code spans and fences stay whole
                cut = ch.rfind("\n", 0, max(budget, 200))
                ch = (ch[:cut] if cut > 0 else ch[: max(budget, 200)]) + "\n_… cut to fit Slack's message size_"
            blocks.append(_section(ch))
            budget -= len(ch)
        if part.cause and doc.incident_id is not None:
            elements = []
            if part.more and not part.expanded:
                elements.append(_button(f"Show evidence ({len(part.more)} more)", A_SHOW,
                                        action_value(doc.incident_id, part.cause)))
            elements.append(_button("Playbook", A_PLAYBOOK, action_value(doc.incident_id, part.cause)))
            blocks.append({"type": "actions", "block_id": f"c:{doc.incident_id}:{part.cause}"[:255],
                           "elements": elements})
    if omitted:
        hint = f" Ask `incident {doc.incident_id}`." if doc.incident_id is not None else ""
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": f"{omitted} more section(s) not shown to fit Slack's limits.{hint}"}]})
    blocks.extend(tail)
    return {"text": doc.fallback(), "blocks": blocks[:SLACK_MAX_BLOCKS]}


# ---------------------------------------------------------------------------------------------- Teams


def _md_line(ln: Line) -> str:
    if ln.kind == "evidence":
        return f"- `{ln.ref}  {ln.text}`"
    if ln.kind == "against":
        return f"- against: `{ln.ref}  {ln.text}`"
    if ln.kind == "muted":
        return f"_{ln.text}_"
    return ln.text


def _join(lines: list[str], sep: str) -> str:
    """Join lines; list items and code stay on single newlines, prose lines get ``sep`` between them."""
    out = ""
    for n, ln in enumerate(lines):
        if n == 0:
            out = ln
        elif ln.startswith("- ") or ln == "" or "```" in ln or out.endswith("\n"):
            out += "\n" + ln
        else:
            out += sep + ln
    return out


def markdown_text(doc: Doc, limit: int, hint: str = "", sep: str = "\n") -> str:
    """The document as chat markdown within ``limit`` characters (whole parts are dropped from the end).

    ``sep`` separates prose lines: Mattermost breaks lines at every newline; Teams needs a blank line.
    """
    head = [f"**{doc.title}**", ""] + [_md_line(ln) for ln in doc.intro]
    foot = [""] + [f"_{t}_" for t in doc.footer] if doc.footer else []
    out = _join(head, sep)
    tail = _join(foot, sep)
    dropped = 0
    for i, part in enumerate(doc.parts):
        lines = ["", f"**{part.heading}**"] if part.heading else [""]
        lines += [_md_line(ln) for ln in part.lines]
        if part.more and part.expanded:
            lines += [_md_line(ln) for ln in part.more]
        elif part.more:
            lines.append(f"- … {len(part.more)} more{hint.format(cause=part.cause, incident=doc.incident_id)}")
        block = _join(lines, sep)
        room = limit - len(out) - len(tail) - 200
        if len(block) > room:
            # keep the beginning of the part that does not fit (the top cause must survive), drop the rest
            kept: list[str] = []
            for ln in lines:
                if len(_join([*kept, ln], sep)) > room:
                    break
                kept.append(ln)
            if len([k for k in kept if k]) > 1:
                out += "\n" + _join(kept, sep) + f"{sep}_… {len(lines) - len(kept)} more line(s) cut_"
                dropped = len(doc.parts) - i - 1
            else:
                dropped = len(doc.parts) - i
            break
        out += "\n" + block
    if dropped:
        out += f"\n\n_{dropped} more section(s) not shown to fit the message size._"
    out += ("\n" + tail) if tail else ""
    return _clip(out, limit)


def _tb(text: str, **kw: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **kw}


def _card_line(ln: Line) -> dict[str, Any]:
    if ln.kind in ("evidence", "against"):
        prefix = "against " if ln.kind == "against" else ""
        return _tb(f"{prefix}{ln.ref}  {ln.text}", fontType="Monospace", size="Small", spacing="None")
    if ln.kind == "muted":
        return _tb(_plain(ln.text), isSubtle=True, spacing="Small")
    return _tb(ln.text.replace("`", ""), spacing="Small")


def teams_card(doc: Doc, show_cards: bool = True) -> dict[str, Any]:
    """An Adaptive Card 1.4 (https://adaptivecards.io/explorer/): causes in containers, evidence behind
    ``Action.ShowCard`` (https://adaptivecards.io/explorer/Action.ShowCard.html)."""
    body: list[dict[str, Any]] = [_tb(_plain(doc.title), size="Medium", weight="Bolder")]
    body += [_card_line(ln) for ln in doc.intro]
    for part in doc.parts:
        items: list[dict[str, Any]] = []
        if part.heading:
            items.append(_tb(part.heading.replace("`", ""), weight="Bolder"))
        items += [_card_line(ln) for ln in part.lines]
        if part.more and (part.expanded or not show_cards):
            items += [_card_line(ln) for ln in part.more] if part.expanded else [
                _tb(f"… {len(part.more)} more: ask `why {part.cause} {doc.incident_id}`".replace("`", ""),
                    isSubtle=True)]
        elif part.more:
            items.append({"type": "ActionSet", "actions": [{
                "type": "Action.ShowCard", "title": f"Show evidence ({len(part.more)} more)",
                "card": {"type": "AdaptiveCard", "body": [_card_line(ln) for ln in part.more]}}]})
        body.append({"type": "Container", "separator": True, "spacing": "Medium", "items": items})
    for t in doc.footer:
        body.append(_tb(_plain(t), isSubtle=True, size="Small"))
    if doc.top_cause and doc.incident_id is not None:
        body.append(_tb(f"Was it right? Reply: feedback {doc.incident_id} right, or feedback {doc.incident_id} "
                        "wrong <cause>", isSubtle=True, size="Small"))
    return {"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.4", "msteams": {"width": "Full"}, "body": body}


def _size(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload, ensure_ascii=False).encode("utf-8"))


def teams_message(doc: Doc) -> dict[str, Any]:
    """The synchronous reply of an outgoing webhook: ``{"type": "message", ...}``.

    Causes go into an Adaptive Card attachment; other answers (playbooks with commands, help) are markdown text,
    which renders code that cards cannot. Outgoing webhook reply format:
    https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-outgoing-webhook
    """
    if any(p.cause for p in doc.parts) and doc.incident_id is not None:
        for show in (True, False):
            msg = {"type": "message", "attachments": [
                {"contentType": "application/vnd.microsoft.card.adaptive", "content": teams_card(doc, show)}]}
            if _size(msg) <= TEAMS_MAX_BYTES:
                return msg
    limit = TEAMS_MAX_BYTES // 2  # characters; leaves room for multi-byte text and the envelope
    text = markdown_text(doc, limit, hint=": ask `why {cause} {incident}`", sep="\n\n")
    return {"type": "message", "text": text}


# ---------------------------------------------------------------------------------------------- Mattermost

Signer = Callable[[dict[str, Any]], dict[str, Any]]


def mattermost_message(doc: Doc, action_url: str | None = None, sign: Signer | None = None,
                       response_type: str = "in_channel") -> dict[str, Any]:
    """A slash-command reply or ``response_url`` POST: ``{"response_type", "text", "attachments"?}``.

    Buttons are legacy message-attachment actions whose ``integration.context`` is signed by ``sign``, so a
    click can be verified (https://developers.mattermost.com/integrate/plugins/interactive-messages/).
    Action ids are alphanumeric: Mattermost rejects ids with other characters.
    """
    interactive = bool(action_url and sign and doc.incident_id is not None)
    hint = "" if interactive else ": ask `why {cause} {incident}`"
    msg: dict[str, Any] = {"response_type": response_type,
                           "text": markdown_text(doc, MATTERMOST_MAX_CHARS - 200, hint=hint)}
    if not interactive:
        return msg
    assert action_url is not None and sign is not None
    actions: list[dict[str, Any]] = []
    for n, part in enumerate(doc.parts[:MAX_CAUSES]):
        if part.cause and part.more and not part.expanded:
            actions.append({"id": f"evidence{n}", "name": f"Evidence: {part.cause}", "type": "button",
                            "integration": {"url": action_url, "context": sign(
                                {"action": "evidence", "incident": doc.incident_id, "cause": part.cause})}})
    if doc.top_cause:
        actions.append({"id": "playbook", "name": f"Playbook: {doc.top_cause}", "type": "button",
                        "integration": {"url": action_url, "context": sign(
                            {"action": "playbook", "incident": doc.incident_id, "cause": doc.top_cause})}})
    if doc.feedback_options and doc.top_cause:
        ctx = {"incident": doc.incident_id, "cause": doc.top_cause}
        actions += [
            {"id": "right", "name": "Right cause", "type": "button", "style": "good",
             "integration": {"url": action_url, "context": sign({"action": "right", **ctx})}},
            {"id": "wrong", "name": "Wrong cause", "type": "button", "style": "danger",
             "integration": {"url": action_url, "context": sign({"action": "wrong", **ctx})}},
            {"id": "itwas", "name": "Wrong, it was…", "type": "select",
             "options": [{"text": c, "value": c} for c in doc.feedback_options],
             "integration": {"url": action_url, "context": sign({"action": "itwas", **ctx})}},
        ]
    if actions:
        msg["attachments"] = [{"fallback": doc.fallback(), "actions": actions}]
    return msg
