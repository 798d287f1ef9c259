"""Fixtures for the chat bot tests (the helpers they use are in ``support``).

- ``standin``: the Slack Web API / ``response_url`` stand-in that records what the bot posted.
- ``make_service(**settings)``: the service under uvicorn on a free 127.0.0.1 port, with its SQLite store.
- ``svc``: one such service shared by a test module.
- ``bad_cable_diagnosis``: a real diagnosis of a fixture bundle (the triage JSON contract).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from .support import BAD_CABLE, ChatService, ChatWorker, StandIn, UvicornThread, chat_settings, standin_handler


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    si = StandIn("")
    srv = ThreadingHTTPServer(("127.0.0.1", 0), standin_handler(si))
    si.base_url = f"http://127.0.0.1:{srv.server_address[1]}"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield si
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def make_service(tmp_path_factory: pytest.TempPathFactory, standin: StandIn) -> Iterator[Callable[..., ChatService]]:
    from diagnose.service.app import create_app

    started: list[ChatService] = []

    def make(**overrides: Any) -> ChatService:
        data_dir = tmp_path_factory.mktemp("chat-service")
        settings = chat_settings(data_dir, standin, **overrides)
        app = create_app(settings, start_worker=False)
        server = UvicornThread(app).start()
        worker = ChatWorker(app.state.store)
        worker.thread.start()
        svc = ChatService(server.base_url, app.state.store, settings, standin, settings.store_url(), server, worker)
        started.append(svc)
        return svc

    yield make
    for svc in started:
        svc.worker.stop_evt.set()
        svc.server.stop()
        svc.worker.thread.join(30)


@pytest.fixture(scope="module")
def svc(make_service: Callable[..., ChatService]) -> ChatService:
    return make_service()


@pytest.fixture(scope="session")
def bad_cable_diagnosis() -> dict[str, Any]:
    """A real diagnosis of a fixture bundle, as the worker stores it (the triage JSON contract)."""
    from diagnose.pipeline import triage

    d = triage([str(BAD_CABLE)], "AllReduce busbw dropped to 90 GB/s on job 50213")
    return d.model_dump(mode="json")
