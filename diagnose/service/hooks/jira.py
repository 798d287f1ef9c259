"""Jira Cloud webhook (``jira:issue_created`` / ``jira:issue_updated``) -> one IncidentDraft per issue.

Payload format: https://developer.atlassian.com/cloud/jira/platform/webhooks/ ("Example callback for an issue-related
event": ``timestamp``, ``webhookEvent``, ``user``, ``issue`` {``id``, ``self``, ``key``, ``fields`` {``summary``,
``description``, ``labels``, ``priority``, ...}}, ``changelog``, ``comment``). The issue fields are those of the REST
issue representation, so ``fields.attachment[]`` carries ``content`` download URLs
(https://developer.atlassian.com/cloud/jira/platform/rest/v2/api-group-issue-attachments/). ``description`` is a
wiki-markup string in the v2 representation and an Atlassian Document Format tree in v3
(https://developer.atlassian.com/cloud/jira/platform/apis/document/structure/); both are read, ADF by flattening its
text nodes.

``external_id`` and ``reply_to["jira_issue"]`` are the issue key, the id a person types and the one the comment API
takes. The key goes into the post-back URL, so it must look like a Jira key (``PROJ-123``). Attachment URLs become
``bundle_refs``. Other webhook events (comments, worklogs, sprints, ``jira:issue_deleted``) are accepted and ignored.
"""

from __future__ import annotations

import re
from typing import Any

import structlog

from diagnose.service.hooks._extract import (
    PayloadError,
    check_bundle_ref,
    clip,
    extract_text,
    join_text,
    key_value_tags,
    parse_time,
    require_mapping,
    require_str,
)
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.hooks.jira")

HANDLED_EVENTS = ("jira:issue_created", "jira:issue_updated")
_ISSUE_KEY = re.compile(r"^[A-Z][A-Z0-9_]{0,254}-[1-9]\d*$")
_ADF_BLOCKS = {"paragraph", "heading", "blockquote", "codeBlock", "listItem", "tableRow", "panel", "rule",
               "mediaSingle", "expand", "nestedExpand", "taskItem", "decisionItem"}
_MAX_ADF_DEPTH = 64


def adf_to_text(node: Any, _depth: int = 0) -> str:
    """Plain text of an Atlassian Document Format tree: text nodes in order, one line per block,
    ``hardBreak`` as a newline, mentions/emoji/status/dates by their text, links and cards by their URL."""
    if _depth > _MAX_ADF_DEPTH:
        raise PayloadError("fields.description: Atlassian Document Format nested too deeply")
    if isinstance(node, list):
        return "".join(adf_to_text(n, _depth + 1) for n in node)
    if not isinstance(node, dict):
        return ""
    kind = node.get("type") if isinstance(node.get("type"), str) else ""
    raw_attrs = node.get("attrs")
    attrs: dict[Any, Any] = raw_attrs if isinstance(raw_attrs, dict) else {}
    if kind == "text":
        return str(node.get("text", ""))
    if kind == "hardBreak":
        return "\n"
    if kind in ("mention", "emoji", "status"):
        return str(attrs.get("text") or attrs.get("shortName") or "")
    if kind == "date":
        return str(attrs.get("timestamp", ""))
    if kind in ("inlineCard", "blockCard", "embedCard"):
        return str(attrs.get("url", ""))
    inner = adf_to_text(node.get("content", []), _depth + 1)
    return inner.rstrip("\n") + "\n" if kind in _ADF_BLOCKS else inner  # lists, tables, doc: their blocks break


def _description(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, dict) and value.get("type") == "doc":
        return "\n".join(line.rstrip() for line in adf_to_text(value).splitlines()).strip()
    raise PayloadError("issue.fields.description: expected a string or an Atlassian Document Format document")


def _name(value: Any) -> str:
    """``fields.priority`` and friends: an object with ``name`` (REST) or a plain string (the doc example)."""
    if isinstance(value, dict):
        return str(value.get("name") or value.get("key") or "")
    return value if isinstance(value, str) else ""


def normalize(payload: Any, settings: Settings) -> list[IncidentDraft]:
    """The draft for an issue created or updated; ``[]`` for the other Jira webhook events."""
    body = require_mapping(payload, "payload")
    event = require_str(body.get("webhookEvent"), "webhookEvent")
    if event not in HANDLED_EVENTS:
        log.info("jira_event_ignored", webhook_event=event[:80])
        return []
    issue = require_mapping(body.get("issue"), "issue")
    key = require_str(issue.get("key"), "issue.key")
    if not _ISSUE_KEY.match(key):
        raise PayloadError(f"issue.key: {key[:40]!r} is not a Jira issue key (PROJ-123)")
    fields = require_mapping(issue.get("fields"), "issue.fields")
    summary = require_str(fields.get("summary"), "issue.fields.summary")
    description = _description(fields.get("description"))

    tags = fields.get("labels") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise PayloadError("issue.fields.labels: expected a list of strings")
    attachments = fields.get("attachment") or []
    if not isinstance(attachments, list):
        raise PayloadError("issue.fields.attachment: expected a list")
    refs: list[str] = []
    for i, att in enumerate(attachments):
        att = require_mapping(att, f"issue.fields.attachment[{i}]")
        if att.get("content"):
            refs.append(check_bundle_ref(att["content"], f"issue.fields.attachment[{i}].content", allow_url=True))

    found = extract_text(join_text(summary, description, " ".join(tags)))
    status = fields.get("status")
    category = status.get("statusCategory") if isinstance(status, dict) else None
    done = isinstance(category, dict) and category.get("key") == "done"
    project = fields.get("project")
    project_key = project.get("key") if isinstance(project, dict) else None
    labels = {
        **key_value_tags(tags),
        "jira_event": event,
        "jira_project": project_key if isinstance(project_key, str) and project_key else key.rsplit("-", 1)[0],
        "jira_issue_type": _name(fields.get("issuetype")),
        "jira_priority": _name(fields.get("priority")),
        "jira_status": _name(status),
        "jira_labels": ",".join(tags),
    }
    draft = IncidentDraft(
        source="jira",
        external_id=key,
        title=clip(summary, 300),
        text=clip(join_text(summary, description, found.note())),
        hosts=found.hosts,
        devices=found.devices,
        ports=found.ports,
        job_id=found.job_id,
        starts_at=parse_time(fields.get("created"), "issue.fields.created"),
        labels={k: v for k, v in labels.items() if v},
        state="closed" if done else "open",
        bundle_refs=[*refs, *(r for r in found.bundle_refs if r not in refs)],
        reply_to={"jira_issue": key},
    )
    log.info("jira_normalized", webhook_event=event, issue=key, hosts=len(draft.hosts), attachments=len(refs))
    return [draft]

