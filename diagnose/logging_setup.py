"""structlog configuration: console for people, JSON for services. Logs go to stderr."""

from __future__ import annotations

import logging
import sys

import structlog


class _LiveStderr:
    """``sys.stderr`` as it is at each write, not as it was when logging was configured: a caller that swaps it
    (a test's capture, a daemon redirecting its output) never leaves the loggers writing to a closed stream."""

    def write(self, s: str) -> int:
        return sys.stderr.write(s)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


_STDERR = _LiveStderr()


def configure(fmt: str = "console", level: str = "warning") -> None:
    lvl = getattr(logging, level.upper(), logging.WARNING)
    processors: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor
    if fmt == "json":
        processors.append(structlog.processors.dict_tracebacks)
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    _stdlib_through_structlog(renderer, lvl)
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=_STDERR),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


_HANDLER_NAME = "diagnose-structlog"
_SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def _stdlib_through_structlog(renderer: structlog.types.Processor, lvl: int) -> None:
    """Standard-library loggers (uvicorn's server and access lines, libraries) render like structlog's own events:
    in JSON mode every line on stderr is JSON. One handler on the root logger, replaced on each call."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, structlog.processors.add_log_level,
                           structlog.processors.TimeStamper(fmt="iso", utc=True)],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(_STDERR)  # type: ignore[arg-type]
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for h in list(root.handlers):
        if h.get_name() == _HANDLER_NAME:
            root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(lvl)
    for name in _SERVER_LOGGERS:  # a server's own logging config (uvicorn's default) gives them handlers of their
        lg = logging.getLogger(name)  # own and stops them at themselves: send them to the root handler
        lg.handlers.clear()
        lg.propagate = True
        lg.disabled = False
