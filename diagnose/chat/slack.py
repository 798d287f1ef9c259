"""The Slack bot: a slack-bolt ``App`` in HTTP mode behind ``POST /slack/events``.

One Request URL serves slash commands, the Events API and interactivity, as Slack allows
(https://api.slack.com/interactivity/handling#setup). Before bolt sees a request the route

1. rejects a stale ``X-Slack-Request-Timestamp`` (older or newer than ``settings.max_request_age_s``),
2. verifies ``X-Slack-Signature``: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{raw body}`` keyed with the
   signing secret (https://api.slack.com/authentication/verifying-requests-from-slack),
3. rejects a (timestamp, signature) pair it already accepted (:mod:`diagnose.chat.replay`),

each with 401 before anything runs. Bolt then verifies the signature again with its own middleware, which
answers 401 itself; the route passes bolt's status through unchanged. Events Slack re-delivers
(https://api.slack.com/apis/connections/events-api#retries) are answered 200 once their ``event_id`` was seen.

- ``/diagnose <text>`` (https://api.slack.com/interactivity/slash-commands): acknowledged at once with the
  answer when it is ready; ``job``/``host`` are acknowledged with "queued as incident N" and the ranked causes
  follow through ``response_url`` when the worker is done.
- ``app_mention`` (https://api.slack.com/events/app_mention) and direct ``message.im`` events: answered in
  the thread with ``chat.postMessage`` (https://api.slack.com/methods/chat.postMessage).
- ``block_actions`` (https://api.slack.com/reference/interaction-payloads/block-actions): "Show evidence"
  replaces the message with the cause expanded; "Playbook" posts the playbook; "Right cause", "Wrong cause"
  and the "Wrong, it was…" ``static_select`` store a :class:`~diagnose.service.models.FeedbackRecord`.

Socket Mode (:func:`start_socket_mode`) is offered for hosts Slack cannot reach; it is not exercised by the
tests, which have no Slack to connect to.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import structlog
from fastapi import Request
from slack_bolt import App, BoltResponse
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_sdk import WebClient
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
from diagnose.chat.render import A_ITWAS, A_PLAYBOOK, A_RIGHT, A_SHOW, A_WRONG, slack_message, to_doc, with_feedback
from diagnose.chat.replay import ReplayGuard, is_stale
from diagnose.service.bodies import TooLarge, Undecodable, loads, read_capped
from diagnose.service.models import Store
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.chat.slack")

SLASH_COMMAND = "/diagnose"


def slack_configured(settings: Settings) -> bool:
    """Slack needs the signing secret (to trust requests) and the bot token (to post and to run auth.test)."""
    return bool(settings.slack_signing_secret and settings.slack_signing_secret.get_secret_value()
                and settings.slack_bot_token and settings.slack_bot_token.get_secret_value())


def _api_base(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _user(body: dict[str, Any]) -> str:
    u = body.get("user") or {}
    if isinstance(u, dict):
        return str(u.get("username") or u.get("name") or u.get("id") or "someone")
    return str(u or body.get("user_name") or body.get("user_id") or "someone")


def _json_value(raw: str) -> dict[str, Any]:
    try:
        v = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return {}
    return v if isinstance(v, dict) else {}


def undecodable_slack_body(body: bytes, content_type: str) -> str | None:
    """Why a signed Slack body cannot be read (422 before bolt parses it), or None.

    Slack sends JSON (Events API) or a form (slash commands; interactivity with its JSON in ``payload``,
    https://api.slack.com/interactivity/handling#payloads): each must be UTF-8, and the JSON must decode (not
    nested past the interpreter's limit, no integer too long to convert).
    """
    from urllib.parse import parse_qs

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "body is not UTF-8"
    try:
        if content_type.startswith("application/json"):
            loads(text)
        else:
            payload = parse_qs(text, keep_blank_values=True).get("payload")
            if payload:
                loads(payload[0])
    except Undecodable as exc:
        return str(exc)
    return None


class SlackBot:
    """The bolt app and its listeners, bound to one :class:`Answers`."""

    def __init__(self, settings: Settings, answers: Answers, *, wait_s: float = 120.0, poll_s: float = 1.0,
                 socket_mode: bool = False) -> None:
        if settings.slack_bot_token is None:
            raise ValueError("the Slack bot needs SLACK_BOT_TOKEN")
        if settings.slack_signing_secret is None and not socket_mode:
            raise ValueError("the Slack bot over HTTP needs SLACK_SIGNING_SECRET")
        self.answers = answers
        self.wait_s = wait_s
        self.poll_s = poll_s
        client = WebClient(token=settings.slack_bot_token.get_secret_value(), base_url=_api_base(settings.slack_api_url))
        # token_verification_enabled=False: no auth.test at start-up (the service must start without Slack);
        # bolt calls auth.test lazily on the first request that needs the bot identity.
        # Socket Mode requests come over the app-token WebSocket and carry no HTTP signature to verify.
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else ""
        self.app = App(signing_secret=secret, client=client, request_verification_enabled=not socket_mode,
                       token_verification_enabled=False, process_before_response=False,
                       logger=logging.getLogger("diagnose.service.chat.slack.bolt"))
        # waiting for the worker happens here, not in bolt's listener pool (10 threads), so a few slow
        # `job` questions never delay the 3-second acknowledgement of the next command
        self.waiters = DaemonPool(16, "diagnose-slack-wait")
        self._register()

    # -------------------------------------------------------------- rendering

    def message(self, answer: Answer) -> dict[str, Any]:
        doc = to_doc(answer)
        if isinstance(answer, IncidentAnswer) and answer.state == "diagnosed":
            doc = with_feedback(doc, self.answers.cause_ids())
        return slack_message(doc)

    @staticmethod
    def _visibility(answer: Answer) -> str:
        """Usage errors go to the asker only; answers go to the channel, where the incident is worked on."""
        if isinstance(answer, HelpAnswer) or (isinstance(answer, NoticeAnswer) and not answer.ok):
            return "ephemeral"
        return "in_channel"

    # -------------------------------------------------------------- listeners

    def _register(self) -> None:
        app = self.app
        app.command(SLASH_COMMAND)(self.on_command)
        app.event("app_mention")(self.on_mention)
        app.event("message")(self.on_message)
        app.action(A_SHOW)(self.on_show_evidence)
        app.action(A_PLAYBOOK)(self.on_playbook)
        app.action(A_RIGHT)(self.on_right)
        app.action(A_WRONG)(self.on_wrong)
        app.action(A_ITWAS)(self.on_it_was)
        app.error(self.on_error)

    def on_error(self, error: Exception, body: dict[str, Any]) -> None:
        log.error("slack_listener_failed", error=repr(error), type=body.get("type"))

    def on_command(self, ack: Callable[..., None], command: dict[str, Any], respond: Callable[..., Any]) -> None:
        asker = Asker(user=str(command.get("user_name") or command.get("user_id") or "someone"), platform="slack")
        answer = self.answers.answer(self.answers.parse(str(command.get("text") or "")), asker)
        ack(response_type=self._visibility(answer), **self.message(answer))
        if isinstance(answer, QueuedAnswer):
            self.waiters.submit(self._answer_later, answer.incident.id,
                                lambda msg: respond(response_type="in_channel", replace_original=False, **msg))

    def _answer_later(self, incident_id: int, send: Callable[[dict[str, Any]], Any]) -> None:
        """Wait for the worker, then send the ranked causes (or the state reached by the deadline)."""
        try:
            send(self.message(self.answers.wait(incident_id, self.wait_s, self.poll_s)))
        except Exception as exc:  # noqa: BLE001 - a thread pool would swallow it silently
            log.error("slack_late_answer_failed", incident=incident_id, error=f"{exc.__class__.__name__}: {exc}")

    def _converse(self, client: WebClient, event: dict[str, Any]) -> None:
        channel = event.get("channel")
        if not channel:
            return
        thread = event.get("thread_ts") or event.get("ts")
        asker = Asker(user=str(event.get("user") or "someone"), platform="slack")
        answer = self.answers.answer(self.answers.parse(str(event.get("text") or "")), asker)
        client.chat_postMessage(channel=channel, thread_ts=thread, **self.message(answer))
        if isinstance(answer, QueuedAnswer):
            self.waiters.submit(self._answer_later, answer.incident.id,
                                lambda msg: client.chat_postMessage(channel=channel, thread_ts=thread, **msg))

    def on_mention(self, event: dict[str, Any], client: WebClient) -> None:
        self._converse(client, event)

    def on_message(self, event: dict[str, Any], client: WebClient) -> None:
        """Direct messages only: the bot does not read channel traffic it was not mentioned in."""
        if event.get("channel_type") != "im" or event.get("subtype") or event.get("bot_id"):
            return
        self._converse(client, event)

    def on_show_evidence(self, ack: Callable[..., None], action: dict[str, Any], respond: Callable[..., Any]) -> None:
        ack()
        v = _json_value(action.get("value", ""))
        if not isinstance(v.get("i"), int) or not v.get("c"):
            return
        answer = self.answers.incident(v["i"], expanded=frozenset({str(v["c"])}))
        respond(replace_original=True, **self.message(answer))

    def on_playbook(self, ack: Callable[..., None], action: dict[str, Any], respond: Callable[..., Any]) -> None:
        ack()
        v = _json_value(action.get("value", ""))
        if v.get("c"):
            respond(response_type="in_channel", replace_original=False, **self.message(self.answers.playbook(v["c"])))

    def _feedback(self, body: dict[str, Any], incident: Any, verdict: str, actual: str | None,
                  respond: Callable[..., Any]) -> None:
        if not isinstance(incident, int):
            return
        note = self.answers.feedback(incident, "right" if verdict == "right" else "wrong", actual,
                                     Asker(user=_user(body), platform="slack"))
        text = note.text
        if verdict == "wrong" and actual is None and note.ok:
            text += " If you know what it was, pick it under 'Wrong, it was…'."
        respond(response_type="ephemeral", replace_original=False, text=text)

    def on_right(self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any],
                 respond: Callable[..., Any]) -> None:
        ack()
        self._feedback(body, _json_value(action.get("value", "")).get("i"), "right", None, respond)

    def on_wrong(self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any],
                 respond: Callable[..., Any]) -> None:
        ack()
        self._feedback(body, _json_value(action.get("value", "")).get("i"), "wrong", None, respond)

    def on_it_was(self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any],
                  respond: Callable[..., Any]) -> None:
        ack()
        v = _json_value((action.get("selected_option") or {}).get("value", ""))
        self._feedback(body, v.get("i"), "wrong", v.get("a"), respond)


def verify_slack_signature(key: bytes, timestamp: str, body: bytes, signature: str) -> bool:
    """``X-Slack-Signature``: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``, on the raw bytes (a body
    that is not UTF-8 is simply unsigned, never an error), compared in constant time."""
    expected = "v0=" + hmac.new(key, b"v0:" + timestamp.encode("ascii", "replace") + b":" + body,
                                hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("utf-8", "replace"))


class SlackEndpoint:
    """``POST /slack/events``: freshness, signature and replay checks, then bolt."""

    def __init__(self, settings: Settings, answers: Answers | None, *, wait_s: float = 120.0, poll_s: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self.bot: SlackBot | None = None
        self.key: bytes | None = None
        if answers is not None and slack_configured(settings):
            assert settings.slack_signing_secret is not None
            self.bot = SlackBot(settings, answers, wait_s=wait_s, poll_s=poll_s)
            self.key = settings.slack_signing_secret.get_secret_value().encode("utf-8")
        window = max(float(settings.max_request_age_s), 300.0) * 2
        self.requests = ReplayGuard(window_s=window)
        self.events = ReplayGuard(window_s=3600.0)

    def _reject(self, reason: str, status: int = 401) -> Response:
        log.warning("slack_request_rejected", reason=reason, status=status)
        return JSONResponse({"error": reason}, status_code=status)

    async def __call__(self, request: Request) -> Response:
        if self.bot is None or self.key is None:
            return JSONResponse({"error": "Slack is not configured (SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN)"},
                                status_code=503)
        try:
            body = await read_capped(request, self.settings.max_body_bytes)
        except TooLarge:
            return self._reject("body too large", 413)
        ts = request.headers.get("x-slack-request-timestamp", "")
        sig = request.headers.get("x-slack-signature", "")
        if not ts or not sig:
            return self._reject("unsigned request")
        try:
            ts_epoch = int(ts)
        except ValueError:
            return self._reject("bad timestamp")
        now = self.clock()
        if is_stale(ts_epoch, now, self.settings.max_request_age_s):
            return self._reject("stale timestamp")
        if not verify_slack_signature(self.key, ts, body, sig):
            return self._reject("bad signature")
        if not self.requests.first_seen(f"{ts}:{sig}", now):
            return self._reject("replayed request")
        problem = undecodable_slack_body(body, request.headers.get("content-type", ""))
        if problem is not None:
            return self._reject(problem, 422)
        if request.headers.get("content-type", "").startswith("application/json"):
            payload = _json_value(body.decode("utf-8", "replace"))
            event_id = payload.get("event_id")
            if payload.get("type") == "event_callback" and isinstance(event_id, str) \
                    and not self.events.first_seen(event_id, now):
                log.info("slack_event_redelivered", event_id=event_id)
                return Response(status_code=200)
        bolt_resp: BoltResponse = await run_in_threadpool(self.bot.app.dispatch, to_bolt_request(request, body))
        if bolt_resp.status == 401:
            log.warning("slack_request_rejected", reason="bolt verification", status=401)
        return to_starlette_response(bolt_resp)


def start_socket_mode(settings: Settings, store: Store, *, wait_s: float = 120.0, poll_s: float = 1.0) -> Any:
    """Connect the bot over Socket Mode (https://api.slack.com/apis/connections/socket) and return the handler.

    For a service Slack cannot reach over HTTPS. Needs ``SLACK_APP_TOKEN`` (``xapp-...``, scope
    ``connections:write``) besides the bot token. Requests arrive over the WebSocket, so there is no HTTP
    signature to check; the app token is the credential. Not covered by tests (they have no Slack); call
    ``handler.close()`` to stop.
    """
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    if not (settings.slack_app_token and settings.slack_app_token.get_secret_value()):
        raise ValueError("Socket Mode needs SLACK_APP_TOKEN")
    if not (settings.slack_bot_token and settings.slack_bot_token.get_secret_value()):
        raise ValueError("Socket Mode needs SLACK_BOT_TOKEN")
    bot = SlackBot(settings, Answers(store), wait_s=wait_s, poll_s=poll_s, socket_mode=True)
    handler = SocketModeHandler(bot.app, settings.slack_app_token.get_secret_value())
    handler.connect()
    log.info("slack_socket_mode_connected")
    return handler
