"""Route wiring: unconfigured platforms answer 503 and run nothing; the service's own worker end to end."""

from __future__ import annotations

import shutil
import threading
import uuid
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from .support import (
    BAD_CABLE,
    ChatService,
    StandIn,
    UvicornThread,
    chat_settings,
    slack_sign,
    standin_handler,
    teams_sign,
)


def test_unconfigured_platforms_answer_503(make_service: Any) -> None:
    bare: ChatService = make_service(SLACK_SIGNING_SECRET=None, SLACK_BOT_TOKEN=None, teams_secret=None,
                                     mattermost_token=None)
    body, headers = bare.slack_command("recent")
    r = bare.post("/slack/events", body, headers)
    assert r.status_code == 503 and "not configured" in r.text
    act = bare.teams_activity("recent", act_id=uuid.uuid4().hex)
    r = bare.post("/teams/messages", act, {"Content-Type": "application/json", **teams_sign(act)})
    assert r.status_code == 503 and "not configured" in r.text
    mm_body, mm_headers = bare.mattermost_command("recent")
    assert bare.post("/mattermost/command", mm_body, mm_headers).status_code == 503
    assert bare.post("/mattermost/actions", b"{}", {"Content-Type": "application/json"}).status_code == 503


def test_half_configured_slack_and_a_non_base64_teams_secret_are_refused(make_service: Any) -> None:
    half: ChatService = make_service(SLACK_BOT_TOKEN=None, teams_secret="not base64!")
    body, headers = half.slack_command("recent")
    assert half.post("/slack/events", body, headers).status_code == 503
    act = half.teams_activity("recent", act_id=uuid.uuid4().hex)
    assert half.post("/teams/messages", act, {"Content-Type": "application/json", **teams_sign(act)}).status_code == 503


def test_oversized_body_is_refused_before_parsing(svc: ChatService) -> None:
    body = b"text=" + b"x" * (svc.settings.max_body_bytes + 1)
    r = svc.post("/slack/events", body, {"Content-Type": "application/x-www-form-urlencoded", **slack_sign(body)})
    assert r.status_code == 413


@pytest.mark.slow
def test_job_through_the_service_worker_and_bundle_store(tmp_path: Any) -> None:
    """`/diagnose job <id>` with the service's real worker: bundle store lookup, triage, stored diagnosis."""
    pytest.importorskip("diagnose.service.grouping", reason="the topology grouping module is not there yet")
    from diagnose.service.app import create_app

    si = StandIn("")
    srv = ThreadingHTTPServer(("127.0.0.1", 0), standin_handler(si))
    si.base_url = f"http://127.0.0.1:{srv.server_address[1]}"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    bundles = tmp_path / "bundles"
    shutil.copytree(BAD_CABLE, bundles / "50213")
    settings = chat_settings(tmp_path / "data", si, bundles=bundles)
    app = create_app(settings, start_worker=True)
    server = UvicornThread(app).start()
    try:
        svc = ChatService(server.base_url, app.state.store, settings, si, settings.store_url(), server,
                          worker=None)  # type: ignore[arg-type]
        r = svc.post("/slack/events", *svc.slack_command("job 50213 allreduce busbw dropped", response_key="real"))
        assert r.status_code == 200
        rec = si.wait_for(lambda x: x.path == "/slack/response/real", timeout=90)
        assert "link.bad_cable" in str(rec.body["blocks"])
    finally:
        server.stop()
        srv.shutdown()
