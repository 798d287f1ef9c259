"""Ticket, alert and chat text, and evidence lines -> canonical Symptoms.

The symptom text is evidence too: it is split into :class:`FreeText` records (file ``<symptom>``)
and the ``env`` parser's patterns run over it, so a pasted ``NCCL_P2P_DISABLE=1`` counts like an env dump.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from diagnose.models.diagnosis import Symptom
from diagnose.models.records import Record, clip
from diagnose.parsers._common import EnvSetting, is_comm_env

SYMPTOM_SOURCE = "<symptom>"
_ENV_IN_TEXT = re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s,;]+)")

_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("collective_timeout", re.compile(r"time[sd]? ?out|timed out|\bhang|\bhung|stuck|watchdog|deadlock|froze|\bfreez\w*|\bstall(?:s|ed|ing)?\b", re.I)),
    ("collective_slow", re.compile(r"\bslow|busbw|bandwidth|throughput|GB/s|Gb/s|degrad|drop(?:ped)? to|below line rate|straggl", re.I)),
    ("init_failure", re.compile(r"(?:\b|_)init|\b(?:at|during) (?:start-?up|setup|launch)\b|ncclCommInit|unhandled system error|failed to (?:initiali[sz]e|start)|bootstrap|not yet initiali", re.I)),
    ("connection_error", re.compile(r"connection (?:refused|reset|closed)|completion with error|error 12\b|retry (?:count(?:er)? )?exceeded|RETRY_EXC|unreachable|remote process exited", re.I)),
    ("gpu_error", re.compile(r"\bxid\b|fallen off the bus|\becc\b|cuda error|gpu (?:error|fault|lost)", re.I)),
    ("link_errors", re.compile(r"symbol error|link (?:down|flap)|flapping|\bcable|port (?:down|polling)|\bber\b|link error", re.I)),
    ("process_crash", re.compile(r"segfault|core dumped|\bkilled\b|crash|SIGABRT|exited with", re.I)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FreeText(Record):
    """One line the reporter wrote: of the symptom text (file ``<symptom>``) or a sentence in a bundle file."""


# a negation earlier in the same clause ("no link errors", "without a crash", "there are no Xids") denies the mention;
# a clause ends at punctuation or a turn ("does not crash but hangs": the hang stands)
_NEGATION = re.compile(r"\b(?:no|not|without|never|none|zero)\b|n't\b", re.I)
_CLAUSE_END = re.compile(r"[.,;:!?()\[\]]|\b(?:but|while|whereas|although|though|however|yet|then)\b", re.I)
_NEGATION_REACH = 40  # characters before a mention that a negation reaches


def _denied(text: str, start: int) -> bool:
    """Whether a negation earlier in the clause denies the mention at ``start``."""
    before = text[max(0, start - _NEGATION_REACH):start]
    ends = list(_CLAUSE_END.finditer(before))
    clause = before[ends[-1].end():] if ends else before
    return bool(_NEGATION.search(clause))


def _asserted(pat: re.Pattern[str], text: str) -> bool:
    """Whether ``text`` states the mention ``pat`` finds at least once without denying it."""
    return any(not _denied(text, m.start()) for m in pat.finditer(text))


# Alert and metric names as alerting rules and exporters spell them (Prometheus node_exporter's infiniband
# collector, DCGM exporter fields, the usual alert names): one table, name (lower case) -> symptom kind. A name is
# matched as a whole token of the text, so "symbol_error rising" or "InfinibandLinkDowned firing" classify.
ALERT_NAMES: dict[str, str] = {
    **{n: "link_errors" for n in (
        "symbol_error", "symbol_errors", "symbolerror", "symbolerrorcounter", "symbolerrors",
        "node_infiniband_symbol_error_total", "link_error_recovery", "linkerrorrecovery",
        "linkerrorrecoverycounter", "node_infiniband_link_error_recovery_total", "link_downed", "linkdowned",
        "linkdownedcounter", "node_infiniband_link_downed_total", "port_rcv_errors", "portrcverrors",
        "node_infiniband_port_receive_errors_total", "local_link_integrity_errors",
        "excessive_buffer_overrun_errors", "infinibandlinkdown", "infinibandlinkdowned", "ibportdown",
        "ib_port_down", "infinibandporterrors", "infinibandsymbolerrors", "ibsymbolerrors", "linkflapping",
        "link_flapping")},
    **{n: "gpu_error" for n in (
        "xid", "xiderror", "xid_error", "xid_errors", "gpuxiderror", "dcgm_fi_dev_xid_errors", "gpufelloffbus",
        "gpu_fallen_off_bus", "dcgm_fi_dev_nvlink_crc_flit_error_count_total", "nvlinkerrors", "gpueccerror",
        "dcgm_fi_dev_ecc_dbe_vol_total")},
    **{n: "collective_timeout" for n in (
        "nccltimeout", "nccl_timeout", "ncclwatchdogtimeout", "watchdog_timeout", "collectivetimeout",
        "collective_timeout", "trainingstalled", "training_stalled", "jobhang", "job_hang")},
    **{n: "collective_slow" for n in (
        "portxmitwait", "port_xmit_wait", "xmit_wait", "node_infiniband_port_transmit_wait_total",
        "lowbusbw", "low_busbw", "ncclslow", "nccl_slow", "allreduceslow")},
}
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def classify(text: str) -> list[str]:
    kinds = {kind for kind, pat in _KINDS if _asserted(pat, text)}
    kinds |= {ALERT_NAMES[m.group(0).lower()] for m in _TOKEN.finditer(text)
              if m.group(0).lower() in ALERT_NAMES and not _denied(text, m.start())}
    return [kind for kind, _ in _KINDS if kind in kinds]


def from_text(text: str, source: str = "cli") -> list[Symptom]:
    kinds = classify(text)
    if not kinds:
        return [Symptom(kind="unknown", text=text.strip()[:500], source=source)]
    return [Symptom(kind=k, text=text.strip()[:500], source=source) for k in kinds]  # type: ignore[arg-type]


def text_records(text: str) -> list[Record]:
    """The symptom text as evidence records (FreeText plus env settings it names)."""
    recs: list[Record] = []
    for i, ln in enumerate(text.split("\n"), 1):
        if ln.strip():
            recs += _said(ln, SYMPTOM_SOURCE, i)
    return recs


def _said(ln: str, source: str, line: int, host: str | None = None) -> list[Record]:
    """One line the reporter wrote: its FreeText record, and the communication settings it names as EnvSetting
    records of origin ``symptom``."""
    recs: list[Record] = [FreeText(source=source, line=line, text=clip(ln), host=host)]
    for m in _ENV_IN_TEXT.finditer(ln):
        if is_comm_env(m.group(1)):
            recs.append(EnvSetting(source=source, line=line, text=clip(ln), name=m.group(1), host=host,
                                   value=m.group(2).strip("'\"").rstrip(".,;)"), origin="symptom"))
    return recs


# A line the reporter wrote (a sentence), not a line a tool printed: words, mostly alphabetic, and English function
# words that log lines rarely carry; lines shaped like a log record (timestamps, levels, key: value) are not prose.
_FUNCTION_WORDS = re.compile(
    r"\b(?:the|is|are|was|were|but|when|if|it|this|that|we|I|my|our|only|also|does|did|do|not|works?|worked|fine"
    r"|seems?|tried|using|because|which|have|has|had|after|before|then|than|would|could|should|can)\b")
_LOG_SHAPED = re.compile(
    r"^\s*(?:\[?\d{4}-\d\d-\d\d|\[\s*\d+\.\d+\]|\w{3} [ \d]\d \d\d:|\S+:\d+:\d+ |\[\d+(?:,\d+)?\]<std)"
    r"|\bNCCL (?:INFO|WARN|TRACE)\b|\b(?:INFO|WARN(?:ING)?|ERROR|DEBUG)\s*[:\]]|^\s*[\w.\-]+\s*[:=]\s*\S+\s*$|[{}<>|]{2}")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’\-]*[.,;:!?)]*$")
PROSE_MAX_BYTES = 256 * 1024  # a reporter's notes are short; a larger file is a tool's output


_MARKUP = re.compile(r"\*\*|__|`+|^\s*(?:[-*+>]|\d+[.)])\s+")  # markdown emphasis, code ticks, bullets, quotes
# the words that join a paragraph's sentences (with _FUNCTION_WORDS): prepositions, articles, conjunctions
_JOINING_WORDS = re.compile(r"\b(?:of|on|in|to|with|for|and|or|a|an|your|you|from|by|as|at|so|all)\b", re.I)


_FAILING = re.compile(r"\b(?:fails|failed|failing|hangs|hung|crashes|crashed|freezes|stalls|stalled)\b")


def _demark(s: str) -> str:
    return _MARKUP.sub("", s)


def is_prose(line: str) -> bool:
    """A sentence a person wrote: six or more words, three in four of them alphabetic, two function words, or in
    ten or more words one function word or verb of failure and two joining words (markdown emphasis, code ticks and
    bullet marks aside)."""
    s = line.strip()
    if len(s) < 24 or len(s) > 4000 or _LOG_SHAPED.search(s):
        return False
    s = _demark(s)
    toks = s.split()
    if len(toks) < 6 or sum(1 for t in toks if _WORD.match(t.lstrip("('\"`"))) * 4 < len(toks) * 3:
        return False
    fn = len(_FUNCTION_WORDS.findall(s))
    # a longer sentence can do without them ("On three GB10 systems connected over RoCE, startup fails with kernel
    # 7.0:"): a verb of failure and two joining words in ten or more words
    return fn >= 2 or (len(toks) >= 10 and fn + len(_FAILING.findall(s)) >= 1 and len(_JOINING_WORDS.findall(s)) >= 2)


def _is_paragraph(text: str) -> bool:
    """Lines a person wrote and wrapped, joined: eight or more words, seven in ten alphabetic, two or more joining
    words and four or more function and joining words together (a paragraph carries numbers, names and counters
    between its words)."""
    s = _demark(text.strip())
    if len(s) > 4000:
        return False
    toks = s.split()
    if len(toks) < 8 or sum(1 for t in toks if _WORD.match(t.lstrip("('\"`"))) * 10 < len(toks) * 7:
        return False
    joining = len(_JOINING_WORDS.findall(s))
    return joining >= 2 and len(_FUNCTION_WORDS.findall(s)) + joining >= 4


def prose_records(text: str, source: str, host: str | None = None) -> list[Record]:
    """The sentences of a file the reporter wrote or pasted prose into (a ``report.txt``, notes around a paste), as
    :class:`FreeText` records of that file, and the communication settings they name (``Setting
    NCCL_P2P_DISABLE=1 did workaround``) as EnvSetting records of origin ``symptom``: the reporter's words count
    like the ticket's, wherever they were written."""
    if len(text) > PROSE_MAX_BYTES:
        return []
    recs: list[Record] = []
    run: list[tuple[int, str]] = []  # consecutive lines that are not a tool's: a paragraph wrapped by hand

    def paragraph() -> None:
        # a sentence the reporter wrapped over lines ("after the switch / ports were reconfigured") is read whole,
        # once, at its first line; the settings it names are read line by line
        if len(run) >= 2:
            joined = " ".join(t.strip() for _, t in run)
            if _is_paragraph(joined):
                recs.append(FreeText(source=source, line=run[0][0], text=clip(joined), host=host))
        run.clear()

    for i, ln in enumerate(text.split("\n"), 1):
        if is_prose(ln):
            recs += _said(ln, source, i, host)
        if ln.strip() and not _LOG_SHAPED.search(ln):
            run.append((i, ln))
        else:
            paragraph()
    paragraph()
    return recs


