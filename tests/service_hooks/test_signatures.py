"""Inbound authentication of the hooks.

Every signature here is computed in the test with ``hmac``/``hashlib`` as each vendor documents it, never with the
code under test:

* GitHub: https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries, including the page's own
  test values (secret "It's a Secret to Everybody", payload "Hello, World!", signature 757107ea...).
* PagerDuty v3: https://developer.pagerduty.com/docs/verifying-signatures (``v1=<hex HMAC-SHA256>``, comma-separated
  during a secret rotation); retries: https://developer.pagerduty.com/docs/webhooks-behavior.
* Jira Cloud: https://developer.atlassian.com/cloud/jira/platform/webhooks/#secure-admin-webhooks (WebSub
  ``X-Hub-Signature: method=signature``, https://www.w3.org/TR/websub/#signature-validation).
* Alertmanager: https://prometheus.io/docs/alerting/latest/configuration/#http_config (``Authorization: Bearer``).
* Generic: this project's documented ``HMAC-SHA256(secret, f"{timestamp}.{body}")``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable

import pytest

from diagnose.service.hooks import HOOKS, AuthError, PayloadError
from diagnose.service.settings import Settings

NOW = 1_714_644_000.0  # 2024-05-02T10:00:00Z
AM_TOKEN = "am-bearer-7f3c"
PD_OLD, PD_NEW = "pd-secret-old-41a9", "pd-secret-new-93be"
JIRA_SECRET = "jira-secret-55d0"
GH_SECRET = "It's a Secret to Everybody"
GENERIC_SECRET = "generic-secret-c1e2"
ALL_SECRETS = (AM_TOKEN, PD_OLD, PD_NEW, JIRA_SECRET, GH_SECRET, GENERIC_SECRET)


@pytest.fixture
def settings() -> Settings:
    return Settings(alertmanager_token=AM_TOKEN, pagerduty_secrets=[PD_OLD, PD_NEW], jira_secret=JIRA_SECRET,
                    github_secret=GH_SECRET, generic_secret=GENERIC_SECRET, max_request_age_s=300)


@pytest.fixture
def bare() -> Settings:
    """No secret configured for any source."""
    return Settings(alertmanager_token=None, pagerduty_secrets=[], jira_secret=None, github_secret=None,
                    generic_secret=None)


def hexmac(secret: str, message: bytes, algo: str = "sha256") -> str:
    return hmac.new(secret.encode(), message, getattr(hashlib, algo)).hexdigest()


def reason(call: Callable[[], None]) -> str:
    with pytest.raises(AuthError) as err:
        call()
    text = str(err.value)
    for secret in ALL_SECRETS:
        assert secret not in text, "an AuthError reason must never echo a secret"
    return text


# ----------------------------------------------------------------------------------------------- alertmanager

AM = HOOKS["alertmanager"].verify
AM_BODY = b'{"version":"4","alerts":[]}'


def test_alertmanager_bearer_token_accepted(settings: Settings) -> None:
    AM(settings, AM_BODY, {"authorization": f"Bearer {AM_TOKEN}"}, NOW)
    AM(settings, AM_BODY, {"authorization": f"bearer {AM_TOKEN}"}, NOW)  # RFC 7235: the scheme is case-insensitive


@pytest.mark.parametrize("headers, expected", [
    ({}, "missing Authorization"),
    ({"authorization": "Bearer wrong-token"}, "wrong bearer token"),
    ({"authorization": f"Basic {AM_TOKEN}"}, "not a Bearer"),
    ({"authorization": "Bearer "}, "not a Bearer"),
    ({"authorization": f"Bearer {AM_TOKEN}x"}, "wrong bearer token"),
])
def test_alertmanager_rejects(settings: Settings, headers: dict[str, str], expected: str) -> None:
    assert expected in reason(lambda: AM(settings, AM_BODY, headers, NOW))


def test_alertmanager_without_token_refuses_everyone(bare: Settings) -> None:
    assert "not configured" in reason(lambda: AM(bare, AM_BODY, {"authorization": "Bearer anything"}, NOW))


# -------------------------------------------------------------------------------------------------- pagerduty

PD = HOOKS["pagerduty"].verify


def pd_body(occurred_at: str) -> bytes:
    event = {"event": {"id": "01DEN4HQ", "event_type": "incident.triggered", "resource_type": "incident",
                       "occurred_at": occurred_at, "data": {"id": "PGR0VU2", "type": "incident", "title": "é ü"}}}
    return json.dumps(event, ensure_ascii=False).encode("utf-8")  # raw UTF-8, as PagerDuty sends unicode


FRESH = pd_body("2024-05-02T09:59:00.000Z")  # 60 s before NOW


def test_pagerduty_single_signature(settings: Settings) -> None:
    PD(settings, FRESH, {"x-pagerduty-signature": f"v1={hexmac(PD_NEW, FRESH)}"}, NOW)


def test_pagerduty_rotation_any_secret_matches_any_signature(settings: Settings) -> None:
    # during a rotation PagerDuty sends one signature per secret; we may know either one
    stranger = hexmac("a-secret-we-do-not-know", FRESH)
    PD(settings, FRESH, {"x-pagerduty-signature": f"v1={stranger},v1={hexmac(PD_OLD, FRESH)}"}, NOW)
    PD(settings, FRESH, {"x-pagerduty-signature": f"v1={hexmac(PD_NEW, FRESH)}, v1={stranger}"}, NOW)
    only_old = Settings(pagerduty_secrets=[PD_OLD])
    PD(only_old, FRESH, {"x-pagerduty-signature": f"v1={hexmac(PD_NEW, FRESH)},v1={hexmac(PD_OLD, FRESH)}"}, NOW)


def test_pagerduty_rejects_tampered_unknown_and_unversioned(settings: Settings) -> None:
    good = hexmac(PD_NEW, FRESH)
    tampered = FRESH.replace(b"PGR0VU2", b"PGR0VU3")
    assert "bad X-PagerDuty-Signature" in reason(lambda: PD(settings, tampered, {"x-pagerduty-signature": f"v1={good}"},
                                                            NOW))
    unknown = hexmac("rotated-away", FRESH)
    assert "bad" in reason(lambda: PD(settings, FRESH, {"x-pagerduty-signature": f"v1={unknown}"}, NOW))
    assert "no v1 signature" in reason(lambda: PD(settings, FRESH, {"x-pagerduty-signature": f"v0={good}"}, NOW))
    assert "missing" in reason(lambda: PD(settings, FRESH, {}, NOW))


def test_pagerduty_stale_window_covers_documented_retries(settings: Settings) -> None:
    # PagerDuty retries for about 20 minutes: an event 1499 s old is a retry and passes, 1501 s is stale
    # (max_request_age_s 300 + 1200 s retry span)
    late_retry = pd_body("2024-05-02T09:35:01Z")
    PD(settings, late_retry, {"x-pagerduty-signature": f"v1={hexmac(PD_OLD, late_retry)}"}, NOW)
    stale = pd_body("2024-05-02T09:34:59Z")
    assert "stale" in reason(lambda: PD(settings, stale, {"x-pagerduty-signature": f"v1={hexmac(PD_OLD, stale)}"},
                                        NOW))
    future = pd_body("2024-05-02T10:05:01Z")  # 301 s ahead of our clock
    assert "future" in reason(lambda: PD(settings, future,
                                         {"x-pagerduty-signature": f"v1={hexmac(PD_OLD, future)}"}, NOW))


def test_pagerduty_signed_body_without_time_is_authentic_but_refused_by_the_normalizer(settings: Settings) -> None:
    from diagnose.service.hooks.pagerduty import normalize

    for body in (b'{"event": {"event_type": "incident.triggered"}}', b'{"event": [', b'[1, 2]',
                 b'{"event": {"event_type": "incident.triggered", "occurred_at": "yesterday"}}'):
        PD(settings, body, {"x-pagerduty-signature": f"v1={hexmac(PD_NEW, body)}"}, NOW)  # signed: not a 401
    with pytest.raises(PayloadError, match="occurred_at"):
        normalize({"event": {"event_type": "incident.triggered",
                             "data": {"type": "incident", "id": "P1", "title": "x"}}}, settings)


def test_pagerduty_not_configured(bare: Settings) -> None:
    assert "not configured" in reason(lambda: PD(bare, FRESH, {"x-pagerduty-signature": "v1=00"}, NOW))


# ------------------------------------------------------------------------------------------------------- jira

JIRA = HOOKS["jira"].verify
JIRA_BODY = b'{"timestamp":1714644000000,"webhookEvent":"jira:issue_created","issue":{"key":"OPS-1"}}'


@pytest.mark.parametrize("algo", ["sha256", "sha512", "sha384"])
def test_jira_websub_signature(settings: Settings, algo: str) -> None:
    JIRA(settings, JIRA_BODY, {"x-hub-signature": f"{algo}={hexmac(JIRA_SECRET, JIRA_BODY, algo)}"}, NOW)


def test_jira_rejects(settings: Settings, bare: Settings) -> None:
    sig = hexmac(JIRA_SECRET, JIRA_BODY)
    assert "bad" in reason(lambda: JIRA(settings, JIRA_BODY + b" ", {"x-hub-signature": f"sha256={sig}"}, NOW))
    sha1 = hexmac(JIRA_SECRET, JIRA_BODY, "sha1")
    assert "not accepted" in reason(lambda: JIRA(settings, JIRA_BODY, {"x-hub-signature": f"sha1={sha1}"}, NOW))
    assert "form" in reason(lambda: JIRA(settings, JIRA_BODY, {"x-hub-signature": sig}, NOW))
    assert "missing" in reason(lambda: JIRA(settings, JIRA_BODY, {}, NOW))
    assert "not configured" in reason(lambda: JIRA(bare, JIRA_BODY, {"x-hub-signature": f"sha256={sig}"}, NOW))


# ----------------------------------------------------------------------------------------------------- github

GH = HOOKS["github"].verify


def test_github_documented_test_vector(settings: Settings) -> None:
    # the exact values from GitHub's "Testing the webhook payload validation" section
    documented = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    GH(settings, b"Hello, World!", {"x-github-event": "issues", "x-hub-signature-256": documented}, NOW)
    with pytest.raises(AuthError):
        GH(settings, b"Hello, World?", {"x-github-event": "issues", "x-hub-signature-256": documented}, NOW)


def test_github_requires_event_header_and_sha256(settings: Settings, bare: Settings) -> None:
    body = b'{"zen":"Design for failure.","hook_id":1}'
    sig256 = "sha256=" + hexmac(GH_SECRET, body)
    GH(settings, body, {"x-github-event": "ping", "x-hub-signature-256": sig256}, NOW)
    assert "X-GitHub-Event" in reason(lambda: GH(settings, body, {"x-hub-signature-256": sig256}, NOW))
    legacy = {"x-github-event": "ping", "x-hub-signature": "sha1=" + hexmac(GH_SECRET, body, "sha1")}
    assert "X-Hub-Signature-256" in reason(lambda: GH(settings, body, legacy, NOW))
    assert "not configured" in reason(lambda: GH(bare, body, {"x-github-event": "ping",
                                                              "x-hub-signature-256": sig256}, NOW))


# ---------------------------------------------------------------------------------------------------- generic

GEN = HOOKS["generic"].verify
GEN_BODY = b'{"result":{"sys_id":"9d38","short_description":"link flapping"}}'


def generic_headers(ts: str, body: bytes = GEN_BODY, secret: str = GENERIC_SECRET) -> dict[str, str]:
    return {"x-diagnose-timestamp": ts,
            "x-diagnose-signature": "sha256=" + hexmac(secret, ts.encode() + b"." + body)}


def test_generic_signed_and_fresh(settings: Settings) -> None:
    GEN(settings, GEN_BODY, generic_headers(str(int(NOW) - 299)), NOW)
    GEN(settings, GEN_BODY, generic_headers(str(int(NOW) + 299)), NOW)  # small clock skew either way


def test_generic_replay_and_tampering(settings: Settings) -> None:
    assert "stale" in reason(lambda: GEN(settings, GEN_BODY, generic_headers(str(int(NOW) - 301)), NOW))
    assert "future" in reason(lambda: GEN(settings, GEN_BODY, generic_headers(str(int(NOW) + 301)), NOW))
    # a replayed request with a fresh timestamp but the old signature: the timestamp is signed
    old = generic_headers(str(int(NOW) - 3600))
    replay = {**old, "x-diagnose-timestamp": str(int(NOW))}
    assert "bad" in reason(lambda: GEN(settings, GEN_BODY, replay, NOW))
    assert "bad" in reason(lambda: GEN(settings, GEN_BODY.replace(b"9d38", b"9d39"),
                                       generic_headers(str(int(NOW))), NOW))
    assert "bad" in reason(lambda: GEN(settings, GEN_BODY, generic_headers(str(int(NOW)), secret="guess"), NOW))
    assert "epoch" in reason(lambda: GEN(settings, GEN_BODY, generic_headers("2024-05-02T10:00:00Z"), NOW))
    assert "missing" in reason(lambda: GEN(settings, GEN_BODY, {}, NOW))


def test_generic_not_configured(bare: Settings) -> None:
    assert "not configured" in reason(lambda: GEN(bare, GEN_BODY, generic_headers(str(int(NOW))), NOW))


def test_each_hook_checks_its_own_credential() -> None:
    """A GitHub-signed body does not pass the Jira or generic check, even with the same secret."""
    shared = Settings(jira_secret="same", github_secret="same", generic_secret="same")
    body = b"{}"
    headers = {"x-github-event": "issues", "x-hub-signature-256": "sha256=" + hexmac("same", body)}
    HOOKS["github"].verify(shared, body, headers, NOW)
    with pytest.raises(AuthError):
        HOOKS["jira"].verify(shared, body, headers, NOW)
    with pytest.raises(AuthError):
        HOOKS["generic"].verify(shared, body, headers, NOW)
