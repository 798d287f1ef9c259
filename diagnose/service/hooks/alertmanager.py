"""Prometheus Alertmanager webhook (payload version 4) -> one IncidentDraft per alert.

Payload format: https://prometheus.io/docs/alerting/latest/configuration/#webhook_config ::

    {"version": "4", "groupKey": ..., "truncatedAlerts": <int>, "status": "<resolved|firing>", "receiver": ...,
     "groupLabels": {...}, "commonLabels": {...}, "commonAnnotations": {...}, "externalURL": ...,
     "alerts": [{"status": "<resolved|firing>", "labels": {...}, "annotations": {...}, "startsAt": "<rfc3339>",
                 "endsAt": "<rfc3339>", "generatorURL": ..., "fingerprint": ...}, ...]}

One draft per alert, because each alert is one (host, device, port) and the store groups alerts that share a fabric
element itself. ``external_id`` is the alert's fingerprint (Alertmanager's hash of its label set), or the same kind
of stable hash of the sorted labels when a sender omits it. Hosts come from the ``node``/``host``/``hostname``/
``instance``/``exported_instance`` labels, the device and port from node_exporter's infiniband collector labels
(``device="mlx5_0"``, ``port="1"``, https://github.com/prometheus/node_exporter, collector/infiniband_linux.go),
the job from ``job_id``/``slurm_job_id``/``jobid``. ``endsAt`` of ``0001-01-01T00:00:00Z`` (Go's zero time: the
alert has no end yet) becomes None.

When Alertmanager cut the group (``max_alerts``), ``truncatedAlerts`` > 0: every draft then carries the label
``truncated_alerts`` and a line in its text, so nobody reads the alerts received as the whole storm.
"""

from __future__ import annotations

from typing import Any

import structlog

from diagnose.service.hooks._extract import (
    PayloadError,
    clip,
    extract_labels,
    extract_text,
    join_text,
    optional_str,
    parse_time,
    require_mapping,
    stable_hash,
    str_labels,
)
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.hooks.alertmanager")

_STATES = ("firing", "resolved")


def normalize(payload: Any, settings: Settings) -> list[IncidentDraft]:
    """The drafts for one Alertmanager notification; PayloadError for anything but a version 4 webhook."""
    body = require_mapping(payload, "payload")
    version = body.get("version")
    if version != "4":
        raise PayloadError(f"not an Alertmanager webhook of version \"4\" (version={version!r}); "
                           "point an Alertmanager webhook_config at this URL")
    alerts = body.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("alerts: expected a list")
    truncated = body.get("truncatedAlerts", 0) or 0
    if isinstance(truncated, bool) or not isinstance(truncated, int) or truncated < 0:
        raise PayloadError("truncatedAlerts: expected a non-negative integer")
    group_status = body.get("status")
    drafts = [_draft(alert, i, group_status, truncated, len(alerts)) for i, alert in enumerate(alerts)]
    if truncated:
        log.warning("alertmanager_truncated", group_key=str(body.get("groupKey", ""))[:200], received=len(alerts),
                    truncated=truncated)
    log.info("alertmanager_normalized", receiver=str(body.get("receiver", ""))[:100], alerts=len(drafts))
    return drafts


def _draft(alert: Any, i: int, group_status: Any, truncated: int, received: int) -> IncidentDraft:
    where = f"alerts[{i}]"
    a = require_mapping(alert, where)
    labels = str_labels(a.get("labels"), f"{where}.labels")
    if not labels:
        raise PayloadError(f"{where}.labels: an alert without labels cannot be identified")
    annotations = str_labels(a.get("annotations"), f"{where}.annotations")
    state = a.get("status") or group_status
    if state not in _STATES:
        raise PayloadError(f"{where}.status: expected 'firing' or 'resolved', got {state!r}")
    fingerprint = optional_str(a.get("fingerprint"), f"{where}.fingerprint").strip()
    external_id = fingerprint or stable_hash(sorted(labels.items()))  # before any label of ours is added
    alertname = labels.get("alertname", "").strip()
    summary = annotations.get("summary", "").strip()
    description = annotations.get("description", "").strip() or annotations.get("message", "").strip()

    from_labels = extract_labels(labels, f"{where}.labels")
    if annotations.get("bundle"):
        from_labels = from_labels.merge(extract_labels({"bundle": annotations["bundle"]}, f"{where}.annotations"))
    found = from_labels.merge(extract_text(join_text(summary, description)))

    note = ""
    if truncated:
        note = (f"Note: Alertmanager truncated this notification (max_alerts): {truncated} more alert(s) of the "
                f"group were not sent; only {received} arrived.")
        labels = {**labels, "truncated_alerts": str(truncated)}
    title = alertname or "Alertmanager alert"
    if summary:
        title = f"{title}: {summary}"
    elif found.hosts:
        title = f"{title} on {found.hosts[0]}"
    return IncidentDraft(
        source="alertmanager",
        external_id=external_id,
        title=clip(title, 300),
        text=clip(join_text(alertname, summary, description, note, found.note())),
        hosts=found.hosts,
        devices=found.devices,
        ports=found.ports,
        job_id=found.job_id,
        starts_at=parse_time(a.get("startsAt"), f"{where}.startsAt"),
        ends_at=parse_time(a.get("endsAt"), f"{where}.endsAt"),
        labels=labels,
        state=state,
        bundle_refs=found.bundle_refs,
    )
