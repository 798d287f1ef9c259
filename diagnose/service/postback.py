"""Post a finished diagnosis back where the incident came from: a Jira comment, a PagerDuty note, a JSON POST.

``deliver(settings, incident, diagnosis, reply_to)`` is called by the worker once an incident is diagnosed. It never
raises for an HTTP failure: each target gets a :class:`Delivery` saying whether it worked, with how many attempts
and why not, so the worker can record it and the on-call engineer can see it.

Targets (each only when asked for by ``reply_to`` or configured):

* Jira Cloud, ``reply_to["jira_issue"]``: ``POST {jira_url}/rest/api/2/issue/{key}/comment`` with
  ``{"body": <wiki markup>}``, basic auth ``jira_user:jira_token`` (an Atlassian API token).
  https://developer.atlassian.com/cloud/jira/platform/rest/v2/api-group-issue-comments/ ("Add comment") and
  https://developer.atlassian.com/cloud/jira/platform/basic-auth-for-rest-apis/ ; REST v2 comment bodies are
  wiki markup (https://jira.atlassian.com/secure/WikiRendererHelpAction.jspa), so the note is written in it.
* PagerDuty, ``reply_to["pagerduty_incident"]``: ``POST {pagerduty_api_url}/incidents/{id}/notes`` with
  ``{"note": {"content": <plain text>}}`` and headers ``Authorization: Token token=<pagerduty_token>``,
  ``From: <pagerduty_from>``, ``Accept: application/vnd.pagerduty+json;version=2``.
  https://developer.pagerduty.com/api-reference/3df2b685a0dbc-create-a-note-on-an-incident
* ``settings.post_url``, for every incident: the whole Diagnosis JSON (the CLI's ``--format json`` contract), the
  incident, a short text note and the full markdown report (:func:`diagnose.render.render_markdown`). When
  ``settings.generic_secret`` is set the POST is signed like the generic hook expects
  (``X-Diagnose-Timestamp`` + ``X-Diagnose-Signature``), so the receiver can authenticate it. That receiver then
  holds the generic hook's secret, so it must be a system trusted to send incidents too (there is no separate
  post-back secret setting).
* GitHub, ``reply_to["github_issue"]``: not posted (there is no GitHub token setting); logged as skipped.

Retries: connect errors (nothing was sent), 429 and 5xx are retried up to ``settings.max_attempts`` attempts with
exponential backoff ``backoff_base_s * 2**(n-1)`` capped at :data:`MAX_DELAY_S`; a ``Retry-After`` header (seconds
or HTTP date) is obeyed instead, unless it asks for more than :data:`MAX_RETRY_AFTER_S`, which ends the delivery.
Other 4xx are not retried (the request itself is wrong: bad credentials, unknown issue). A read timeout is not
retried either: the server may have taken the comment, and a retry would post it twice.

Notes are short on purpose: the top 3 causes with score, verdict and location, 2 evidence lines each, and the
playbook to follow; the full result stays in the service.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import structlog

from diagnose.models.diagnosis import CauseResult, Diagnosis
from diagnose.render import render_markdown
from diagnose.service.hooks.signatures import GENERIC_SIGNATURE_HEADER, GENERIC_TIMESTAMP_HEADER, sign_generic
from diagnose.service.models import IncidentRecord
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.postback")

TOP_CAUSES = 3
EVIDENCE_LINES = 2
MAX_LINE_CHARS = 240
MAX_NOTE_CHARS = 20_000
"""PagerDuty rejects long notes; ours stay far below this, it only guards against pathological evidence lines."""
MAX_DELAY_S = 30.0
"""Longest backoff between two attempts: the worker thread waits here, a longer wait belongs to the next run."""
MAX_RETRY_AFTER_S = 120.0
TIMEOUT = httpx.Timeout(15.0, connect=5.0)
_RETRY_CONNECT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

Sleep = Callable[[float], None]
Clock = Callable[[], float]


@dataclass
class Delivery:
    """The outcome of posting to one target: ``jira``, ``pagerduty`` or ``post_url``.

    A fixed, small set of target names on purpose: the service counts deliveries per target in a Prometheus label,
    and an issue key or incident id there would grow the metric without bound. The worker knows the incident.
    """

    target: str
    ok: bool
    status_code: int | None
    attempts: int
    error: str | None


# ---------------------------------------------------------------------------------------------------------- notes


def _clip(s: str, limit: int = MAX_LINE_CHARS) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _playbook(c: CauseResult, base: str) -> str:
    return f"{base.rstrip('/')}/{c.playbook}" if base else f"{c.playbook} (diagnose playbook {c.id})"


def _headline(incident: IncidentRecord, d: Diagnosis) -> str:
    confirmed = sum(1 for c in d.causes if c.verdict == "confirmed")
    head = f"diagnose: incident #{incident.id}"
    if not d.causes:
        return head + ": no cause is supported by the evidence collected"
    return head + f": {len(d.causes)} candidate cause(s), {confirmed} confirmed"


def _missing(d: Diagnosis) -> list[str]:
    return [f"collect {_clip(m.collect, 160)} (decides {', '.join(m.would_decide[:3])})"
            for m in d.missing_evidence[:2]]


def _footer(d: Diagnosis) -> str:
    bad = sum(1 for f in d.files if f.problem)
    return f"{len(d.files)} file(s) read" + (f", {bad} with problems" if bad else "")


def note_text(incident: IncidentRecord, d: Diagnosis, playbook_base: str = "") -> str:
    """Plain text (PagerDuty notes render no markup)."""
    out = [_headline(incident, d)]
    for i, c in enumerate(d.causes[:TOP_CAUSES], 1):
        out.append("")
        out.append(f"{i}. {c.id} score {c.score:.2f} {c.verdict} ({c.confidence}) at {c.location.label()}")
        out.append(f"   {_clip(c.title)}")
        for e in c.evidence[:EVIDENCE_LINES]:
            out.append(f"   - {_clip(e.file, 80)}:{e.line} {_clip(e.text)}")
        out.append(f"   playbook: {_playbook(c, playbook_base)}")
    for m in _missing(d) if not d.causes or all(c.verdict != "confirmed" for c in d.causes) else []:
        out.append(f"- {m}")
    out += ["", _footer(d)]
    return "\n".join(out)[:MAX_NOTE_CHARS]


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("`", "'").replace("*", "\\*").replace("_", "\\_")


def note_markdown(incident: IncidentRecord, d: Diagnosis, playbook_base: str = "") -> str:
    """Markdown (the JSON post-back's ``summary_markdown``; what a GitHub comment would carry)."""
    out = [f"**{_md(_headline(incident, d))}**"]
    for i, c in enumerate(d.causes[:TOP_CAUSES], 1):
        out.append("")
        out.append(f"{i}. `{c.id}` score **{c.score:.2f}** {c.verdict} ({c.confidence}) at "
                   f"`{c.location.label().replace('`', chr(39))}`: {_md(_clip(c.title))}")
        for e in c.evidence[:EVIDENCE_LINES]:
            out.append(f"   - `{_clip(e.file, 80).replace('`', chr(39))}:{e.line}` "
                       f"`{_clip(e.text).replace('`', chr(39))}`")
        pb = _playbook(c, playbook_base)
        out.append(f"   - playbook: [{c.playbook}]({pb})" if playbook_base else f"   - playbook: `{pb}`")
    for m in _missing(d) if not d.causes or all(c.verdict != "confirmed" for c in d.causes) else []:
        out.append(f"- {_md(m)}")
    out += ["", f"<sub>{_footer(d)}</sub>"]
    return "\n".join(out)[:MAX_NOTE_CHARS]


_WIKI_SPECIAL = str.maketrans({ch: "\\" + ch for ch in "\\{}[]*_|!^~+-#?"})


def _wiki(s: str) -> str:
    return s.translate(_WIKI_SPECIAL)


def note_jira(incident: IncidentRecord, d: Diagnosis, playbook_base: str = "") -> str:
    """Jira wiki markup (REST v2 comments): evidence in ``{noformat}`` so log text is shown verbatim."""
    out = [f"h4. {_wiki(_headline(incident, d))}"]
    for i, c in enumerate(d.causes[:TOP_CAUSES], 1):
        out.append("")
        out.append(f"*{i}. {{{{{c.id}}}}}* score *{c.score:.2f}* {c.verdict} ({c.confidence}) at "
                   f"{_wiki(c.location.label())}: {_wiki(_clip(c.title))}")
        if c.evidence:
            lines = [f"{_clip(e.file, 80)}:{e.line} {_clip(e.text)}" for e in c.evidence[:EVIDENCE_LINES]]
            out.append("{noformat}" + "\n".join(lines).replace("{noformat}", "{ noformat}") + "{noformat}")
        pb = _playbook(c, playbook_base)
        out.append(f"Playbook: [{_wiki(c.playbook)}|{pb}]" if playbook_base else f"Playbook: {_wiki(pb)}")
    for m in _missing(d) if not d.causes or all(c.verdict != "confirmed" for c in d.causes) else []:
        out.append(f"* {_wiki(m)}")
    out += ["", f"_{_wiki(_footer(d))}_"]
    return "\n".join(out)[:MAX_NOTE_CHARS]


# -------------------------------------------------------------------------------------------------------- sending


def _retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date (RFC 9110 section 10.2.3); None when absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _snippet(resp: httpx.Response) -> str:
    try:
        text = resp.text
    except Exception:  # noqa: BLE001 - undecodable error bodies are not worth a crash
        text = ""
    return _clip(text, 200)


def _post(client: httpx.Client, target: str, url: str, *, content: bytes, headers: Mapping[str, str],
          auth: httpx.Auth | tuple[str, str] | None, settings: Settings, sleep: Sleep, clock: Clock,
          plog: Any = log) -> Delivery:
    attempts = max(1, settings.max_attempts)
    status: int | None = None
    error = ""
    for attempt in range(1, attempts + 1):
        retry_after: float | None = None
        try:
            # httpx reads auth=None as "no auth" (not the client's default), though Client.post's annotation omits it
            resp = client.post(url, content=content, headers=dict(headers), auth=auth)  # type: ignore[arg-type]
        except _RETRY_CONNECT as exc:
            status, error = None, f"cannot connect: {type(exc).__name__}: {_clip(str(exc), 160)}"
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # a bad URL, or sent (or partly): retrying could post twice
            plog.warning("postback_failed", target=target, attempt=attempt, error=type(exc).__name__)
            return Delivery(target, False, None, attempt, f"{type(exc).__name__}: {_clip(str(exc), 160)}")
        else:
            status = resp.status_code
            if 200 <= status < 300:
                plog.info("postback_delivered", target=target, status=status, attempts=attempt)
                return Delivery(target, True, status, attempt, None)
            error = f"HTTP {status}: {_snippet(resp)}".rstrip(": ")
            if status != 429 and status < 500:
                plog.warning("postback_rejected", target=target, status=status, attempt=attempt)
                return Delivery(target, False, status, attempt, error)
            retry_after = _retry_after(resp.headers.get("retry-after"), clock())
        plog.warning("postback_retryable", target=target, status=status, attempt=attempt, error=error[:200])
        if attempt == attempts:
            break
        delay = min(settings.backoff_base_s * 2 ** (attempt - 1), MAX_DELAY_S)
        if retry_after is not None:
            if retry_after > MAX_RETRY_AFTER_S:
                error += f"; Retry-After {retry_after:.0f} s is beyond {MAX_RETRY_AFTER_S:.0f} s, not waiting"
                plog.warning("postback_gave_up", target=target, status=status, attempts=attempt)
                return Delivery(target, False, status, attempt, error)
            delay = retry_after
        sleep(delay)
    plog.warning("postback_gave_up", target=target, status=status, attempts=attempts)
    return Delivery(target, False, status, attempts, error or None)


def _not_configured(plog: Any, target: str, *settings_names: str) -> Delivery:
    plog.warning("postback_not_configured", target=target, missing=list(settings_names))
    return Delivery(target, False, None, 0, "not configured: set " + ", ".join(settings_names))


def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def deliver(settings: Settings, incident: IncidentRecord, diagnosis: Diagnosis, reply_to: Mapping[str, str], *,
            client: httpx.Client | None = None, sleep: Sleep = time.sleep, clock: Clock = time.time,
            playbook_base: str = "") -> list[Delivery]:
    """Post ``diagnosis`` of ``incident`` to every target ``reply_to`` names, and to ``settings.post_url``.

    ``client``, ``sleep`` and ``clock`` are injectable for tests; ``playbook_base`` (a URL prefix such as the
    repository's blob URL) turns playbook paths into links. Returns one Delivery per target tried, in the order
    Jira, PagerDuty, post_url; a target named but not configured gets a Delivery with ``attempts=0`` and the
    settings to set.
    """
    own = client is None
    http = client or httpx.Client(timeout=TIMEOUT, follow_redirects=False,
                                  headers={"User-Agent": "diagnose-service"})
    out: list[Delivery] = []
    plog = log.bind(incident_id=incident.id)
    try:
        key = reply_to.get("jira_issue")
        if key:
            target = "jira"
            token = settings.jira_token.get_secret_value() if settings.jira_token else ""
            if not (settings.jira_url and settings.jira_user and token):
                out.append(_not_configured(plog, target, "DIAGNOSE_JIRA_URL", "DIAGNOSE_JIRA_USER",
                                           "DIAGNOSE_JIRA_TOKEN"))
            else:
                url = f"{settings.jira_url.rstrip('/')}/rest/api/2/issue/{quote(key, safe='')}/comment"
                body = _json({"body": note_jira(incident, diagnosis, playbook_base)})
                out.append(_post(http, target, url, content=body, auth=(settings.jira_user, token),
                                 headers={"Content-Type": "application/json", "Accept": "application/json"},
                                 settings=settings, sleep=sleep, clock=clock, plog=plog))
        pd_id = reply_to.get("pagerduty_incident")
        if pd_id:
            target = "pagerduty"
            token = settings.pagerduty_token.get_secret_value() if settings.pagerduty_token else ""
            if not (token and settings.pagerduty_from):
                out.append(_not_configured(plog, target, "DIAGNOSE_PAGERDUTY_TOKEN", "DIAGNOSE_PAGERDUTY_FROM"))
            else:
                url = f"{settings.pagerduty_api_url.rstrip('/')}/incidents/{quote(pd_id, safe='')}/notes"
                body = _json({"note": {"content": note_text(incident, diagnosis, playbook_base)}})
                headers = {"Authorization": f"Token token={token}", "From": settings.pagerduty_from,
                           "Accept": "application/vnd.pagerduty+json;version=2",
                           "Content-Type": "application/json"}
                out.append(_post(http, target, url, content=body, headers=headers, auth=None, settings=settings,
                                 sleep=sleep, clock=clock, plog=plog))
        if reply_to.get("github_issue"):
            plog.info("postback_skipped", target="github", issue=reply_to["github_issue"],
                     reason="GitHub post-back is not implemented (no GitHub token setting)")
        if settings.post_url:
            payload = {
                "incident_id": incident.id,
                "incident": incident.model_dump(mode="json", exclude={"diagnosis"}),
                "reply_to": dict(reply_to),
                "summary": note_text(incident, diagnosis, playbook_base),
                "summary_markdown": note_markdown(incident, diagnosis, playbook_base),
                "markdown": render_markdown(diagnosis, playbook_base),
                "diagnosis": diagnosis.model_dump(mode="json"),
            }
            body = _json(payload)
            headers = {"Content-Type": "application/json"}
            secret = settings.generic_secret.get_secret_value() if settings.generic_secret else ""
            if secret:
                ts = str(int(clock()))
                headers[GENERIC_TIMESTAMP_HEADER] = ts
                headers[GENERIC_SIGNATURE_HEADER] = sign_generic(secret.encode("utf-8"), ts, body)
            out.append(_post(http, "post_url", settings.post_url, content=body, headers=headers, auth=None,
                             settings=settings, sleep=sleep, clock=clock, plog=plog))
    finally:
        if own:
            http.close()
    return out
