"""The Microsoft Teams outgoing webhook: ``POST /teams/messages``.

Teams posts a Bot Framework ``message`` activity when someone @mentions the webhook in a channel and shows
our synchronous reply in the same thread. It signs the raw body: ``Authorization: HMAC <base64>`` where the
value is the base64 HMAC-SHA256 of the body keyed with the base64-decoded security token shown when the
webhook was created. Teams waits 5 seconds for the reply and offers no way to answer later, so a ``job`` or
``host`` question that the worker cannot finish in time is answered "queued as incident N".
https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-outgoing-webhook

Replies are ``{"type": "message", "text": ...}`` (markdown) or carry an Adaptive Card attachment for ranked
causes. Cards in outgoing-webhook replies cannot call back (the docs allow only ``openURL`` actions), so
feedback on Teams is the ``feedback <incident> right|wrong [cause]`` command.

Replay protection: an activity ``id`` is accepted once; an activity whose ``timestamp`` is further than
``settings.max_request_age_s`` from now is stale. Both answer 401 before anything runs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Callable
from typing import Any

import structlog
from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from diagnose.chat.answers import Answers, Asker, IncidentAnswer, NoticeAnswer, QueuedAnswer
from diagnose.chat.grammar import clean_text
from diagnose.chat.render import teams_message, to_doc
from diagnose.chat.replay import ReplayGuard, is_stale, parse_iso_timestamp
from diagnose.service.bodies import TooLarge, Undecodable, loads, read_capped
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.chat.teams")


def teams_key(settings: Settings) -> bytes | None:
    """The HMAC key: the webhook's security token, base64-decoded; None when unset or not base64."""
    if settings.teams_secret is None or not settings.teams_secret.get_secret_value():
        return None
    try:
        return base64.b64decode(settings.teams_secret.get_secret_value(), validate=True)
    except (binascii.Error, ValueError):
        log.error("teams_secret_not_base64")
        return None


def verify_teams_signature(key: bytes, body: bytes, authorization: str) -> bool:
    """``Authorization: HMAC <base64(HMAC-SHA256(key, body))>``, compared in constant time."""
    scheme, _, value = authorization.strip().partition(" ")
    if scheme != "HMAC" or not value:
        return False
    expected = base64.b64encode(hmac.new(key, body, hashlib.sha256).digest())
    return hmac.compare_digest(expected, value.strip().encode("ascii", "replace"))


class TeamsEndpoint:
    """Verifies, de-duplicates and answers one outgoing-webhook activity within ``reply_within_s``."""

    def __init__(self, settings: Settings, answers: Answers | None, *, reply_within_s: float = 4.0,
                 poll_s: float = 0.5, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.answers = answers
        self.key = teams_key(settings)
        self.reply_within_s = reply_within_s
        self.poll_s = poll_s
        self.clock = clock
        self.seen = ReplayGuard(window_s=max(float(settings.max_request_age_s), 300.0) * 2)

    def _reject(self, reason: str, status: int = 401) -> Response:
        log.warning("teams_request_rejected", reason=reason, status=status)
        return JSONResponse({"error": reason}, status_code=status)

    async def __call__(self, request: Request) -> Response:
        if self.key is None or self.answers is None:
            return JSONResponse({"error": "Teams is not configured (DIAGNOSE_TEAMS_SECRET, base64)"}, status_code=503)
        started = time.monotonic()
        try:
            body = await read_capped(request, self.settings.max_body_bytes)
        except TooLarge:
            return self._reject("body too large", 413)
        if not verify_teams_signature(self.key, body, request.headers.get("authorization", "")):
            return self._reject("bad signature")
        try:
            activity = loads(body)
        except Undecodable as exc:
            return self._reject(str(exc), 422)
        if not isinstance(activity, dict):
            return self._reject("activity is not an object", 422)
        now = self.clock()
        ts = parse_iso_timestamp(activity.get("timestamp", ""))
        if ts is None or is_stale(ts, now, self.settings.max_request_age_s):
            return self._reject("stale or missing timestamp")
        act_id = activity.get("id")
        if not isinstance(act_id, str) or not act_id:
            return self._reject("activity without id", 422)
        if not self.seen.first_seen(act_id, now):
            return self._reject("replayed activity")
        sender = activity.get("from") or {}
        asker = Asker(user=str(sender.get("name") or sender.get("id") or "someone"), platform="teams")
        text = clean_text(str(activity.get("text") or ""))
        budget = self.reply_within_s - (time.monotonic() - started)
        reply = await run_in_threadpool(self.reply, text, asker, budget)
        return JSONResponse(reply)

    def reply(self, text: str, asker: Asker, budget_s: float) -> dict[str, Any]:
        """The synchronous reply; waits for the worker only as long as Teams' 5-second limit allows."""
        assert self.answers is not None
        answers = self.answers
        answer = answers.answer(answers.parse(text), asker)
        if isinstance(answer, QueuedAnswer):
            inc = answer.incident.id
            final = answers.wait(inc, max(0.0, budget_s - 0.5), self.poll_s)
            if not (isinstance(final, IncidentAnswer) and final.state != "pending"):
                final = NoticeAnswer(f"Queued as incident {inc} ({answer.scope}); ask `incident {inc}` in a minute.")
            answer = final
        return teams_message(to_doc(answer))
