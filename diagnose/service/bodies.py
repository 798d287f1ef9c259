"""Request bodies read with a byte limit, for every endpoint (hooks and chat alike).

The limit is counted while the body streams in: a missing or lying ``Content-Length``, or a chunked body,
changes nothing, and nothing past the limit is ever read into memory. A declared length over the limit is
refused before the first byte is read.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request


class TooLarge(Exception):
    """The body is larger than the endpoint's limit (answer 413)."""


async def read_capped(request: Request, limit: int) -> bytes:
    """The raw body, refusing more than ``limit`` bytes whatever Content-Length says (chunked bodies too)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise TooLarge()
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > limit:
            raise TooLarge()
    return bytes(buf)


class Undecodable(ValueError):
    """A body that is not the JSON it should be: not UTF-8, not JSON, nested too deep, a number too long."""


def loads(raw: bytes | str) -> Any:
    """``json.loads`` whose every failure on hostile input is :class:`Undecodable` with a one-line reason.

    Besides malformed JSON that covers bytes that are not UTF-8, nesting deeper than the interpreter's recursion
    limit (``RecursionError``) and integers longer than Python converts (``ValueError``, 4,300 digits by
    default).
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise Undecodable(f"body is not UTF-8: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Undecodable(f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError:
        raise Undecodable("body is not usable JSON: nested too deep") from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise Undecodable(f"body is not usable JSON: {str(exc)[:200]}") from None
