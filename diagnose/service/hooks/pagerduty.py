"""PagerDuty v3 webhook -> one IncidentDraft per incident event.

Payload format (https://developer.pagerduty.com/docs/webhooks-overview; source: github.com/PagerDuty/developer-docs,
docs/webhooks/01-Overview.md): one ``event`` per delivery with ``id``, ``event_type`` (``incident.triggered``,
``incident.acknowledged``, ``incident.resolved``, ...), ``resource_type``, ``occurred_at``, ``agent``, ``client`` and
``data``; for incident events ``data`` is the incident (``type: "incident"``, ``id``, ``title``, ``html_url``,
``status``, ``service``, ``priority``, ``urgency``, ``created_at`` and, on newer payloads, ``body.details``).

Every incident event of an incident gives the same ``external_id`` (the incident id), so the store sees updates of
one incident, not new ones. Other documented events (``incident.annotated`` whose data is a note,
``incident.responder.*``, ``incident.status_update_published``, ``service.*``) are accepted and ignored (``[]``):
answering them with a 4xx would make PagerDuty drop them and, after 3 consecutive drops, disable the whole
subscription (docs/webhooks/02-Behavior.md, "Temporary Disablement"). A body that is not a v3 event is a
PayloadError.
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
    optional_str,
    parse_time,
    require_mapping,
    require_str,
)
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.hooks.pagerduty")

_INCIDENT_ID = re.compile(r"^[A-Za-z0-9]{1,64}$")


def _details(body: Any) -> str:
    """``data.body`` as text: a string, or ``{"type": "incident_body", "details": <str | object>}``."""
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        details = body.get("details")
        if isinstance(details, str):
            return details
        if isinstance(details, dict):
            return "\n".join(f"{k}: {v}" for k, v in details.items() if isinstance(v, (str, int, float)))
    return ""


def _summary(ref: Any) -> str:
    return ref.get("summary", "") if isinstance(ref, dict) and isinstance(ref.get("summary"), str) else ""


def normalize(payload: Any, settings: Settings) -> list[IncidentDraft]:
    """The draft for one v3 incident event; ``[]`` for documented events that are not about an incident."""
    body = require_mapping(payload, "payload")
    event = require_mapping(body.get("event"), "event")
    event_type = require_str(event.get("event_type"), "event.event_type")
    data = require_mapping(event.get("data"), "event.data")
    if not event_type.startswith("incident.") or data.get("type") != "incident":
        log.info("pagerduty_event_ignored", event_type=event_type[:80], data_type=str(data.get("type"))[:40])
        return []
    incident_id = require_str(data.get("id"), "event.data.id")
    if not _INCIDENT_ID.match(incident_id):
        raise PayloadError("event.data.id: not a PagerDuty incident id")
    title = require_str(data.get("title") or data.get("summary"), "event.data.title")
    # every v3 event carries it, and the signature check's freshness test reads it: an event without it is refused
    occurred_at = parse_time(require_str(event.get("occurred_at"), "event.occurred_at"), "event.occurred_at")
    if occurred_at is None:
        raise PayloadError("event.occurred_at: missing")
    status = optional_str(data.get("status"), "event.data.status")
    resolved = event_type == "incident.resolved" or status == "resolved"
    details = _details(data.get("body"))
    found = extract_text(join_text(title, details))

    labels = {
        "pagerduty_event_type": event_type,
        "pagerduty_status": status,
        "pagerduty_service": _summary(data.get("service")),
        "pagerduty_priority": _summary(data.get("priority")),
        "pagerduty_urgency": optional_str(data.get("urgency"), "event.data.urgency"),
        "pagerduty_url": optional_str(data.get("html_url"), "event.data.html_url"),
    }
    draft = IncidentDraft(
        source="pagerduty",
        external_id=incident_id,
        title=clip(title, 300),
        text=clip(join_text(title, details, found.note())),
        hosts=found.hosts,
        devices=found.devices,
        ports=found.ports,
        job_id=found.job_id,
        starts_at=parse_time(data.get("created_at"), "event.data.created_at"),
        ends_at=occurred_at if resolved else None,
        labels={k: v for k, v in labels.items() if v},
        state="resolved" if resolved else "open",
        bundle_refs=found.bundle_refs,
        reply_to={"pagerduty_incident": incident_id},
    )
    log.info("pagerduty_normalized", event_type=event_type, incident=incident_id, hosts=len(draft.hosts))
    return [draft]