# Evidence-derived symptoms: (finding kind, symptom kind)
# A measured busbw below this share of what the hardware should reach is itself the symptom "collective_slow" (the
# rules' own busbw_ratio_low has the same default and source): nccl-tests doc/PERFORMANCE.md defines busbw so that
# it compares with the hardware's peak; healthy IB fabrics reach 80-95% of the NIC line rate at large sizes.
SLOW_BUSBW_RATIO = 0.6


def implied_symptom(kind: str, attrs: Mapping[str, object]) -> str | None:
    """The symptom a finding of ``kind`` (with ``attrs``) is evidence of, or None: the table below, and a measured
    busbw under :data:`SLOW_BUSBW_RATIO` of the expected."""
    if kind == "busbw_measured" and attrs.get("ratio") is not None:
        try:
            if float(attrs["ratio"] or 1) < SLOW_BUSBW_RATIO:  # type: ignore[arg-type]  # a number, or text of one
                return "collective_slow"
        except (TypeError, ValueError):
            pass
    return FINDING_SYMPTOMS.get(kind)


FINDING_SYMPTOMS: dict[str, str] = {
    "watchdog_timeout": "collective_timeout",
    "xid_event": "gpu_error",
    "ib_completion_error": "connection_error",
    "socket_connect_failed": "connection_error",
    "bootstrap_no_interface": "init_failure",
    "shm_error": "init_failure",
    "ib_mem_registration_failed": "init_failure",
    "cuda_system_not_ready": "init_failure",
    "qp_setup_failed": "connection_error",
    "port_counter_errors": "link_errors",
    "nic_link_down_event": "link_errors",
    "mlx5_cmd_timeout": "connection_error",
    "mlx5_health_error": "connection_error",
    "ib_async_fatal_event": "connection_error",
    "iommu_fault": "connection_error",
    "pcie_acs_violation": "connection_error",
    "rdma_unusable_hw_up": "collective_slow",
    "nccl_version_mismatch_warn": "init_failure",
    "cuda_driver_too_old": "init_failure",
    "nccl_bootstrap_size_mismatch": "init_failure",
    "nvlink_links_inactive": "gpu_error",
    "nccl_ib_port_events": "link_errors",
    "ibdiagnet_link_down_increase": "link_errors",
    "link_flap_events": "link_errors",
    "qp_modify_error": "init_failure",
    "pkey_index_rejected": "init_failure",
    "nccl_ib_sm_events": "connection_error",
    "qp_rtr_timeout": "connection_error",
}
