"""The chat bot: ask about incidents from Slack, Microsoft Teams or Mattermost.

:func:`build_router` returns the FastAPI router the service mounts:

- ``POST /slack/events``: slash command ``/diagnose``, ``app_mention``/DM events and button clicks;
- ``POST /teams/messages``: a Teams outgoing webhook;
- ``POST /mattermost/command`` and ``POST /mattermost/actions``: a Mattermost slash command and its buttons.

A platform whose secret is not configured answers 503 "not configured" and never runs a command
unauthenticated.
"""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request
from starlette.responses import Response

from diagnose.chat.answers import Answers
from diagnose.chat.mattermost import MattermostEndpoint
from diagnose.chat.slack import SlackEndpoint, slack_configured
from diagnose.chat.teams import TeamsEndpoint
from diagnose.service.models import Store
from diagnose.service.settings import Settings

__all__ = ["build_router"]


def build_router(settings: Settings, store: Store, *, wait_s: float = 120.0, poll_s: float = 1.0,
                 teams_reply_within_s: float = 4.0, answers: Answers | None = None) -> APIRouter:
    """The chat routes over ``store``.

    ``wait_s``/``poll_s``: how long a ``job``/``host`` question waits for the worker before giving up on a late
    reply (Slack ``response_url`` stays valid 30 minutes, Mattermost's as long), and how often it polls.
    ``teams_reply_within_s``: Teams drops replies after 5 s, so its wait is cut to this.
    """
    answers = answers or Answers(store)
    slack = SlackEndpoint(settings, answers if slack_configured(settings) else None, wait_s=wait_s, poll_s=poll_s)
    teams = TeamsEndpoint(settings, answers, reply_within_s=teams_reply_within_s, poll_s=min(poll_s, 0.5))
    mattermost = MattermostEndpoint(settings, answers, wait_s=wait_s, poll_s=poll_s)
    router = APIRouter(tags=["chat"])

    @router.post("/slack/events", name="slack_events")
    async def slack_events(request: Request) -> Response:
        return await slack(request)

    @router.post("/teams/messages", name="teams_messages")
    async def teams_messages(request: Request) -> Response:
        return await teams(request)

    @router.post("/mattermost/command", name="mattermost_command")
    async def mattermost_command(request: Request, background: BackgroundTasks) -> Response:
        return await mattermost.command(request, background)

    @router.post("/mattermost/actions", name="mattermost_actions")
    async def mattermost_actions(request: Request) -> Response:
        return await mattermost.actions(request)

    return router
