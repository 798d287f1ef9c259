"""PyTorch ``torch.distributed`` / ProcessGroupNCCL log lines inside any job log.

The message body matters, the prefix varies: glog ``[E1203 12:00:00.123456 1234 ProcessGroupNCCL.cpp:1234]``
(or ``[E ProcessGroupNCCL.cpp:458]``), the global-rank prefix ``[rank3]:``, torchrun ``[default0]:``, srun
``-l`` ``12: ``, OpenMPI ``[1,0]<stderr>:``. Records:

* :class:`WatchdogTimeout` - ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=.., OpType=..,
  NumelIn=.., NumelOut=.., Timeout(ms)=..) ran for N milliseconds before timing out.``
* :class:`DesyncReport` - the ``TORCH_NCCL_DESYNC_DEBUG`` report naming lagging/dead/mismatched ranks.
* :class:`PgError` - NCCL errors (``NCCL error in: ...`` with ``ncclXxxError:`` / ``Last error:`` follow-up
  lines), watchdog exits, ``DistBackendError``, "taking the entire process down", heartbeat-monitor timeouts.
* :class:`CudaError` - CUDA runtime errors in their PyTorch, CUDA-sample and NCCL spellings.

``rank`` is the global rank from a ``[rankN]:`` prefix when present, else the rank the message names
(``[Rank N]`` / ``[PG .. Rank N]``). ``[defaultN]:`` (torchrun local rank) is not used as a rank.
Pure: no I/O, never raises.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip

FORMAT = "pytorch_log"
STREAMABLE = True  # line-oriented: a large file is parsed chunk by chunk
MIXABLE = True

# ----------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchdogTimeout(Record):
    """A ProcessGroupNCCL watchdog timeout on one collective."""

    rank: int | None
    seq: int | None
    op_type: str | None
    numel_in: int | None
    numel_out: int | None
    timeout_ms: int | None
    ran_ms: int | None
    pg: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DesyncReport(Record):
    """The desync-debug verdict naming the ranks that fell out of step."""

    rank: int | None
    lagging_ranks: tuple[int, ...]
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PgError(Record):
    """A process-group level failure."""

    rank: int | None
    kind: str
    message: str
    nccl_error: str | None
    last_error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaError(Record):
    """A CUDA runtime error as reported by PyTorch, CUDA samples or NCCL."""

    code: int | None
    message: str


PG_ERROR_KINDS = ("nccl_error", "watchdog_exception", "dist_backend_error", "taking_down", "heartbeat")

# ----------------------------------------------------------------------------------------------------------------
# Vocabulary

# ncclGetErrorString() texts (NVIDIA/nccl src/init.cc), normalised without their "(run with ...)" tails.
NCCL_ERROR_STRINGS = (
    "unhandled system error",
    "remote process exited or there was a network error",
    "unhandled cuda error",
    "invalid usage",
    "internal error",
    "invalid argument",
    "NCCL operation in progress",
    "no error",
)
NCCL_CODE_NAMES = {
    "ncclUnhandledCudaError": "unhandled cuda error",
    "ncclSystemError": "unhandled system error",
    "ncclInternalError": "internal error",
    "ncclInvalidArgument": "invalid argument",
    "ncclInvalidUsage": "invalid usage",
    "ncclRemoteError": "remote process exited or there was a network error",
    "ncclInProgress": "NCCL operation in progress",
}

# CUDA runtime cudaError_t values for the errors seen on GPU clusters.
CUDA_ERROR_NAMES = {
    "cudaErrorMemoryAllocation": 2,
    "cudaErrorInitializationError": 3,
    "cudaErrorInsufficientDriver": 35,
    "cudaErrorDevicesUnavailable": 46,
    "cudaErrorNoDevice": 100,
    "cudaErrorInvalidDevice": 101,
    "cudaErrorECCUncorrectable": 214,
    "cudaErrorNvlinkUncorrectable": 220,
    "cudaErrorIllegalAddress": 700,
    "cudaErrorAssert": 710,
    "cudaErrorLaunchFailure": 719,
    "cudaErrorNotSupported": 801,
    "cudaErrorSystemNotReady": 802,
    "cudaErrorSystemDriverMismatch": 803,
    "cudaErrorUnknown": 999,
    # driver API spellings
    "CUDA_ERROR_OUT_OF_MEMORY": 2,
    "CUDA_ERROR_NOT_INITIALIZED": 3,
    "CUDA_ERROR_NO_DEVICE": 100,
    "CUDA_ERROR_INVALID_DEVICE": 101,
    "CUDA_ERROR_ECC_UNCORRECTABLE": 214,
    "CUDA_ERROR_NVLINK_UNCORRECTABLE": 220,
    "CUDA_ERROR_ILLEGAL_ADDRESS": 700,
    "CUDA_ERROR_LAUNCH_FAILED": 719,
    "CUDA_ERROR_NOT_SUPPORTED": 801,
    "CUDA_ERROR_SYSTEM_NOT_READY": 802,
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": 803,
    "CUDA_ERROR_UNKNOWN": 999,
}
CUDA_ERROR_MESSAGES = {
    "out of memory": 2,
    "initialization error": 3,
    "cuda driver version is insufficient for cuda runtime version": 35,
    "cuda-capable device(s) is/are busy or unavailable": 46,
    "no cuda-capable device is detected": 100,
    "invalid device ordinal": 101,
    "uncorrectable ecc error encountered": 214,
    "an illegal memory access was encountered": 700,
    "device-side assert triggered": 710,
    "unspecified launch failure": 719,
    "operation not supported": 801,
    "system not yet initialized": 802,
    "system has unsupported display driver / cuda driver combination": 803,
    "unknown error": 999,
}

# ----------------------------------------------------------------------------------------------------------------
# Prefixes

_MPI_TAG_RE = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?")
_SRUN_LABEL_RE = re.compile(r"^\s{0,4}\d{1,6}: ")
_RANK_PREFIX_RE = re.compile(r"^\[rank(\d{1,7})\]:\s?")
_DEFAULT_PREFIX_RE = re.compile(r"^\[default\d{1,7}\]:\s?")
_LAUNCHER_IDX_RE = re.compile(r"^\[\d{1,9}\] (?=\S)")
_GLOG_RE = re.compile(
    r"^\[?[IWEF](?:\d{3,4} \d\d:\d\d:\d\d\.\d{1,9})?(?: +\d{1,10})? +[\w./-]{1,200}:\d{1,7}\] ?"
)
_PY_LOG_RE = re.compile(r"^[IWEF]\d{3,4} \d\d:\d\d:\d\d\.\d{1,9} \d{1,10} [\w./-]{1,200}:\d{1,7}\] ?")


@dataclass(slots=True)
class _L:
    raw: str
    body: str
    prefix_rank: int | None
    entry: bool  # the line starts a new log entry (had a glog-style prefix)


_SKIP = _L(raw="", body="", prefix_rank=None, entry=False)


def _peel(raw: str) -> _L:
    s = raw.rstrip("\r\n")
    rank: int | None = None
    entry = False
    for _ in range(6):
        m = _MPI_TAG_RE.match(s) or _SRUN_LABEL_RE.match(s)
        if m:
            s = s[m.end() :]
            continue
        m = _RANK_PREFIX_RE.match(s)
        if m:
            rank = _int(m.group(1))
            s = s[m.end() :]
            continue
        m = _DEFAULT_PREFIX_RE.match(s)
        if m:
            s = s[m.end() :]
            continue
        m = _GLOG_RE.match(s) or _PY_LOG_RE.match(s)
        if m:
            entry = True
            s = s[m.end() :]
            continue
        m = _LAUNCHER_IDX_RE.match(s)
        if m:
            s = s[m.end() :]
            continue
        break
    return _L(raw=raw, body=s, prefix_rank=rank, entry=entry)


def _int(s: str | None) -> int | None:
    if s is None:
        return None
    s = s.strip()
    if not s or len(s) > 18 or not s.lstrip("-").isdigit():
        return None
    try:
        return int(s)
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------------------------------
# Message patterns

_PG_RE = re.compile(r"\[(?P<pg>PG [^\]]{1,200}?) Rank (?P<rank>\d{1,7})\]")
_MSG_RANK_RE = re.compile(r"\[Rank (?P<rank>\d{1,7})\]\s*Watchdog caught")
_ANY_RANK_RE = re.compile(r"\[Rank (?P<rank>\d{1,7})\]")

_WATCHDOG_RE = re.compile(r"Watchdog caught collective operation timeout")
_F_SEQ = re.compile(r"SeqNum=(\d{1,18})")
_F_OP = re.compile(r"OpType=([A-Za-z_][A-Za-z0-9_]*)")
_F_IN = re.compile(r"NumelIn=(-?\d{1,18})")
_F_OUT = re.compile(r"NumelOut=(-?\d{1,18})")
_F_TIMEOUT = re.compile(r"Timeout\(ms\)=(\d{1,18})")
_F_RAN = re.compile(r"ran for (\d{1,18}) milliseconds")
_WORK_AT_RE = re.compile(r"detected by watchdog at work: (\d{1,18})")

_TIMEOUT_AT_RE = re.compile(
    r"\[(?P<rank>\d{1,7})\] Timeout at collective: (?P<col>[^,]*), #(?P<seq>\d{1,18})"
)
_NEVER_JOINED_RE = re.compile(
    r"To our best knowledge, ranks \[(?P<ranks>[\d,\s]*)\] are the lagging ranks that caused this timeout\.?(?P<rest>.*)$"
)
_DESYNC_HEAD_RE = re.compile(r"the lagging/dead/mismatched ranks that caused the desync are:?")
_DESYNC_ITEM_RE = re.compile(
    r"^\s*(?:-\s*)?\[(?P<ranks>[\d,\s]+)\] (?P<what>joined but didn't finish collective|finished collective)"
)

_WATCHDOG_EXIT_RE = re.compile(
    r"(?:Process group|NCCL) watchdog thread terminated with exception:?\s*(?P<what>.*)$"
)
_NCCL_ERROR_IN_RE = re.compile(r"NCCL error in: (?P<loc>[^,]{0,300}), (?P<err>.*)$")
_NCCL_ERROR_RE = re.compile(r"NCCL [Ee]rror(?: \d{1,4})?: (?P<err>.*)$")
_NCCL_CODE_RE = re.compile(
    r"\b(?P<name>nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|"
    r"InvalidUsage|RemoteError|InProgress))\b"
)
_NCCL_CODE_LINE_RE = re.compile(
    r"^\s*(?P<name>nccl(?:UnhandledCudaError|SystemError|InternalError|"
    r"InvalidArgument|InvalidUsage|RemoteError|InProgress)):"
)
_ABORTED_RE = re.compile(r"NCCL communicator was aborted")
_LAST_ERROR_RE = re.compile(r"Last error:\s*(?P<rest>.*)$")
_DIST_BACKEND_RE = re.compile(r"DistBackendError")
_TAKING_DOWN_RE = re.compile(r"To avoid data inconsistency, we are taking the entire process down")
_HEARTBEAT_RE = re.compile(r"Heartbeat monitor timed out|watchdog got stuck for \d+ seconds")
_TERMINATE_RE = re.compile(r"^terminate called after throwing an instance of")

_CUDA_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"cuda runtime error \((?P<code>\d{1,6})\) : (?P<msg>.+?)(?: at \S+:\d+)?$"),
    re.compile(r"THCudaCheck FAIL .*error=(?P<code>\d{1,6}) : (?P<msg>.+)$"),
    re.compile(r"code=(?P<code>\d{1,6})\((?P<name>cuda\w+)\)"),
    re.compile(r"(?i:cuda failure)(?: (?P<code>\d{1,6})| \S+:\d+)? '(?P<msg>[^']*)'"),
    re.compile(r"CUDA error: (?P<msg>.+)$"),
    re.compile(r"\bCUDA error (?P<code>\d{1,6})\b(?:[:,]?\s*(?P<msg>.*))?$"),
    re.compile(r"\b(?P<name>cudaError[A-Z]\w*)(?::\s*(?P<msg>.+))?"),
    re.compile(r"\b(?P<name>CUDA_ERROR_[A-Z_]+)\b(?::\s*(?P<msg>.+))?"),
    re.compile(r"(?i:cuda).*\bError (?P<code>\d{1,6}): (?P<msg>.+)$"),
)


def _clean_nccl_error(err: str) -> str | None:
    e = err.strip()
    e = re.split(r",\s*NCCL version\b", e, maxsplit=1)[0]
    e = re.split(r"\s+nccl[A-Z]\w*:", e, maxsplit=1)[0]
    e = re.sub(r"\s*\(run with NCCL_DEBUG=\w+ for details\)", "", e)
    e = re.sub(r"\s*-\s*please report this issue to the NCCL developers.*$", "", e)
    e = e.strip().rstrip(".,").strip()
    low = e.lower()
    for known in NCCL_ERROR_STRINGS:
        if low.startswith(known.lower()):
            return known
    return e or None


def _nccl_error_of(body: str) -> str | None:
    m = _NCCL_ERROR_IN_RE.search(body)
    if m:
        return _clean_nccl_error(m.group("err"))
    m = _NCCL_ERROR_RE.search(body)
    if m:
        return _clean_nccl_error(m.group("err"))
    m = _NCCL_CODE_RE.search(body)
    if m:
        return NCCL_CODE_NAMES.get(m.group("name"))
    return None


def _cuda_error(body: str) -> tuple[int | None, str] | None:
    for pat in _CUDA_PATTERNS:
        m = pat.search(body)
        if not m:
            continue
        gd = m.groupdict()
        code = _int(gd.get("code"))
        name = gd.get("name")
        msg = (gd.get("msg") or "").strip()
        msg = re.sub(r"\s*\(run with NCCL_DEBUG=\w+ for details\)", "", msg).strip()
        if code is None and name:
            code = CUDA_ERROR_NAMES.get(name)
        if code is None and msg:
            code = CUDA_ERROR_MESSAGES.get(msg.lower().rstrip("."))
        message = msg or name or body.strip()
        if code is None and name is None and not msg:
            continue
        return code, message
    return None


def _rank_of(lp: _L) -> int | None:
    if lp.prefix_rank is not None:
        return lp.prefix_rank
    m = _PG_RE.search(lp.body)
    if m:
        return _int(m.group("rank"))
    m = _ANY_RANK_RE.search(lp.body)
    if m:
        return _int(m.group("rank"))
    return None


# ----------------------------------------------------------------------------------------------------------------
# Sniff

_SNIFF_STRONG_RE = re.compile(
    r"Watchdog caught collective operation timeout|ProcessGroupNCCL|NCCL error in:|DistBackendError|"
    r"watchdog thread terminated with exception|taking the entire process down|Heartbeat monitor timed out|"
    r"Some NCCL operations have failed or timed out|NCCL communicator was aborted|"
    r"lagging/dead/mismatched ranks|\] Timeout at collective: |RuntimeError: NCCL [Ee]rror|"
    r"RuntimeError: CUDA error|Unexpected error from cudaGetDeviceCount|cuda runtime error \(\d+\)|"
    r"torch\.(?:cuda\.)?OutOfMemoryError|ChildFailedError|^\[rank\d+\]:\[[IWEF]\d{4} ",
)
_SNIFF_WEAK_RE = re.compile(r"CUDA error|[Cc]uda failure|cudaError\w+|Traceback \(most recent call last\)")


def sniff(head: str) -> int:
    try:
        strong = weak = 0
        for ln in head.split("\n"):
            if _SNIFF_STRONG_RE.search(ln):
                strong += 1
                if strong >= 3:
                    break
            elif _SNIFF_WEAK_RE.search(ln):
                weak += 1
        if strong >= 3:
            return 90
        if strong == 2:
            return 80
        if strong == 1:
            return 65
        if weak:
            return min(35, 15 + 10 * weak)
        return 0
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ----------------------------------------------------------------------------------------------------------------
# Parse


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        _parse_into(text, source, host, records, problems)
    except Exception as exc:  # pragma: no cover - never raise: keep what was parsed, report it
        problems.append(f"pytorch_log parser stopped early: {type(exc).__name__}: {exc}")
    records.sort(key=lambda r: r.line)
    return ParseResult(format=FORMAT, records=records, problems=problems)


def _looks_like_new_entry(lp: _L) -> bool:
    b = lp.body.lstrip()
    return (
        lp.entry
        or b.startswith(
            ("Traceback (most recent call last)", "Exception raised from", "frame #", "terminate called")
        )
        or _NCCL_ERROR_IN_RE.search(b) is not None
        or _WATCHDOG_RE.search(b) is not None
    )


def _follow_up(
    lines: list[_L], i: int, nccl_error: str | None, last_error: str | None, consumed: set[int]
) -> tuple[str | None, str | None]:
    """Read the ``ncclXxxError: ...`` / ``Last error:`` lines that continue an NCCL error message."""
    j = i + 1
    n = len(lines)
    seen = 0
    while j < n and seen < 4:
        lp = lines[j]
        b = lp.body.strip()
        if not b:
            j += 1
            seen += 1
            continue
        m = _NCCL_CODE_LINE_RE.match(b)
        if m:
            consumed.add(j)
            if nccl_error is None:
                nccl_error = NCCL_CODE_NAMES.get(m.group("name"))
            lm = _LAST_ERROR_RE.search(b)
            if lm and lm.group("rest").strip():
                last_error = last_error or lm.group("rest").strip()
                break
            j += 1
            seen += 1
            continue
        lm = _LAST_ERROR_RE.match(b)
        if lm:
            consumed.add(j)
            rest = lm.group("rest").strip()
            if rest:
                last_error = last_error or rest
                break
            k = j + 1
            while k < n and not lines[k].body.strip() and k - j <= 2:
                k += 1
            if k < n and not _looks_like_new_entry(lines[k]):
                consumed.add(k)
                last_error = last_error or lines[k].body.strip()
            break
        break
    return nccl_error, last_error


def _parse_into(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    raw_lines = text.split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()
    # NCCL's own INFO lines are most of a job log and never carry a PyTorch message: skip them unpeeled
    lines = [_SKIP if " NCCL INFO " in r else _peel(r) for r in raw_lines]
    consumed: set[int] = set()

    standalone: list[WatchdogTimeout] = []
    embedded: list[WatchdogTimeout] = []
    pg_hint: dict[tuple[int | None, int | None], str] = {}
    last_timeout: tuple[int, int | None] | None = None  # (line index, rank) of the last watchdog timeout
    last_timeout_at: tuple[int, int | None] | None = None  # "[r] Timeout at collective" (line index, rank)
    desync_open: tuple[int, int | None, list[str], list[int]] | None = None  # (idx, rank, details, ranks)

    def close_desync() -> None:
        nonlocal desync_open
        if desync_open is None:
            return
        idx, rank, details, ranks = desync_open
        desync_open = None
        lp = lines[idx]
        records.append(
            DesyncReport(
                source=source,
                line=idx + 1,
                text=clip(lp.raw),
                host=host,
                rank=rank,
                lagging_ranks=tuple(dict.fromkeys(ranks)),
                detail="; ".join(details) if details else lp.body.strip(),
            )
        )

    for i, lp in enumerate(lines):
        body = lp.body
        if not body.strip():
            continue
        if desync_open is not None:
            m = _DESYNC_ITEM_RE.match(body) or _DESYNC_ITEM_RE.match(_RANK_PREFIX_RE.sub("", lp.raw))
            if m and i - desync_open[0] <= 4:
                desync_open[2].append(m.string[m.start("ranks") - 1 :].strip())
                desync_open[3].extend(_ranks(m.group("ranks")))
                continue
            close_desync()
        if i in consumed:
            # folded into an NCCL error as its "Last error:" text; a CUDA failure in it is still evidence
            ce = _cuda_error(body)
            if ce is not None:
                records.append(
                    CudaError(
                        source=source, line=i + 1, text=clip(lp.raw), host=host, code=ce[0], message=ce[1]
                    )
                )
            continue
        rank = _rank_of(lp)

        # --- desync report -----------------------------------------------------------------------------
        m = _TIMEOUT_AT_RE.search(body)
        if m:
            last_timeout_at = (i, lp.prefix_rank if lp.prefix_rank is not None else _int(m.group("rank")))
            continue
        m = _NEVER_JOINED_RE.search(body)
        if m or _DESYNC_HEAD_RE.search(body):
            drank = lp.prefix_rank
            if drank is None and last_timeout_at is not None and i - last_timeout_at[0] <= 3:
                drank = last_timeout_at[1]
            if drank is None and last_timeout is not None and i - last_timeout[0] <= 5:
                drank = last_timeout[1]
            if m:
                ranks = _ranks(m.group("ranks"))
                detail = body[body.find("To our best knowledge") :].strip()
                records.append(
                    DesyncReport(
                        source=source,
                        line=i + 1,
                        text=clip(lp.raw),
                        host=host,
                        rank=drank,
                        lagging_ranks=tuple(dict.fromkeys(ranks)),
                        detail=detail,
                    )
                )
            else:
                desync_open = (i, drank, [], [])
            continue

        # --- watchdog timeout ----------------------------------------------------------------------------
        if _WATCHDOG_RE.search(body):
            wt = _watchdog(lp, i, source, host, problems)
            is_embedded = _WATCHDOG_EXIT_RE.search(body) is not None or "what():" in body
            (embedded if is_embedded else standalone).append(wt)
            last_timeout = (i, wt.rank)
            pgm = _PG_RE.search(body)
            if pgm and wt.seq is not None:
                pg_hint.setdefault((wt.rank, wt.seq), pgm.group("pg"))
            if not is_embedded:
                continue
        m = _WORK_AT_RE.search(body)
        if m:
            pgm = _PG_RE.search(body)
            if pgm:
                pg_hint.setdefault((rank, _int(m.group(1))), pgm.group("pg"))
            continue

        # --- process-group errors ------------------------------------------------------------------------
        if _TERMINATE_RE.match(body.strip()):
            continue
        kind: str | None = None
        m = _WATCHDOG_EXIT_RE.search(body)
        if m:
            kind = "watchdog_exception"
        elif (
            _NCCL_ERROR_IN_RE.search(body)
            or _NCCL_ERROR_RE.search(body)
            or _ABORTED_RE.search(body)
            or _NCCL_CODE_LINE_RE.match(body)
        ):
            kind = "nccl_error"
        elif _DIST_BACKEND_RE.search(body):
            kind = "dist_backend_error"
        elif _TAKING_DOWN_RE.search(body):
            kind = "taking_down"
        elif _HEARTBEAT_RE.search(body):
            kind = "heartbeat"
        if kind is not None:
            nccl_error = (
                _nccl_error_of(body) if kind in ("nccl_error", "watchdog_exception", "taking_down") else None
            )
            if kind == "dist_backend_error":
                nccl_error = _nccl_error_of(body)
            lm = _LAST_ERROR_RE.search(body)
            last_error = (lm.group("rest").strip() or None) if lm else None
            wants_follow_up = kind in ("nccl_error", "watchdog_exception", "dist_backend_error") and (
                nccl_error is not None or lm is not None
            )
            if wants_follow_up and not (lm and last_error):
                nccl_error, last_error = _follow_up(lines, i, nccl_error, last_error, consumed)
            records.append(
                PgError(
                    source=source,
                    line=i + 1,
                    text=clip(lp.raw),
                    host=host,
                    rank=rank,
                    kind=kind,
                    message=body.strip(),
                    nccl_error=nccl_error,
                    last_error=last_error,
                )
            )
            continue

        # --- CUDA errors ---------------------------------------------------------------------------------
        ce = _cuda_error(body)
        if ce is not None:
            code, message = ce
            records.append(
                CudaError(source=source, line=i + 1, text=clip(lp.raw), host=host, code=code, message=message)
            )
    close_desync()

    # embedded timeouts (inside "watchdog thread terminated with exception" / what()) only count when the
    # rank did not log the same timeout on its own line.
    keys = {(w.rank, w.seq, w.op_type) for w in standalone}
    timeouts = standalone + [w for w in embedded if (w.rank, w.seq, w.op_type) not in keys]
    for w in timeouts:
        if w.pg is None and (w.rank, w.seq) in pg_hint:
            w = dataclasses.replace(w, pg=pg_hint[(w.rank, w.seq)])
        records.append(w)


def _ranks(s: str) -> list[int]:
    out: list[int] = []
    for part in s.split(","):
        v = _int(part)
        if v is not None:
            out.append(v)
    return out


def _watchdog(lp: _L, i: int, source: str, host: str | None, problems: list[str]) -> WatchdogTimeout:
    body = lp.body
    seg = body[_WATCHDOG_RE.search(body).start() :]  # type: ignore[union-attr]
    rank = lp.prefix_rank
    if rank is None:
        m = _MSG_RANK_RE.search(body)
        if m:
            rank = _int(m.group("rank"))
    if rank is None:
        m = _PG_RE.search(body)
        if m:
            rank = _int(m.group("rank"))

    def grab(p: re.Pattern[str]) -> int | None:
        m = p.search(seg)
        return _int(m.group(1)) if m else None

    opm = _F_OP.search(seg)
    ran = grab(_F_RAN)
    pgm = _PG_RE.search(body)
    if ran is None or "WorkNCCL(" not in seg:
        problems.append(f"line {i + 1}: incomplete watchdog timeout line (truncated or wrapped?)")
    return WatchdogTimeout(
        source=source,
        line=i + 1,
        text=clip(lp.raw),
        host=host,
        rank=rank,
        seq=grab(_F_SEQ),
        op_type=opm.group(1) if opm else None,
        numel_in=grab(_F_IN),
        numel_out=grab(_F_OUT),
        timeout_ms=grab(_F_TIMEOUT),
        ran_ms=ran,
        pg=pgm.group("pg") if pgm else None,
    )
