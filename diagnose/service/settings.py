"""Service configuration from the environment (``DIAGNOSE_*``) and an optional env file.

The env file is ``$DIAGNOSE_CONFIG`` when set, else ``diagnose.env`` in the working directory when present.
Secrets are :class:`pydantic.SecretStr`: they never appear in ``repr``, logs or ``/healthz``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/diagnose``, else ``~/.local/share/diagnose`` (the XDG base directory default): never the
    working directory, so a command run anywhere does not leave a store behind."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    return (Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share") / "diagnose"


def _env_file() -> str | None:
    explicit = os.environ.get("DIAGNOSE_CONFIG")
    if explicit:
        return explicit
    return "diagnose.env" if Path("diagnose.env").is_file() else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DIAGNOSE_", extra="ignore", env_file_encoding="utf-8")

    # storage
    data_dir: Path = Field(default_factory=default_data_dir,
                           description="Folder for the default SQLite store and incident evidence"
                                       " (default $XDG_DATA_HOME/diagnose or ~/.local/share/diagnose).")
    store: str | None = Field(None, description="Database URL: sqlite:///path.db or postgresql://... ; default SQLite in data_dir.")
    bundles: Path | None = Field(None, description="Bundle store: $DIAGNOSE_BUNDLES/<job-or-host>/...; default data_dir/bundles.")
    topology: Path | None = Field(None, description="A topology file (ibnetdiscover / iblinkinfo / ibdiagnet) used to group alert storms.")
    # the site's own rule packs and thresholds (diagnose.catalog.site), also from the env file
    rules: str | None = Field(None, description="Site rule pack folders, separated by the OS path separator.")
    thresholds: str | None = Field(None, description="'<cause id>.<name>=<value>,...' over the rules' defaults.")

    # inbound authentication: one secret per signed source
    alertmanager_token: SecretStr | None = None
    pagerduty_secrets: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list, description="Comma-separated: several during a secret rotation.")
    jira_secret: SecretStr | None = None
    github_secret: SecretStr | None = None
    generic_secret: SecretStr | None = None
    generic_mapping: dict[str, str] = Field(
        default_factory=dict, description="JSON: Incident field -> dotted path in the payload (generic hook).")
    slack_signing_secret: SecretStr | None = Field(None, validation_alias="SLACK_SIGNING_SECRET")
    slack_bot_token: SecretStr | None = Field(None, validation_alias="SLACK_BOT_TOKEN")
    slack_app_token: SecretStr | None = Field(None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field("https://slack.com/api/", description="Slack Web API base (tests point it at a stand-in).")
    teams_secret: SecretStr | None = Field(None, description="Base64 HMAC key of the Teams outgoing webhook.")
    mattermost_token: SecretStr | None = None
    max_request_age_s: int = Field(300, description="Signed requests older than this are stale (401).")
    read_token: SecretStr | None = Field(
        None, description="Bearer token required by the read endpoints (/incidents, /requests); unset = open.")

    # evidence
    prometheus_url: str | None = None
    prometheus_step_s: int = 30

    # results posted back
    jira_url: str | None = None
    jira_user: str | None = None
    jira_token: SecretStr | None = None
    pagerduty_token: SecretStr | None = None
    pagerduty_from: str | None = Field(None, description="Email of the PagerDuty user notes are posted as.")
    pagerduty_api_url: str = "https://api.pagerduty.com"
    post_url: str | None = Field(None, description="Generic URL that receives every finished diagnosis as JSON.")

    # request handling and the worker
    max_body_bytes: int = Field(1_048_576, description="Largest request body, hooks and chat alike (413 past it).")
    max_queue: int = Field(10_000, description="Requests waiting (pending or processing) past which a new hook "
                                               "request is answered 503 with Retry-After (0: no bound).")
    retry_after_s: int = Field(30, description="Retry-After of a 503 (queue full, store unavailable).")
    shutdown_grace_s: float = Field(5.0, description="On SIGTERM, how long the worker may finish its step; a "
                                                     "triage still running then is left to the next start.")
    group_window_s: int = 300
    worker_threads: int = 1
    max_attempts: int = 5
    backoff_base_s: float = 2.0
    backoff_max_s: float = 300.0
    lease_s: int = 600

    # collecting from the alert's hosts before triage (diagnose.service.collecting): off unless sources are named
    collect_sources: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated sources (alertmanager, pagerduty, ...) whose incidents "
                                          "are collected from the hosts they name, through diagnose collect's "
                                          "fan-out, before triage; empty: never.")
    collect_via: str | None = Field(None, description="srun (the incident's job), clush, pdsh or ssh; default the "
                                                      "first of clush, pdsh, ssh on PATH.")
    collect_remote: str = Field("diagnose", description="How diagnose is run on the hosts.")
    collect_max_hosts: int = Field(16, description="Hosts of one incident collected from, at most.")
    collect_fanout: int = Field(16, description="Hosts collecting at once.")
    collect_timeout_s: float = Field(120.0, description="Bound of the collection on each host.")
    collect_grace_s: float = Field(30.0, description="A host's connection and transfer time past its bound.")
    collect_interval_s: float = Field(10.0, description="Seconds between the two counter reads on each host.")
    collect_fabric: bool = Field(False, description="Also read the fabric once, from the first host that can.")

    @field_validator("pagerduty_secrets", "collect_sources", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        if isinstance(v, str):
            return [s.strip() for s in v.split(",") if s.strip()]
        return v

    def store_url(self) -> str:
        return self.store or f"sqlite:///{(self.data_dir / 'diagnose.db').as_posix()}"

    def bundle_root(self) -> Path:
        return self.bundles or (self.data_dir / "bundles")


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment and env file; keyword overrides (CLI flags, tests) win."""
    # overrides are validated (and coerced) by pydantic like the environment's values, so any type is accepted;
    # _env_file is pydantic-settings' own init option, not a field mypy sees
    return Settings(_env_file=_env_file(), **overrides)  # type: ignore[call-arg]
