"""Inbound authentication of every hook, on the raw request body, before anything is parsed.

Each ``verify_*`` has the signature ``(settings, raw_body, headers, now_epoch) -> None``: ``headers`` has
lower-cased names, ``now_epoch`` is the receiving time (injected so tests need no clock). They raise
:class:`AuthError` with a short reason for a missing, malformed, wrong or stale credential, and when the source has
no secret configured: an endpoint without a secret would accept anyone, so it refuses everyone instead.

All comparisons are constant-time (:func:`hmac.compare_digest`) on bytes; no secret, expected signature or token
ever appears in a reason or a log event.

Formats (public documentation):

* Alertmanager: ``Authorization: Bearer <token>`` from the receiver's ``webhook_config.http_config.authorization``
  (or the older ``bearer_token``). https://prometheus.io/docs/alerting/latest/configuration/#webhook_config and
  https://prometheus.io/docs/alerting/latest/configuration/#http_config
* PagerDuty v3: ``X-PagerDuty-Signature: v1=<hex HMAC-SHA256(secret, body)>[,v1=...]``, one signature per active
  secret during a rotation. https://developer.pagerduty.com/docs/verifying-signatures (source:
  github.com/PagerDuty/developer-docs, docs/webhooks/04-Signatures.md)
* Jira Cloud admin webhooks with a secret: ``X-Hub-Signature: <method>=<hex HMAC(secret, body)>`` following WebSub
  (method ``sha256``; ``sha384``/``sha512`` accepted too).
  https://developer.atlassian.com/cloud/jira/platform/webhooks/#secure-admin-webhooks and
  https://www.w3.org/TR/websub/#signature-validation
* GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`` and ``X-GitHub-Event``.
  https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
* Generic (this project's own): ``X-Diagnose-Timestamp: <epoch seconds>`` and
  ``X-Diagnose-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>``. The timestamp is signed, so a
  captured request cannot be replayed once it is older than ``settings.max_request_age_s``.

Freshness (replay defence):

* Generic: ``|now - timestamp| > max_request_age_s`` is stale (the sender signs the send time).
* PagerDuty signs only the body; its ``event.occurred_at`` (required: a signed body without it is a 422) is the
  time of the *event*, and PagerDuty retries a failed
  delivery up to 4 times with exponential backoff "over the course of about 20 minutes"
  (https://developer.pagerduty.com/docs/webhooks-behavior, source: github.com/PagerDuty/developer-docs,
  docs/webhooks/02-Behavior.md, "Retries"). Rejecting at 300 s would turn every retry after
  the first few minutes into a permanent 401 (PagerDuty drops a webhook on a 4xx and disables the subscription after
  3 consecutive drops). So a PagerDuty event is stale when it is older than
  ``max_request_age_s + PAGERDUTY_RETRY_SPAN_S`` (default 300 + 1200 = 1500 s), or further in the future than
  ``max_request_age_s`` (clock skew). Inside that window a replay is a duplicate delivery, which the store already
  deduplicates by (source, incident id).
* Alertmanager, Jira and GitHub sign no time, so there is nothing to check here: serve the hooks over TLS so a
  request cannot be captured, and a resent one (GitHub's "Redeliver", Alertmanager's ``repeat_interval``) lands on
  the same (source, external id), which the store deduplicates.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from pydantic import SecretStr

from diagnose.service.hooks._extract import AuthError, PayloadError, parse_time
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.hooks.signatures")

PAGERDUTY_RETRY_SPAN_S = 20 * 60
"""PagerDuty's documented retry span ("up to 4 times ... over the course of about 20 minutes")."""

GENERIC_SIGNATURE_HEADER = "x-diagnose-signature"
GENERIC_TIMESTAMP_HEADER = "x-diagnose-timestamp"

Digest = Callable[..., Any]
"""A hashlib constructor (``hashlib.sha256``...)."""

