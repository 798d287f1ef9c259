"""The Mattermost slash command ``POST /mattermost/command`` and its buttons ``POST /mattermost/actions``.

Slash command (https://developers.mattermost.com/integrate/slash-commands/custom/): Mattermost POSTs a form
(``token``, ``team_id``, ``channel_id``, ``user_name``, ``command``, ``text``, ``response_url``,
``trigger_id``...) and, since 5.x, repeats the token as ``Authorization: Token <token>``. The token is compared
with ``settings.mattermost_token`` in constant time. The reply is ``{"response_type": "in_channel", "text":
...}``; ``job``/``host`` answer "queued as incident N" at once and POST the ranked causes to ``response_url``
when the worker is done.

Buttons (https://developers.mattermost.com/integrate/plugins/interactive-messages/): message-attachment
actions whose ``integration.context`` Mattermost sends back verbatim on a click (plus ``selected_option`` for
a menu). Nothing else in that request is authenticated, so the context carries an HMAC we computed with a key
derived from the slash-command token, bound to the channel and dated; a forged or altered context, or one
replayed into another channel, is refused with 401. Commands and clicks carry a fresh ``trigger_id`` each; a copy of
one already seen (or one whose trigger is stale) is a replay, refused with 401 (see ``MattermostEndpoint._replayed``). The reply ``{"update": {...}}`` rewrites the post (show
evidence) and ``{"ephemeral_text": ...}`` answers the clicker only (feedback, playbook).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import httpx
import structlog
from fastapi import BackgroundTasks, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from diagnose.chat.answers import (
    Answer,
    Answers,
    Asker,
    DaemonPool,
    HelpAnswer,
    IncidentAnswer,
    NoticeAnswer,
    QueuedAnswer,
)
from diagnose.chat.render import markdown_text, mattermost_message, to_doc, with_feedback
from diagnose.chat.replay import ReplayGuard, is_stale
from diagnose.service.bodies import TooLarge, Undecodable, loads, read_capped
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.chat.mattermost")

ACTION_TTL_S = 14 * 86400  # buttons on a two-week-old post still work; older ones ask for `incident N` again


def _token(settings: Settings) -> str | None:
    if settings.mattermost_token is None:
        return None
    return settings.mattermost_token.get_secret_value() or None


class ActionSigner:
    """Signs and verifies the ``context`` of our interactive buttons.

    The key is derived from the slash-command token (HMAC with a fixed label) so the token itself never
    travels inside a post, and rotating the token invalidates every old button.
    """

    def __init__(self, token: str, clock: Callable[[], float] = time.time, ttl_s: float = ACTION_TTL_S) -> None:
        self._key = hmac.new(token.encode("utf-8"), b"diagnose mattermost actions v1", hashlib.sha256).digest()
        self.clock = clock
        self.ttl_s = ttl_s

    def _mac(self, ctx: dict[str, Any]) -> str:
        canon = json.dumps(ctx, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hmac.new(self._key, canon.encode("ascii"), hashlib.sha256).hexdigest()

    def signer(self, channel_id: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def sign(ctx: dict[str, Any]) -> dict[str, Any]:
            out = {**ctx, "channel": channel_id, "ts": int(self.clock())}
            out["sig"] = self._mac(out)
            return out

        return sign

    def verify(self, ctx: Any, channel_id: str) -> dict[str, Any] | None:
        """The signed fields when the signature, the channel and the age check out; else None."""
        if not isinstance(ctx, dict):
            return None
        fields = {k: v for k, v in ctx.items() if k not in ("sig", "selected_option")}
        sig = ctx.get("sig")
        if not isinstance(sig, str) or not hmac.compare_digest(sig, self._mac(fields)):
            return None
        if fields.get("channel") != channel_id:
            return None
        ts = fields.get("ts")
        if not isinstance(ts, int) or not (0 <= self.clock() - ts <= self.ttl_s):
            return None
        return fields


def parse_trigger_id(value: str) -> tuple[str, str, int] | None:
    """(client trigger id, user id, epoch milliseconds) of a slash command's ``trigger_id``, or None when it is not
    one (its signature, by the Mattermost server's key, is not checked here: the token authenticates the request)."""
    if not value or len(value) > 4096:
        return None
    try:
        raw = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return None
    parts = raw.split(":", 3)
    if len(parts) != 4 or not parts[0] or not parts[2].isdigit() or len(parts[2]) > 16:
        return None
    return parts[0], parts[1], int(parts[2])


class MattermostEndpoint:
    """Both Mattermost routes over one :class:`Answers`."""

    def __init__(self, settings: Settings, answers: Answers | None, *, wait_s: float = 120.0, poll_s: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.answers = answers
        self.token = _token(settings)
        self.signer = ActionSigner(self.token, clock) if self.token else None
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.clock = clock
        self.seen = ReplayGuard(window_s=max(float(settings.max_request_age_s), 300.0) * 2)
        self.waiters = DaemonPool(16, "diagnose-mattermost-wait")

    def _replayed(self, form: dict[str, Any], body: bytes) -> str | None:
        """Why an authenticated slash command or button click is a replay (401), or None.

        The token is static, so it proves the sender but not that the request is new. Each invocation carries a
        fresh ``trigger_id``: base64 of ``<id>:<user id>:<epoch ms>:<server signature>`` (mattermost/server,
        model/integration_action.go ``GenerateTriggerId``). A command whose trigger was made more than
        ``max_request_age_s`` from now, made for another user than the one the form names, or seen before is
        refused; without a readable trigger the body itself is the key (an identical copy within the window is
        a replay).
        """
        now = self.clock()
        raw_trigger, sender = form.get("trigger_id"), form.get("user_id")
        trigger = parse_trigger_id(raw_trigger if isinstance(raw_trigger, str) else "")
        if trigger is not None:
            client_id, user_id, made_ms = trigger
            if is_stale(made_ms / 1000.0, now, self.settings.max_request_age_s):
                return "stale trigger_id"
            if sender and user_id != sender:
                return "trigger_id made for another user"
            key = "t:" + client_id
        else:
            key = "b:" + hashlib.sha256(body).hexdigest()
        if not self.seen.first_seen(key, now):
            return "replayed request"
        return None

    def _not_configured(self) -> Response | None:
        if self.token is None or self.answers is None or self.signer is None:
            return JSONResponse({"error": "Mattermost is not configured (DIAGNOSE_MATTERMOST_TOKEN)"},
                                status_code=503)
        return None

    def _reject(self, reason: str, status: int = 401) -> Response:
        log.warning("mattermost_request_rejected", reason=reason, status=status)
        return JSONResponse({"error": reason}, status_code=status)

    def _message(self, answer: Answer, action_url: str, channel_id: str,
                 response_type: str = "in_channel") -> dict[str, Any]:
        assert self.answers is not None and self.signer is not None
        doc = to_doc(answer)
        if isinstance(answer, IncidentAnswer) and answer.state == "diagnosed":
            doc = with_feedback(doc, self.answers.cause_ids())
        if isinstance(answer, HelpAnswer) or (isinstance(answer, NoticeAnswer) and not answer.ok):
            response_type = "ephemeral"
        return mattermost_message(doc, action_url, self.signer.signer(channel_id), response_type)

    # -------------------------------------------------------------- slash command

    async def command(self, request: Request, background: BackgroundTasks) -> Response:
        if (resp := self._not_configured()) is not None:
            return resp
        assert self.token is not None and self.answers is not None
        try:
            body = await read_capped(request, self.settings.max_body_bytes)
        except TooLarge:
            return self._reject("body too large", 413)
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        header = request.headers.get("authorization", "")
        offered = form.get("token") or (header[6:].strip() if header.startswith("Token ") else "")
        if not offered or not hmac.compare_digest(offered.encode(), self.token.encode()):
            return self._reject("bad token")
        replay = self._replayed(form, body)
        if replay is not None:
            return self._reject(replay)
        channel = form.get("channel_id", "")
        asker = Asker(user=form.get("user_name") or form.get("user_id") or "someone", platform="mattermost")
        action_url = str(request.url_for("mattermost_actions"))
        answers = self.answers
        answer = await run_in_threadpool(lambda: answers.answer(answers.parse(form.get("text", "")), asker))
        if isinstance(answer, QueuedAnswer):
            url = form.get("response_url", "")
            if url.startswith(("http://", "https://")):
                # after the reply is sent; the wait runs in our own pool, not in the server's shared one
                background.add_task(self.waiters.submit, self._later, answer.incident.id, url, action_url, channel)
        return JSONResponse(self._message(answer, action_url, channel))

    def _later(self, incident_id: int, response_url: str, action_url: str, channel: str) -> None:
        """Wait for the worker and POST the result to the command's ``response_url``."""
        assert self.answers is not None
        try:
            final = self.answers.wait(incident_id, self.wait_s, self.poll_s)
            r = httpx.post(response_url, json=self._message(final, action_url, channel), timeout=10.0)
            log.info("mattermost_delayed_reply", incident=incident_id, status=r.status_code)
        except Exception as exc:  # noqa: BLE001 - a thread pool would swallow it silently
            log.error("mattermost_delayed_reply_failed", incident=incident_id, error=type(exc).__name__)

    # -------------------------------------------------------------- buttons

    async def actions(self, request: Request) -> Response:
        if (resp := self._not_configured()) is not None:
            return resp
        assert self.answers is not None and self.signer is not None
        try:
            body = await read_capped(request, self.settings.max_body_bytes)
        except TooLarge:
            return self._reject("body too large", 413)
        try:
            payload = loads(body)
        except Undecodable as exc:
            return self._reject(str(exc), 422)
        if not isinstance(payload, dict):
            return self._reject("body is not an object", 422)
        channel = str(payload.get("channel_id") or "")
        raw_ctx = payload.get("context")
        ctx = self.signer.verify(raw_ctx, channel)
        if ctx is None:
            return self._reject("unsigned, altered or expired button")
        # a click carries its own trigger_id (Mattermost makes one per action request), so a copy is a replay
        replay = self._replayed(payload, body)
        if replay is not None:
            return self._reject(replay)
        asker = Asker(user=str(payload.get("user_name") or payload.get("user_id") or "someone"), platform="mattermost")
        action_url = str(request.url_for("mattermost_actions"))
        selected = raw_ctx.get("selected_option") if isinstance(raw_ctx, dict) else None
        result = await run_in_threadpool(self._act, ctx, selected, asker, action_url, channel)
        return JSONResponse(result)

    def _act(self, ctx: dict[str, Any], selected: Any, asker: Asker, action_url: str, channel: str) -> dict[str, Any]:
        assert self.answers is not None
        action, incident, cause = ctx.get("action"), ctx.get("incident"), ctx.get("cause")
        if not isinstance(incident, int):
            return {"ephemeral_text": "This button names no incident."}
        if action == "evidence" and isinstance(cause, str):
            msg = self._message(self.answers.incident(incident, expanded=frozenset({cause})), action_url, channel)
            props = {"attachments": msg["attachments"]} if "attachments" in msg else {}
            return {"update": {"message": msg["text"], "props": props}}
        if action == "playbook" and isinstance(cause, str):
            return {"ephemeral_text": markdown_text(to_doc(self.answers.playbook(cause)), 16_000)}
        if action in ("right", "wrong", "itwas"):
            actual = str(selected) if action == "itwas" and selected else None
            note = self.answers.feedback(incident, "right" if action == "right" else "wrong", actual, asker)
            return {"ephemeral_text": note.text}
        return {"ephemeral_text": f"Unknown action {action!r}."}
