"""The service's shared data contract: what a hook turns a payload into, what the store keeps.

Every hook normalizer returns :class:`IncidentDraft` objects; the store persists them as
:class:`IncidentRecord`; the chat bot and ``diagnose incidents`` read them back. The diagnosis itself
is the CLI's JSON contract (:class:`diagnose.models.diagnosis.Diagnosis`), stored as JSON text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

Source = Literal["alertmanager", "pagerduty", "jira", "github", "generic", "chat", "cli"]
RequestStatus = Literal["pending", "processing", "done", "failed", "rejected", "duplicate"]
IncidentStatus = Literal["open", "diagnosing", "diagnosed", "waiting_for_evidence", "resolved", "failed"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PortRef(_Closed):
    """One port named by an alert or ticket; any part may be unknown."""

    host: str | None = None
    device: str | None = None
    port: int | None = None


class _IncidentCore(_Closed):
    """What an incident says, as a hook reads it from a payload and as the store keeps it."""

    source: Source
    external_id: str = Field(description="The source's own id or fingerprint; with source, the dedup key.")
    title: str
    text: str = Field(default="", description="Free text used as the symptom (alert summary, ticket body...).")
    hosts: list[str] = Field(default_factory=list)
    devices: list[str] = Field(default_factory=list)
    ports: list[PortRef] = Field(default_factory=list)
    job_id: str | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class IncidentDraft(_IncidentCore):
    """What one normalizer makes of one payload (or of one alert group inside it)."""

    state: Literal["firing", "resolved", "open", "closed"] = "open"
    bundle_refs: list[str] = Field(default_factory=list, description="Bundle paths or attachment URLs named in the payload.")
    reply_to: dict[str, str] = Field(default_factory=dict, description="Where to post the result back (e.g. jira issue key, pagerduty incident id, url).")


class IncidentRecord(_IncidentCore):
    """An incident as stored, with its processing state and (once done) its diagnosis JSON."""

    id: int
    status: IncidentStatus = "open"
    created_at: datetime
    updated_at: datetime
    diagnosis: dict[str, Any] | None = None
    error: str | None = None
    group_key: str | None = Field(default=None, description="Shared fabric element when alerts were grouped (e.g. a leaf switch).")
    alert_count: int = 1

    def top_cause(self) -> str | None:
        causes = (self.diagnosis or {}).get("causes") or []
        return causes[0]["id"] if causes else None


class FeedbackRecord(_Closed):
    incident_id: int
    verdict: Literal["right", "wrong"]
    cause: str | None = Field(default=None, description="The cause the diagnosis ranked first when feedback was given.")
    actual: str | None = Field(default=None, description="For 'wrong': the cause it really was, when the user said.")
    user: str = ""
    platform: str = ""
    created_at: datetime | None = None


class Store(Protocol):
    """Persistence used by the service, the worker, the chat bot and the CLI (SQLite or PostgreSQL)."""

    def get_incident(self, incident_id: int) -> IncidentRecord | None: ...

    def list_incidents(self, limit: int = 20, status: str | None = None) -> list[IncidentRecord]: ...

    def find_incident(self, source: str, external_id: str) -> IncidentRecord | None: ...

    def create_manual_incident(self, draft: IncidentDraft) -> IncidentRecord:
        """Store an incident that did not come through a hook (chat `job`/`host` command, CLI) and queue it."""
        ...

    def add_feedback(self, fb: FeedbackRecord) -> None: ...

    def list_feedback(self) -> list[FeedbackRecord]: ...
