"""Hook normalizers on the vendors' documented payload shapes (see payloads/README.md for each source).

Expected values are read off the payload files by a person, not produced by the code under test.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.service.hooks import HOOKS, PayloadError
from diagnose.service.hooks._extract import extract_text, parse_time
from diagnose.service.hooks.jira import adf_to_text
from diagnose.service.models import IncidentDraft, PortRef
from diagnose.service.settings import Settings

PAYLOADS = Path(__file__).parent / "payloads"
SERVICENOW_MAPPING = {
    "external_id": "result.sys_id",
    "title": "result.short_description",
    "text": "result.description",
    "hosts": "result.cmdb_ci.display_value",
    "starts_at": "result.opened_at",
    "state": "result.state",
    "bundle_refs": "result.u_bundle",
}


def load(name: str) -> Any:
    return json.loads((PAYLOADS / name).read_text(encoding="utf-8"))


def normalize(hook: str, payload: Any, settings: Settings | None = None) -> list[IncidentDraft]:
    return HOOKS[hook].normalize(payload, settings or Settings())


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


# ----------------------------------------------------------------------------------------------- alertmanager


def test_alertmanager_one_draft_per_alert() -> None:
    firing, resolved = normalize("alertmanager", load("alertmanager_v4_infiniband.json"))
    assert firing.source == "alertmanager" and firing.external_id == "5f2c1a9be0d7c3a1"
    assert firing.state == "firing" and resolved.state == "resolved"
    assert firing.hosts == ["gpu-a003"]  # instance "gpu-a003:9100" without its port
    assert firing.devices == ["mlx5_2"]
    assert firing.ports == [PortRef(host="gpu-a003", device="mlx5_2", port=1)]
    assert firing.job_id == "4412"  # from slurm_job_id, never from Prometheus' scrape label job="node"
    assert resolved.job_id is None
    assert firing.title == "InfinibandSymbolErrors: Symbol errors rising on gpu-a003 mlx5_2 port 1"
    assert firing.text.splitlines()[:3] == [
        "InfinibandSymbolErrors",
        "Symbol errors rising on gpu-a003 mlx5_2 port 1",
        "node_infiniband_symbol_error_total increased by 1840 in the last 5m.",
    ]
    assert firing.labels["severity"] == "critical" and firing.labels["device"] == "mlx5_2"
    assert firing.reply_to == {}


def test_alertmanager_times_zero_end_and_nanoseconds() -> None:
    firing, resolved = normalize("alertmanager", load("alertmanager_v4_infiniband.json"))
    assert firing.starts_at == datetime(2024, 5, 2, 10, 11, 12, 739266, tzinfo=timezone.utc)
    assert firing.ends_at is None  # 0001-01-01T00:00:00Z: no end yet
    assert resolved.ends_at == utc(2024, 5, 2, 10, 5)  # 12:05+02:00


def test_alertmanager_truncation_is_visible() -> None:
    drafts = normalize("alertmanager", load("alertmanager_v4_infiniband.json"))
    for d in drafts:
        assert d.labels["truncated_alerts"] == "3"
        assert "3 more alert(s)" in d.text and "only 2 arrived" in d.text
    payload = load("alertmanager_v4_infiniband.json")
    payload["truncatedAlerts"] = 0
    for d in normalize("alertmanager", payload):
        assert "truncated_alerts" not in d.labels and "truncated" not in d.text


def test_alertmanager_without_fingerprint_gets_a_stable_label_hash() -> None:
    payload = load("alertmanager_v4_infiniband.json")
    for alert in payload["alerts"]:
        del alert["fingerprint"]
    first = [d.external_id for d in normalize("alertmanager", payload)]
    reordered = copy.deepcopy(payload)
    for alert in reordered["alerts"]:
        alert["labels"] = dict(reversed(list(alert["labels"].items())))
    reordered["truncatedAlerts"] = 7  # our own label must not change the identity
    second = [d.external_id for d in normalize("alertmanager", reordered)]
    assert first == second
    assert len(set(first)) == 2 and all(len(x) == 16 for x in first)


def test_alertmanager_host_labels_and_hostlists() -> None:
    payload = load("alertmanager_v4_infiniband.json")
    payload["alerts"] = payload["alerts"][:1]
    labels = payload["alerts"][0]["labels"]
    labels.update({"node": "gpu-a[007-008]", "exported_instance": "[fe80::1]:9100"})
    del labels["device"], labels["port"]
    (d,) = normalize("alertmanager", payload)
    assert d.hosts == ["gpu-a007", "gpu-a008", "gpu-a003", "fe80::1"]
    assert d.devices == ["mlx5_2"]  # still named in the summary text


@pytest.mark.parametrize("mutate, reason", [
    (lambda p: p.update(version="1"), 'version "4"'),
    (lambda p: p.pop("version"), 'version "4"'),
    (lambda p: p.update(alerts={"status": "firing"}), "alerts: expected a list"),
    (lambda p: p["alerts"][0].update(labels=["alertname"]), "alerts[0].labels: expected an object"),
    (lambda p: p["alerts"][1].update(labels={}), "alerts[1].labels"),
    (lambda p: p["alerts"][0].update(status="pending"), "alerts[0].status"),
    (lambda p: p["alerts"][0].update(startsAt="yesterday"), "alerts[0].startsAt"),
    (lambda p: p.update(truncatedAlerts="3"), "truncatedAlerts"),
    (lambda p: p["alerts"][0]["labels"].update(bundle="/etc/shadow"), "relative"),
    (lambda p: p["alerts"][0]["annotations"].update(bundle="job-4412/../../secrets"), "'..'"),
    (lambda p: p["alerts"][0]["labels"].update(node="gpu-a[009-001]"), "alerts[0].labels.node"),
    (lambda p: p["alerts"][0]["labels"].update(bundle="http://169.254.169.254/latest"), "not a URL"),
])
def test_alertmanager_malformed(mutate, reason: str) -> None:  # noqa: ANN001 - a payload mutator
    payload = load("alertmanager_v4_infiniband.json")
    mutate(payload)
    with pytest.raises(PayloadError, match=None) as err:
        normalize("alertmanager", payload)
    assert reason in str(err.value)


def test_alertmanager_relative_bundle_label_is_recorded() -> None:
    payload = load("alertmanager_v4_infiniband.json")
    payload["alerts"][0]["labels"]["bundle"] = "job-4412/ib-counters.tar.gz"
    assert normalize("alertmanager", payload)[0].bundle_refs == ["job-4412/ib-counters.tar.gz"]


def test_alertmanager_grafana_payload_is_refused_clearly() -> None:
    with pytest.raises(PayloadError, match="Alertmanager"):
        normalize("alertmanager", {"receiver": "x", "status": "firing", "orgId": 1, "alerts": [], "version": "1"})
    with pytest.raises(PayloadError, match="expected an object"):
        normalize("alertmanager", [1, 2])


# -------------------------------------------------------------------------------------------------- pagerduty


def test_pagerduty_incident_triggered() -> None:
    (d,) = normalize("pagerduty", load("pagerduty_v3_incident_triggered.json"))
    assert d.source == "pagerduty" and d.external_id == "Q2KPRB3V1X9ZCA"
    assert d.reply_to == {"pagerduty_incident": "Q2KPRB3V1X9ZCA"}
    assert d.title == "NCCL AllReduce timeout in job 4412 on gpu-b[011-012]"
    assert d.hosts == ["gpu-b011", "gpu-b012"]
    assert d.devices == ["mlx5_4"]
    assert PortRef(host="gpu-b012", device="mlx5_4", port=1) in d.ports
    assert d.job_id == "4412"
    assert "IBV_WC_RETRY_EXC_ERR" in d.text  # body.details is part of the symptom text
    assert d.state == "open" and d.starts_at == utc(2024, 5, 2, 10, 12, 2) and d.ends_at is None
    assert d.labels["pagerduty_service"] == "GPU fabric" and d.labels["pagerduty_priority"] == "P1"


def test_pagerduty_documented_example_payload() -> None:
    (d,) = normalize("pagerduty", load("pagerduty_v3_priority_updated_docs.json"))
    assert d.external_id == "PGR0VU2" and d.title == "A little bump in the road"
    assert d.hosts == [] and d.devices == [] and d.job_id is None
    assert d.labels["pagerduty_event_type"] == "incident.priority_updated"


def test_pagerduty_resolved_sets_end() -> None:
    payload = load("pagerduty_v3_incident_triggered.json")
    payload["event"]["event_type"] = "incident.resolved"
    payload["event"]["data"]["status"] = "resolved"
    (d,) = normalize("pagerduty", payload)
    assert d.state == "resolved" and d.ends_at == datetime(2024, 5, 2, 10, 12, 3, 169000, tzinfo=timezone.utc)


def test_pagerduty_non_incident_events_are_accepted_noops() -> None:
    assert normalize("pagerduty", load("pagerduty_v3_service_updated_docs.json")) == []
    note = {"event": {"id": "x", "event_type": "incident.annotated", "resource_type": "incident",
                      "occurred_at": "2020-10-02T18:45:22.169Z",
                      "data": {"incident": {"id": "PGR0VU2", "type": "incident_reference"}, "id": "P2LA89X",
                               "content": "I sure am glad we are using PagerDuty!", "trimmed": False,
                               "type": "incident_note"}}}
    assert normalize("pagerduty", note) == []


@pytest.mark.parametrize("payload, reason", [
    ({"messages": [{"event": "incident.trigger"}]}, "event: expected an object"),  # a v2 webhook
    ({"event": {"event_type": "incident.triggered"}}, "event.data"),
    ({"event": {"data": {"type": "incident", "id": "P1"}}}, "event.event_type"),
    ({"event": {"event_type": "incident.triggered", "data": {"type": "incident", "title": "x"}}}, "event.data.id"),
    ({"event": {"event_type": "incident.triggered", "data": {"type": "incident", "id": "../admin", "title": "x"}}},
     "not a PagerDuty incident id"),
    ({"event": {"event_type": "incident.triggered", "data": {"type": "incident", "id": "P1"}}}, "event.data.title"),
])
def test_pagerduty_malformed(payload: Any, reason: str) -> None:
    with pytest.raises(PayloadError) as err:
        normalize("pagerduty", payload)
    assert reason in str(err.value)


# ------------------------------------------------------------------------------------------------------- jira


def test_jira_issue_created_with_adf_and_attachment() -> None:
    (d,) = normalize("jira", load("jira_issue_created_adf.json"))
    assert d.source == "jira" and d.external_id == "OPS-123" and d.reply_to == {"jira_issue": "OPS-123"}
    assert d.title == "Training job 4412 slow: AllReduce busbw 90 GB/s"
    assert d.text.splitlines() == [
        "Training job 4412 slow: AllReduce busbw 90 GB/s",
        "Since 10:10 UTC busbw dropped on gpu-b017",
        "Suspect mlx5_1 port 1, bundle attached.",
        "JobId=4412 NodeList=gpu-b[017-018]",
        "Dashboard: https://grafana.example.org/d/ib-ports",
        "@Fabric Team please look.",
    ]
    assert d.hosts == ["gpu-b017", "gpu-b018"]
    assert d.devices == ["mlx5_1"] and PortRef(device="mlx5_1", port=1) in d.ports
    assert d.job_id == "4412"
    assert d.bundle_refs == ["https://example.atlassian.net/rest/api/2/attachment/content/10001"]
    assert d.labels["host"] == "gpu-b018"  # the "host:gpu-b018" Jira label
    assert d.labels["jira_project"] == "OPS" and d.labels["jira_priority"] == "High"
    assert d.starts_at == utc(2024, 5, 2, 10, 12, 2).replace(microsecond=612000)
    assert d.state == "open"


def test_jira_documented_example_payload() -> None:
    (d,) = normalize("jira", load("jira_issue_updated_docs.json"))
    assert d.external_id == "JRA-20002" and d.title == "I feel the need for speed"
    assert d.text == "I feel the need for speed\nMake the issue nav load 10x faster"
    assert d.labels["jira_labels"] == "UI,dialogue,move" and d.labels["jira_priority"] == "Minor"
    assert d.starts_at == datetime(2009, 12, 17, 5, 46, 10, 612000, tzinfo=timezone.utc)
    assert d.hosts == [] and d.job_id is None


def test_jira_done_issue_is_closed_and_other_events_ignored() -> None:
    payload = load("jira_issue_created_adf.json")
    payload["webhookEvent"] = "jira:issue_updated"
    payload["issue"]["fields"]["status"]["statusCategory"]["key"] = "done"
    assert normalize("jira", payload)[0].state == "closed"
    payload["webhookEvent"] = "comment_created"
    assert normalize("jira", payload) == []
    payload["webhookEvent"] = "jira:issue_deleted"
    assert normalize("jira", payload) == []


def test_adf_flattening_of_nested_blocks() -> None:
    doc = {"type": "doc", "version": 1, "content": [
        {"type": "heading", "attrs": {"level": 2}, "content": [{"type": "text", "text": "Symptoms"}]},
        {"type": "codeBlock", "content": [{"type": "text", "text": "NCCL WARN NET/IB : Got completion with error 12"}]},
        {"type": "orderedList", "content": [
            {"type": "listItem", "content": [{"type": "paragraph", "content": [
                {"type": "text", "text": "since "}, {"type": "date", "attrs": {"timestamp": "1714644000000"}}]}]},
            {"type": "listItem", "content": [{"type": "paragraph", "content": [
                {"type": "status", "attrs": {"text": "BLOCKED", "color": "red"}}]}]}]},
    ]}
    assert adf_to_text(doc).splitlines() == [
        "Symptoms", "NCCL WARN NET/IB : Got completion with error 12", "since 1714644000000", "BLOCKED"]


@pytest.mark.parametrize("mutate, reason", [
    (lambda p: p.pop("webhookEvent"), "webhookEvent"),
    (lambda p: p.pop("issue"), "issue: expected an object"),
    (lambda p: p["issue"].update(key="OPS-1/../../admin"), "not a Jira issue key"),
    (lambda p: p["issue"]["fields"].pop("summary"), "issue.fields.summary"),
    (lambda p: p["issue"]["fields"].update(description=["not", "adf"]), "Atlassian Document Format"),
    (lambda p: p["issue"]["fields"].update(labels="infiniband"), "labels"),
    (lambda p: p["issue"]["fields"]["attachment"][0].update(content="file:///etc/passwd"), "attachment[0].content"),
])
def test_jira_malformed(mutate, reason: str) -> None:  # noqa: ANN001 - a payload mutator
    payload = load("jira_issue_created_adf.json")
    mutate(payload)
    with pytest.raises(PayloadError) as err:
        normalize("jira", payload)
    assert reason in str(err.value)


# ----------------------------------------------------------------------------------------------------- github


def test_github_issue_opened() -> None:
    (d,) = normalize("github", load("github_issues_opened.json"))
    assert d.source == "github" and d.external_id == "acme/gpu-cluster-ops#57"
    assert d.reply_to == {"github_issue": "acme/gpu-cluster-ops#57"}
    assert d.title == "job 4412 hangs in ncclCommInitRank on gpu-c[101-102]"
    assert "NET/IB : No device found" in d.text
    assert d.hosts == ["gpu-c101", "gpu-c102"] and d.devices == ["ibp12s0"] and d.job_id == "4412"
    assert d.labels["github_labels"] == "nccl,fabric" and d.labels["github_repo"] == "acme/gpu-cluster-ops"
    assert d.state == "open" and d.starts_at == utc(2024, 5, 2, 15, 20, 18)


def test_github_ping_is_a_noop_and_actions() -> None:
    assert normalize("github", load("github_ping.json")) == []
    payload = load("github_issues_opened.json")
    for action in ("edited", "labeled", "reopened"):
        payload["action"] = action
        assert normalize("github", payload)[0].state == "open"
    payload["action"] = "closed"
    payload["issue"]["closed_at"] = "2024-05-02T18:00:00Z"
    (closed,) = normalize("github", payload)
    assert closed.state == "closed" and closed.ends_at == utc(2024, 5, 2, 18)
    for action in ("assigned", "unlabeled", "milestoned", "deleted"):
        payload["action"] = action
        assert normalize("github", payload) == []
    payload["action"] = "created"
    payload["comment"] = {"id": 1, "body": "me too"}  # an issue_comment delivery
    assert normalize("github", payload) == []


@pytest.mark.parametrize("mutate, reason", [
    (lambda p: p.pop("issue"), "not a GitHub issues event"),
    (lambda p: p["issue"].update(number="57"), "issue.number"),
    (lambda p: p["issue"].update(title=""), "issue.title"),
    (lambda p: p["repository"].update(full_name="acme"), "owner/name"),
])
def test_github_malformed(mutate, reason: str) -> None:  # noqa: ANN001 - a payload mutator
    payload = load("github_issues_opened.json")
    mutate(payload)
    with pytest.raises(PayloadError) as err:
        normalize("github", payload)
    assert reason in str(err.value)


def test_unsafe_bundle_mentions_in_prose_are_dropped_visibly() -> None:
    """A ticket is not refused for one bad line, but the reference is neither kept nor silently lost."""
    payload = load("github_issues_opened.json")
    payload["issue"]["body"] = ("bundle=job-4412/ib.tar.gz and bundle=/var/lib/bundles/../../etc/shadow, "
                                "bundle: https://10.0.0.1/admin")
    (d,) = normalize("github", payload)
    assert d.bundle_refs == ["job-4412/ib.tar.gz"]
    note = d.text.splitlines()[-1]
    assert note.startswith("Note: ignored bundle reference in the text")
    assert "/var/lib/bundles/../../etc/shadow" in note and "not a URL" in note


def test_github_push_event_is_refused_with_advice() -> None:
    push = {"ref": "refs/heads/main", "before": "0" * 40, "after": "1" * 40, "commits": [],
            "repository": {"full_name": "acme/gpu-cluster-ops"}}
    with pytest.raises(PayloadError, match="Issues"):
        normalize("github", push)


# ---------------------------------------------------------------------------------------------------- generic


def test_generic_servicenow_like_record() -> None:
    settings = Settings(generic_mapping=SERVICENOW_MAPPING)
    (d,) = normalize("generic", load("generic_servicenow_incident.json"), settings)
    assert d.source == "generic" and d.external_id == "9d385017c611228701d22104cc95c371"
    assert d.title == "RDMA link flapping on compute rack B"
    assert d.hosts == ["gpu-b007", "gpu-b008"]  # the CI's Slurm host list, expanded
    assert d.devices == ["mlx5_0"] and d.ports == [PortRef(device="mlx5_0", port=1)]
    assert d.job_id == "4412"  # job_id=4412 in the description
    assert d.starts_at == utc(2024, 5, 2, 10, 11, 12)  # naive ServiceNow time taken as UTC
    assert d.state == "open" and d.labels["source_state"] == "2"
    assert d.bundle_refs == ["rack-b/2024-05-02"]


def test_generic_missing_required_fields_are_named() -> None:
    settings = Settings(generic_mapping=SERVICENOW_MAPPING)
    payload = load("generic_servicenow_incident.json")
    del payload["result"]["sys_id"]
    payload["result"]["short_description"] = ""
    with pytest.raises(PayloadError) as err:
        normalize("generic", payload, settings)
    assert "external_id (path 'result.sys_id')" in str(err.value)
    assert "title (path 'result.short_description')" in str(err.value)


def test_generic_without_mapping_reads_draft_shaped_payloads() -> None:
    payload = {"external_id": "run-77", "title": "busbw low", "text": "on gpu-a[001-002]",
               "labels": {"cluster": "a", "rack": 3}, "starts_at": 1714644000, "state": "firing",
               "devices": "mlx5_0,mlx5_1"}
    (d,) = normalize("generic", payload)
    assert d.external_id == "run-77" and d.hosts == ["gpu-a001", "gpu-a002"]
    assert d.labels == {"cluster": "a", "rack": "3"} and d.state == "firing"
    assert d.devices == ["mlx5_0", "mlx5_1"] and d.starts_at == utc(2024, 5, 2, 10)
    with pytest.raises(PayloadError, match="title"):
        normalize("generic", {"external_id": "x"})


def test_generic_list_index_paths_and_bad_mapping() -> None:
    settings = Settings(generic_mapping={"external_id": "items.0.id", "title": "items.0.name",
                                         "hosts": "items.0.hosts"})
    (d,) = normalize("generic", {"items": [{"id": 5, "name": "ib errors", "hosts": ["gpu-a1", "gpu-b[1-2]"]}]},
                     settings)
    assert d.external_id == "5" and d.hosts == ["gpu-a1", "gpu-b1", "gpu-b2"]
    with pytest.raises(PayloadError, match="unknown field"):
        normalize("generic", {}, Settings(generic_mapping={"external_id": "a", "title": "b", "severity": "c"}))
    with pytest.raises(PayloadError, match="hosts"):
        normalize("generic", {"items": [{"id": 5, "name": "x", "hosts": {"a": 1}}]}, settings)


# ---------------------------------------------------------------------------------------------------- _extract


@pytest.mark.parametrize("text, hosts, devices, job", [
    ("gpu-a003/mlx5_2 port 1 flaps during job 4412", ["gpu-a003"], ["mlx5_2"], "4412"),
    ("symbol_error = 3 on gpu-d041 mlx5_6 port 1 (lid 262).", ["gpu-d041"], ["mlx5_6"], None),
    ("JobId=4412_3 NodeList=gpu-a[001-003],gpu-b7", ["gpu-a001", "gpu-a002", "gpu-a003", "gpu-b7"], [], "4412_3"),
    ("slurm_job_id: 99 host=alpha", ["alpha"], [], "99"),
    ("job_id=123 errors on mlx5_0:1 and ibp12s0 on node17", ["node17"], ["mlx5_0", "ibp12s0"], "123"),
    ("RoCE: enp65s0f0np0 pause storm on dgx-h100-042", ["dgx-h100-042"], ["enp65s0f0np0"], None),
    # prose, versions, URLs and device-like words are not hosts
    ("AllReduce busbw 90 GB/s on 4 nodes; NCCL 2.18.3-1, CUDA-12, utf-8, GPU-3, rank-5", [], [], None),
    ("see https://grafana.example.org/d/abc-123 and v2.1-rc3", [], [], None),
])
def test_extract_text(text: str, hosts: list[str], devices: list[str], job: str | None) -> None:
    found = extract_text(text)
    assert found.hosts == hosts and found.devices == devices and found.job_id == job


def test_extract_ports_bind_to_their_host_and_device() -> None:
    found = extract_text("gpu-a003 mlx5_2:1 and gpu-a004/mlx5_3 port 2; exporter on port 9100")
    assert found.ports == [PortRef(host="gpu-a003", device="mlx5_2", port=1),
                           PortRef(host="gpu-a004", device="mlx5_3", port=2)]


def test_extract_is_linear_on_hostile_text() -> None:
    # would take minutes with unbounded, nested quantifiers; must stay well under a second each
    for text in ("a1" + " " * 50_000 + "x", "x[1-2]" * 20_000, "gpu-a1/mlx5_1 , port " * 5_000, "a-" * 50_000):
        extract_text(text)


@pytest.mark.parametrize("value, expected", [
    ("2018-08-03T09:52:26.739266876+02:00", datetime(2018, 8, 3, 7, 52, 26, 739266, tzinfo=timezone.utc)),
    ("2009-12-16T23:46:10.612-0600", datetime(2009, 12, 17, 5, 46, 10, 612000, tzinfo=timezone.utc)),
    ("2020-10-02T18:45:22.169Z", datetime(2020, 10, 2, 18, 45, 22, 169000, tzinfo=timezone.utc)),
    ("0001-01-01T00:00:00Z", None),
    (1525698237764, datetime(2018, 5, 7, 13, 3, 57, 764000, tzinfo=timezone.utc)),  # Jira's ms timestamp
    (None, None),
])
def test_parse_time(value: Any, expected: datetime | None) -> None:
    assert parse_time(value, "t") == expected


# ------------------------------------------------------------------------------------------------- robustness

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=30)
    | st.sampled_from(["0001-01-01T00:00:00Z", "gpu-a[3-1]", "../x", "/abs", "doc", "firing", "4", "opened",
                       "incident", "incident.triggered", "jira:issue_updated", "text"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
PAYLOAD_FILES = sorted(p.name for p in PAYLOADS.glob("*.json"))


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for k, v in items:
        out += _paths(v, (*prefix, k))
    return out


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(PAYLOAD_FILES), picks=st.lists(st.tuples(st.integers(0, 10**6), JSON_VALUES),
                                                              min_size=1, max_size=3))
def test_normalizers_only_raise_payload_error(name: str, picks: list[tuple[int, Any]]) -> None:
    """Any documented payload with any subtree replaced gives drafts or a PayloadError, never another exception
    (which the service would answer with a 500 and the sender would retry forever)."""
    payload = load(name)
    for index, value in picks:
        paths = _paths(payload)
        if not paths:
            break
        path = paths[index % len(paths)]
        target = payload
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    hook = name.split("_")[0]
    try:
        drafts = normalize(hook, payload, Settings(generic_mapping=SERVICENOW_MAPPING))
    except PayloadError as exc:
        assert str(exc)
    else:
        assert all(isinstance(d, IncidentDraft) for d in drafts)
