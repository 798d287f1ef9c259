"""Logs: structlog events and the standard library's (uvicorn's server and access lines) render alike."""

from __future__ import annotations

import json

import pytest

from diagnose.logging_setup import configure


def test_in_json_mode_every_stdlib_line_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    import logging.config

    import structlog
    import uvicorn.config

    logging.config.dictConfig(uvicorn.config.LOGGING_CONFIG)  # a server that set up its own loggers first
    configure("json", "info")
    try:
        logging.getLogger("uvicorn.error").info("Started server process [%d]", 4242)
        logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "POST", "/hooks", "1.1", 202)
        structlog.get_logger("diagnose.test").warning("store_opened", backend="sqlite")
        lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        events = [json.loads(ln) for ln in lines]
        assert [e["event"] for e in events] == ["Started server process [4242]",
                                                '127.0.0.1:5 - "POST /hooks HTTP/1.1" 202', "store_opened"]
        assert events[0]["logger"] == "uvicorn.error" and events[0]["level"] == "info"
        configure("json", "info")  # configuring again replaces the handler: one line per record, not two
        logging.getLogger("x").warning("once")
        assert len([ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]) == 1
    finally:
        configure("console", "warning")