_HEX = re.compile(r"^[0-9a-fA-F]+$")
_WEBSUB_METHODS = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


def _secret(value: SecretStr | None) -> bytes | None:
    raw = value.get_secret_value() if value is not None else ""
    return raw.encode("utf-8") if raw else None


def _same(a: str, b: str) -> bool:
    """Constant-time equality of two header-borne strings (non-ASCII input simply never matches)."""
    return hmac.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))


def _hex_hmac(secret: bytes, message: bytes, digest: Digest = hashlib.sha256) -> str:
    return hmac.new(secret, message, digest).hexdigest()


def _not_configured(source: str, env: str) -> AuthError:
    log.warning("hook_not_configured", source=source, setting=env)
    return AuthError(f"the {source} hook is not configured on this server (set {env})")


def verify_alertmanager(settings: Settings, body: bytes, headers: Mapping[str, str], now: float) -> None:
    """``Authorization: Bearer <settings.alertmanager_token>`` (scheme case-insensitive, RFC 7235)."""
    token = _secret(settings.alertmanager_token)
    if token is None:
        raise _not_configured("alertmanager", "DIAGNOSE_ALERTMANAGER_TOKEN")
    auth = headers.get("authorization", "").strip()
    if not auth:
        raise AuthError("missing Authorization header (set http_config.authorization in the webhook_config)")
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        raise AuthError("the Authorization header is not a Bearer token")
    if not hmac.compare_digest(credentials.strip().encode("utf-8", "replace"), token):
        raise AuthError("wrong bearer token")


def verify_pagerduty(settings: Settings, body: bytes, headers: Mapping[str, str], now: float) -> None:
    """``X-PagerDuty-Signature``: accept when any configured secret matches any ``v1=`` signature; then freshness
    of ``event.occurred_at`` (see the module docstring for the window and why)."""
    secrets = [s for s in (_secret(v) for v in settings.pagerduty_secrets) if s]
    if not secrets:
        raise _not_configured("pagerduty", "DIAGNOSE_PAGERDUTY_SECRETS")
    header = headers.get("x-pagerduty-signature", "")
    if not header.strip():
        raise AuthError("missing X-PagerDuty-Signature header")
    offered = [part.strip()[3:] for part in header.split(",") if part.strip().startswith("v1=")]
    offered = [sig.lower() for sig in offered if _HEX.match(sig)]
    if not offered:
        raise AuthError("X-PagerDuty-Signature has no v1 signature")
    matched = False
    for secret in secrets:
        expected = _hex_hmac(secret, body)
        for sig in offered:
            matched |= _same(expected, sig)  # no early exit: the time taken does not tell which secret matched
    if not matched:
        raise AuthError("bad X-PagerDuty-Signature")
    _check_pagerduty_age(settings, body, now)


def _check_pagerduty_age(settings: Settings, body: bytes, now: float) -> None:
    """Stale or future events are refused (401). A correctly signed body in which no ``event.occurred_at`` can be
    read is authentic but malformed: it passes here and the normalizer refuses it (422, kept as rejected), so
    PagerDuty is told its payload is wrong rather than its signature, and it is never processed unchecked."""
    try:
        occurred = json.loads(body)["event"]["occurred_at"]
        when = parse_time(occurred, "event.occurred_at")
    except (ValueError, KeyError, TypeError, RecursionError, PayloadError):
        return
    if when is None:
        return
    age = now - when.timestamp()
    limit = settings.max_request_age_s + PAGERDUTY_RETRY_SPAN_S
    if age > limit:
        raise AuthError(f"stale PagerDuty event: occurred {age:.0f} s ago (limit {limit} s)")
    if -age > settings.max_request_age_s:
        raise AuthError(f"PagerDuty event occurred {-age:.0f} s in the future: check the server clock")


