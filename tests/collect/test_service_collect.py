"""The service collects from an alert's hosts before it triages, for the sources it is told to (off by default),
through the same fan-out as ``diagnose collect --hosts`` (here a stub ssh running the collector per fake host)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.service.bench import alertmanager_payload
from diagnose.service.collecting import alert_hosts
from diagnose.service.settings import Settings
from diagnose.service.worker import dedup_key
from tests.collect.cluster import Cluster, port_down_hosts
from tests.service.conftest import make  # noqa: F401 - the fixture: a worker over a SQLite store


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    c = Cluster(tmp_path / "cluster")
    port_down_hosts(c)
    monkeypatch.setenv("PATH", c.path)
    return c


def _alert(store: Any, host: str) -> None:
    from diagnose.service.hooks import HOOKS

    payload = alertmanager_payload(4, host=host)
    drafts = HOOKS["alertmanager"].normalize(payload, Settings(_env_file=None))
    store.accept_request("alertmanager", dedup_key(drafts), {"content-type": "application/json"}, json.dumps(payload))


def test_an_alert_from_a_collecting_source_is_triaged_with_its_hosts_evidence(cluster: Cluster, make: Any) -> None:  # noqa: F811
    worker, store = make(collect_sources="alertmanager,jira", collect_via="ssh", collect_interval_s=0,
                         collect_timeout_s=60)
    assert worker.settings.collect_sources == ["alertmanager", "jira"]
    _alert(store, "lima")
    worker.run_until_idle()
    [inc] = store.list_incidents()
    assert inc.top_cause() == "link.port_down"
    cause = inc.diagnosis["causes"][0]
    assert cause["location"]["host"] == "lima"
    notes = store.incident_extras(inc.id)["evidence_notes"]
    assert "collected through ssh from 1 of 1 hosts: lima" in notes
    assert not [n for n in notes if n.startswith("no evidence found")]
    [call] = cluster.calls("ssh")
    assert call[-2] == "lima" and call[-1].startswith("diagnose collect --out - --interval 0 --timeout 60")
    assert (worker.workdir(inc.id) / "collected" / "lima" / "manifest.json").is_file()


def test_collecting_is_off_unless_the_source_is_named(cluster: Cluster, make: Any) -> None:  # noqa: F811
    worker, store = make(collect_sources="jira", collect_via="ssh")
    _alert(store, "lima")
    worker.run_until_idle()
    [inc] = store.list_incidents()
    assert cluster.calls("ssh") == [] and not (worker.workdir(inc.id) / "collected").exists()
    assert inc.top_cause() != "link.port_down"


def test_an_unreachable_host_or_a_name_that_is_no_host_is_a_note_not_a_failure(cluster: Cluster, make: Any) -> None:  # noqa: F811
    cluster.unreachable("mike")
    worker, store = make(collect_sources="alertmanager", collect_via="ssh", collect_timeout_s=60)
    _alert(store, "mike")
    worker.run_until_idle()
    [inc] = store.list_incidents()
    assert inc.status != "failed" and inc.diagnosis is not None
    notes = store.incident_extras(inc.id)["evidence_notes"]
    assert any("collected through ssh from 0 of 1 hosts; mike failed (ssh: connect to host mike" in n for n in notes)
    assert alert_hosts(["gpu-a001:9100", "lima;reboot", "gpu-a001", "b", "c"], 2) == (["gpu-a001", "b"],
                                                                                       ["lima;reboot", "c"])
