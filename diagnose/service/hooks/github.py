"""GitHub ``issues`` webhook event -> one IncidentDraft per issue; ``ping`` -> no-op.

Payload format: https://docs.github.com/en/webhooks/webhook-events-and-payloads#issues (``action``, ``issue`` with
``number``, ``title``, ``body``, ``labels[].name``, ``html_url``, ``created_at``; ``repository.full_name``; examples in
github.com/octokit/webhooks, payload-examples/api.github.com/issues/). The ``ping`` event GitHub sends when a webhook
is created (https://docs.github.com/en/webhooks/webhook-events-and-payloads#ping: ``zen``, ``hook_id``, ``hook``)
is accepted and ignored (``[]``), so the webhook's first delivery shows as successful.

The normalizer sees the JSON body only, not the ``X-GitHub-Event`` header (the signature check requires that header),
so it tells events apart by their documented shape: ``zen`` + ``hook_id`` is a ping; ``issue`` + ``comment`` is
``issue_comment`` (ignored); ``issue`` + ``action`` is ``issues``. Anything else is a PayloadError that tells the
operator to subscribe the webhook to "Issues" only.

Actions ``opened``, ``edited``, ``labeled`` and ``reopened`` give an open draft, ``closed`` a closed one; the other
issue actions (``assigned``, ``milestoned``, ``pinned``, ...) change nothing a diagnosis reads and are ignored.
"""

from __future__ import annotations

import re
from typing import Any

import structlog

from diagnose.service.hooks._extract import (
    PayloadError,
    clip,
    extract_text,
    join_text,
    key_value_tags,
    optional_str,
    parse_time,
    require_mapping,
    require_str,
)
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.hooks.github")

OPEN_ACTIONS = ("opened", "edited", "labeled", "reopened")
CLOSE_ACTIONS = ("closed",)
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def is_ping(body: Any) -> bool:
    """True for the documented ``ping`` payload."""
    return isinstance(body, dict) and "zen" in body and "hook_id" in body


def normalize(payload: Any, settings: Settings) -> list[IncidentDraft]:
    """The draft for an issue opened/edited/labeled/reopened/closed; ``[]`` for ping and ignored actions."""
    body = require_mapping(payload, "payload")
    if is_ping(body):
        log.info("github_ping", hook_id=str(body.get("hook_id"))[:20])
        return []
    if "issue" not in body or "action" not in body:
        raise PayloadError("not a GitHub issues event: subscribe this webhook to the \"Issues\" event only")
    if "comment" in body:
        log.info("github_event_ignored", github_event="issue_comment")
        return []
    action = require_str(body.get("action"), "action")
    if action not in OPEN_ACTIONS + CLOSE_ACTIONS:
        log.info("github_event_ignored", github_event="issues", action=action[:40])
        return []
    issue = require_mapping(body.get("issue"), "issue")
    repo = require_str(require_mapping(body.get("repository"), "repository").get("full_name"),
                       "repository.full_name")
    if not _REPO.match(repo):
        raise PayloadError("repository.full_name: not an owner/name")
    number = issue.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise PayloadError("issue.number: expected a positive integer")
    title = require_str(issue.get("title"), "issue.title")
    text = optional_str(issue.get("body"), "issue.body")
    raw_labels = issue.get("labels") or []
    if not isinstance(raw_labels, list):
        raise PayloadError("issue.labels: expected a list")
    names = [lab["name"] for lab in raw_labels if isinstance(lab, dict) and isinstance(lab.get("name"), str)]

    ref = f"{repo}#{number}"
    found = extract_text(join_text(title, text, " ".join(names)))
    labels = {
        **key_value_tags(names),
        "github_repo": repo,
        "github_action": action,
        "github_labels": ",".join(names),
        "github_url": optional_str(issue.get("html_url"), "issue.html_url"),
    }
    draft = IncidentDraft(
        source="github",
        external_id=ref,
        title=clip(title, 300),
        text=clip(join_text(title, text, found.note())),
        hosts=found.hosts,
        devices=found.devices,
        ports=found.ports,
        job_id=found.job_id,
        starts_at=parse_time(issue.get("created_at"), "issue.created_at"),
        ends_at=parse_time(issue.get("closed_at"), "issue.closed_at") if action in CLOSE_ACTIONS else None,
        labels={k: v for k, v in labels.items() if v},
        state="closed" if action in CLOSE_ACTIONS else "open",
        bundle_refs=found.bundle_refs,
        reply_to={"github_issue": ref},
    )
    log.info("github_normalized", action=action, issue=ref, hosts=len(draft.hosts))
    return [draft]
