"""Hook bodies that cannot be decoded or validated are 422 and kept as rejected (the sender stops retrying), never
500; a malformed body with a valid PagerDuty signature is 422, not 401; copies of one request are one row."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

import httpx
import pytest

from diagnose.service.bench import alertmanager_payload

TOKEN = "am-token-hostile"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
PD_SECRET = "pd-secret-hostile"
GENERIC_SECRET = "generic-secret-hostile"

DEEP = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECT = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
LONG_INT = b'{"version": "4", "groupKey": ' + b"9" * 5000 + b', "alerts": []}'
BAD_UTF8 = b'{"version": "4", "status": "firing", "receiver": "\xff\xfe\xfd", "alerts": []}'
# parseable, but nested deeper than a normalizer may recurse
DEEPISH = json.dumps({"version": "4", "status": "firing", "receiver": "r", "groupKey": "g",
                      "alerts": [{"status": "firing", "labels": {"alertname": "x"},
                                  "annotations": {"summary": json.loads("[" * 900 + "]" * 900)},
                                  "startsAt": "2024-05-02T10:00:00Z", "fingerprint": "f1"}]}).encode()


@pytest.fixture
def svc(service: Any) -> Any:
    return service(alertmanager_token=TOKEN, pagerduty_secrets=PD_SECRET, generic_secret=GENERIC_SECRET,
                   generic_mapping={"external_id": "id", "title": "title"})


def _rejected(svc: Any) -> dict[int, Any]:
    return {r.id: r for r in svc.store.list_requests(status="rejected", limit=100)}


@pytest.mark.parametrize("raw", [DEEP, DEEP_OBJECT, LONG_INT, BAD_UTF8, DEEPISH, b"[]", b'"text"',
                                 b"", b"{\"version\": \"4\", \"alerts\": ["],
                         ids=["deep-list", "deep-object", "5000-digits", "bad-utf8", "deep-in-a-field",
                              "list", "string", "empty", "truncated"])
def test_an_undecodable_or_invalid_alertmanager_body_is_422_and_kept_as_rejected(svc: Any, raw: bytes) -> None:
    r = httpx.post(f"{svc.base_url}/hooks/alertmanager", content=raw, headers=AUTH, timeout=60)
    assert r.status_code == 422, r.text
    rid = r.json()["request_id"]
    kept = _rejected(svc)[rid]
    assert kept.error == r.json()["detail"] and "\n" not in kept.error and len(kept.error) < 400
    assert svc.store.list_requests(status="pending") == []


def _pd_headers(body: bytes) -> dict[str, str]:
    sig = hmac.new(PD_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-PagerDuty-Signature": f"v1={sig}", "Content-Type": "application/json"}


@pytest.mark.parametrize("raw", [b'{"event": [', DEEP, b'{"event": {"event_type": "incident.triggered", "data": '
                                 b'{"type": "incident", "id": "P1", "title": "x"}}}'],
                         ids=["truncated", "deep", "no-occurred_at"])
def test_a_malformed_pagerduty_body_with_a_valid_signature_is_422_not_401(svc: Any, raw: bytes) -> None:
    r = httpx.post(f"{svc.base_url}/hooks/pagerduty", content=raw, headers=_pd_headers(raw), timeout=60)
    assert r.status_code == 422, r.text
    assert r.json()["request_id"] in _rejected(svc)
    bad = httpx.post(f"{svc.base_url}/hooks/pagerduty", content=raw, timeout=60,
                     headers={**_pd_headers(raw), "X-PagerDuty-Signature": "v1=" + "0" * 64})
    assert bad.status_code == 401  # a bad signature is still refused first, and not stored
    assert len(_rejected(svc)) == 1


def test_a_signed_generic_form_whose_payload_is_too_deep_is_422(svc: Any) -> None:
    body = b"payload=" + b"%5B" * 50_000 + b"%5D" * 50_000
    ts = str(int(time.time()))
    sig = hmac.new(GENERIC_SECRET.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    r = httpx.post(f"{svc.base_url}/hooks/generic", content=body, timeout=60,
                   headers={"Content-Type": "application/x-www-form-urlencoded", "X-Diagnose-Timestamp": ts,
                            "X-Diagnose-Signature": f"sha256={sig}"})
    assert r.status_code == 422 and "deep" in r.json()["detail"]


def test_copies_of_one_request_are_counted_on_one_duplicate_row(svc: Any) -> None:
    body = alertmanager_payload(7)
    with httpx.Client(base_url=svc.base_url, timeout=30) as c:  # each copy is a durable write: 25 make the point
        codes = [c.post("/hooks/alertmanager", json=body, headers=AUTH).status_code for _ in range(25)]
    assert codes[0] == 202 and set(codes[1:]) == {200}
    rows = svc.store.list_requests(limit=500)
    assert [x.status for x in rows] == ["duplicate", "pending"]
    dup, first = rows
    assert dup.duplicate_of == first.id and dup.replays == 23  # the first copy made the row, 23 more counted
    listed = httpx.get(f"{svc.base_url}/requests", params={"status": "duplicate"}, timeout=30).json()
    assert listed[0]["replays"] == 23 and listed[0]["last_received_at"] >= listed[0]["received_at"]


def test_a_rejected_body_sent_again_is_counted_on_its_first_row(svc: Any) -> None:
    raw = b'{"version": "4", "alerts": ['
    ids = {httpx.post(f"{svc.base_url}/hooks/alertmanager", content=raw, headers=AUTH, timeout=30).json()["request_id"]
           for _ in range(5)}
    other = httpx.post(f"{svc.base_url}/hooks/alertmanager", content=b"[]", headers=AUTH, timeout=30)
    assert len(ids) == 1 and other.status_code == 422 and other.json()["request_id"] not in ids
    rows = _rejected(svc)
    assert len(rows) == 2 and rows[ids.pop()].replays == 4
