"""Generic JSON (or form) hook: ``settings.generic_mapping`` says where each IncidentDraft field is in the payload.

For any system without a dedicated hook (ServiceNow, an in-house scheduler, a script). The mapping is
``{draft field: dotted path}``; a path walks objects by key and lists by index (``alerts.0.labels.host``). For a
ServiceNow-like Table API record (``{"result": {...}}``,
https://developer.servicenow.com/dev.do#!/reference/api/latest/rest/c_TableAPI)::

    DIAGNOSE_GENERIC_MAPPING='{"external_id": "result.sys_id", "title": "result.short_description",
                               "text": "result.description", "hosts": "result.cmdb_ci.display_value",
                               "job_id": "result.u_job_id", "starts_at": "result.opened_at"}'

With no mapping configured, every field is read from the top level under its own name (a payload shaped like an
IncidentDraft). ``external_id`` and ``title`` are required: a payload missing either is a PayloadError naming the
field and its path. ``hosts``/``devices``/``bundle_refs`` take a list or a string (Slurm host lists and commas are
expanded); ``labels`` takes an object (values become strings); times take RFC 3339 or epoch seconds, naive times
are UTC. Hosts, devices, ports and a job id named in ``title``/``text`` are added to the mapped ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from diagnose.service.hooks._extract import (
    PayloadError,
    check_bundle_ref,
    clip,
    expand_hosts,
    extract_text,
    get_path,
    join_text,
    optional_str,
    parse_time,
    require_mapping,
    require_str,
    str_labels,
)
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.hooks.generic")

FIELDS = ("external_id", "title", "text", "hosts", "devices", "job_id", "starts_at", "ends_at", "labels", "state",
          "bundle_refs")
"""Draft fields a mapping may name."""
REQUIRED = ("external_id", "title")
_STATES = ("firing", "resolved", "open", "closed")


def _string_list(value: Any, where: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    raise PayloadError(f"{where}: expected a string or a list of strings")


def normalize(payload: Any, settings: Settings) -> list[IncidentDraft]:
    """One draft from one payload, read through ``settings.generic_mapping``."""
    body = require_mapping(payload, "payload")
    mapping: Mapping[str, str] = settings.generic_mapping or {f: f for f in FIELDS}
    unknown = sorted(set(mapping) - set(FIELDS))
    if unknown:
        raise PayloadError(f"generic_mapping names unknown field(s) {', '.join(unknown)}; "
                           f"known: {', '.join(FIELDS)}")
    values: dict[str, Any] = {}
    for name, path in mapping.items():
        present, value = get_path(body, path)
        if present and value is not None and value != "":
            values[name] = value
    missing = [f"{f} (path {mapping[f]!r})" if f in mapping else f"{f} (not mapped)" for f in REQUIRED
               if f not in values]
    if missing:
        raise PayloadError(f"missing required field(s): {', '.join(missing)}")

    def where(f: str) -> str:
        return f"{f} ({mapping[f]})"

    external_id = require_str(values["external_id"], where("external_id"))
    title = require_str(values["title"], where("title"))
    text = optional_str(values.get("text"), where("text")) if "text" in values else ""
    hosts: list[str] = []
    for item in _string_list(values.get("hosts"), where("hosts") if "hosts" in values else "hosts"):
        hosts += expand_hosts(item, where("hosts"))
    devices = [d.strip() for item in _string_list(values.get("devices"), "devices") for d in item.split(",")]
    refs = [check_bundle_ref(r, where("bundle_refs")) for r in _string_list(values.get("bundle_refs"), "bundle_refs")]
    job = values.get("job_id")
    job_id = require_str(job, where("job_id")) if job is not None else None
    labels = str_labels(values.get("labels"), where("labels")) if "labels" in values else {}
    state = str(values.get("state", "open")).strip().lower()
    if state not in _STATES:
        labels.setdefault("source_state", state[:64])  # keep the source's own state visible, act as "open"
        state = "open"

    found = extract_text(join_text(title, text))
    draft = IncidentDraft(
        source="generic",
        external_id=external_id,
        title=clip(title, 300),
        text=clip(join_text(text, found.note())),
        hosts=list(dict.fromkeys([*hosts, *found.hosts])),
        devices=list(dict.fromkeys([*(d for d in devices if d), *found.devices])),
        ports=found.ports,
        job_id=job_id or found.job_id,
        starts_at=parse_time(values.get("starts_at"), where("starts_at")) if "starts_at" in values else None,
        ends_at=parse_time(values.get("ends_at"), where("ends_at")) if "ends_at" in values else None,
        labels=labels,
        state=state,  # type: ignore[arg-type]  # checked against _STATES above
        bundle_refs=list(dict.fromkeys([*refs, *found.bundle_refs])),
    )
    log.info("generic_normalized", external_id=external_id[:80], hosts=len(draft.hosts))
    return [draft]
