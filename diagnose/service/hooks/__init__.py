"""Inbound webhooks: authenticate the raw request, then turn its payload into IncidentDrafts.

The service routes ``POST /hooks/<name>`` to ``HOOKS[name]`` and calls, in this order:

1. ``hook.verify(settings, raw_body, headers_lowercased, now_epoch)`` on the raw bytes before anything is parsed;
   it raises :class:`AuthError` (answer 401) for an unsigned, wrongly signed or stale request, or when the source
   has no secret configured;
2. ``hook.normalize(parsed_json_or_form, settings)``, which raises :class:`PayloadError` (answer 422, ``str()`` is
   the reason for the caller) for malformed or unknown shapes and returns ``[]`` for documented events that carry no
   incident (a GitHub ``ping``, a PagerDuty ``service.updated``, a Jira comment event): answer those 2xx, so the
   sender neither retries them nor disables the subscription.

Sources and their documentation are described in each module: :mod:`.alertmanager`, :mod:`.pagerduty`,
:mod:`.jira`, :mod:`.github`, :mod:`.generic`; the signatures in :mod:`.signatures`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from diagnose.service.hooks import alertmanager, generic, github, jira, pagerduty, signatures
from diagnose.service.hooks._extract import AuthError, PayloadError
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings

Verify = Callable[[Settings, bytes, Mapping[str, str], float], None]
Normalize = Callable[[Any, Settings], list[IncidentDraft]]


@dataclass(frozen=True)
class Hook:
    """One inbound source: how to authenticate its requests and how to read its payloads."""

    name: str
    verify: Verify
    normalize: Normalize


HOOKS: dict[str, Hook] = {
    "alertmanager": Hook("alertmanager", signatures.verify_alertmanager, alertmanager.normalize),
    "pagerduty": Hook("pagerduty", signatures.verify_pagerduty, pagerduty.normalize),
    "jira": Hook("jira", signatures.verify_jira, jira.normalize),
    "github": Hook("github", signatures.verify_github, github.normalize),
    "generic": Hook("generic", signatures.verify_generic, generic.normalize),
}

__all__ = ["HOOKS", "AuthError", "Hook", "PayloadError"]