def _verify_hub_signature(secret: bytes, body: bytes, value: str, header: str, methods: Mapping[str, Digest]) -> None:
    method, sep, sig = value.strip().partition("=")
    if not sep or not sig:
        raise AuthError(f"{header} is not of the form <method>=<hex>")
    digest = methods.get(method.strip().lower())
    if digest is None:
        raise AuthError(f"{header} method {method.strip()[:16]!r} is not accepted (use {', '.join(methods)})")
    sig = sig.strip().lower()
    if not _HEX.match(sig) or not _same(_hex_hmac(secret, body, digest), sig):
        raise AuthError(f"bad {header}")


def verify_jira(settings: Settings, body: bytes, headers: Mapping[str, str], now: float) -> None:
    """``X-Hub-Signature: sha256=<hex>`` (WebSub ``method=signature``; sha384 and sha512 accepted, sha1 is not)."""
    secret = _secret(settings.jira_secret)
    if secret is None:
        raise _not_configured("jira", "DIAGNOSE_JIRA_SECRET")
    value = headers.get("x-hub-signature", "")
    if not value.strip():
        raise AuthError("missing X-Hub-Signature header (set a secret on the Jira webhook)")
    _verify_hub_signature(secret, body, value, "X-Hub-Signature", _WEBSUB_METHODS)


def verify_github(settings: Settings, body: bytes, headers: Mapping[str, str], now: float) -> None:
    """``X-Hub-Signature-256: sha256=<hex>`` on a delivery that names its ``X-GitHub-Event``.

    The legacy SHA-1 ``X-Hub-Signature`` alone is refused: GitHub sends the SHA-256 header whenever a secret is set.
    """
    secret = _secret(settings.github_secret)
    if secret is None:
        raise _not_configured("github", "DIAGNOSE_GITHUB_SECRET")
    if not headers.get("x-github-event", "").strip():
        raise AuthError("missing X-GitHub-Event header: not a GitHub webhook delivery")
    value = headers.get("x-hub-signature-256", "")
    if not value.strip():
        raise AuthError("missing X-Hub-Signature-256 header (set a secret on the GitHub webhook)")
    _verify_hub_signature(secret, body, value, "X-Hub-Signature-256", {"sha256": hashlib.sha256})


def sign_generic(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Diagnose-Signature`` value for ``body`` sent at ``timestamp`` (epoch seconds, as sent).

    Used by the post-back client to sign what it sends to ``settings.post_url``, so a receiver can check it with
    the same rule as this service's generic hook.
    """
    return "sha256=" + _hex_hmac(secret, timestamp.encode("ascii") + b"." + body)


def verify_generic(settings: Settings, body: bytes, headers: Mapping[str, str], now: float) -> None:
    """``X-Diagnose-Signature: sha256=<hex HMAC-SHA256(secret, f"{ts}.{body}")>`` with ``X-Diagnose-Timestamp: ts``;
    stale when ``|now - ts| > settings.max_request_age_s``."""
    secret = _secret(settings.generic_secret)
    if secret is None:
        raise _not_configured("generic", "DIAGNOSE_GENERIC_SECRET")
    ts = headers.get(GENERIC_TIMESTAMP_HEADER, "").strip()
    value = headers.get(GENERIC_SIGNATURE_HEADER, "").strip()
    if not ts or not value:
        raise AuthError("missing X-Diagnose-Timestamp or X-Diagnose-Signature header")
    if not re.fullmatch(r"\d{1,12}(\.\d{1,9})?", ts):
        raise AuthError("X-Diagnose-Timestamp is not epoch seconds")
    _verify_hub_signature(secret, ts.encode("ascii") + b"." + body, value, "X-Diagnose-Signature",
                          {"sha256": hashlib.sha256})
    skew = now - float(ts)
    if abs(skew) > settings.max_request_age_s:
        raise AuthError(f"stale request: X-Diagnose-Timestamp is {abs(skew):.0f} s "
                        f"{'old' if skew > 0 else 'in the future'} (limit {settings.max_request_age_s} s)")
