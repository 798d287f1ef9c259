"""``dcgmi diag`` result tables and ``dcgmi health -c`` reports (NVIDIA DCGM command line).

``dcgmi diag`` (DCGM 2.x/3.x layout, ``dcgmi/Diag.cpp``)::

    | Diagnostic                | Result                                         |
    |-----  Deployment  --------+------------------------------------------------|
    | Denylist                  | Pass                                           |
    +-----  Hardware  ----------+------------------------------------------------+
    | GPU Memory                | Pass - GPUs: 1, 2, 3, 4, 5, 6, 7               |
    |                           | Fail - GPU: 0                                  |
    | Warning                   | GPU 0 Thermal violations totaling 13.3 second  |
    |                           | s started at 9.7 seconds into the test for GP  |

DCGM 4.x prints ``| memory | Fail |`` then per-entity ``|  | GPU0: Fail |`` rows and ``| Warning: GPU0 | ... |``.
Each test row, and each ``Pass - GPUs: ...`` / ``Fail - GPU: 0`` / ``GPU0: Fail`` group of it, becomes a
:class:`~diagnose.parsers._gpu.DcgmResult` (``kind='diag'``). Warning/Error messages are wrapped at 45 characters,
mid-word, so their chunks are concatenated as printed; the message goes to the ``detail`` of the group naming that
GPU (else the test's last group). ``Metadata`` rows (DCGM/driver version) and ``Info`` rows are not results.

``dcgmi health -c`` (``dcgmi/Health.cpp`` + ``DcgmiOutputTree``)::

    | Health Monitor Report                                                                |
    | Overall Health            | Warning                                                  |
    | GPU                       |                                                          |
    | -> 0                      | Warning                                                  |
    |    -> Errors              |                                                          |
    |       -> Power system     | Warning                                                  |
    |                           | Detected clocks event due to power violation in GPU 0.   |

``Overall Health`` and every ``-> <system>`` incident become ``DcgmResult(kind='health')`` with ``gpus`` = entity
(``GPU0``, ``NvSwitch1``, ``ConnectX0``) and the word-wrapped message joined with spaces. The DCGM 1.x layout
(``| GPU ID: 0 | Warning |`` with ``PCIe system: Warning - ...`` lines) is read too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._gpu import DcgmResult, shell_line
from diagnose.parsers._ib import ToolError
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "dcgmi"
MIXABLE = True  # captured inside job stdout / prolog logs next to NCCL and PyTorch lines

_SECTION_RE = re.compile(r"^[|+]-{3,}\s+(?P<sec>[A-Za-z][A-Za-z /]*?)\s+-+\+")
_DIAG_HEADER_RE = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|")
_HEALTH_HEADER_RE = re.compile(r"^\|\s*Health Monitor Report\b")
_RESULT_WORDS = r"Pass|Fail|Skip|Warn|Warning|Not Run|Error|Failure|Healthy"
_OLD_RESULT_RE = re.compile(
    rf"^(?P<res>{_RESULT_WORDS})(?:\s*-\s*(?P<who>All|GPUs?:\s*[\d,\s]+|[A-Za-z]+:\s*[\d,\s]+))?\s*$", re.IGNORECASE
)
_NEW_RESULT_RE = re.compile(rf"^(?P<grp>[A-Za-z]+)(?P<id>\d+):\s*(?P<res>{_RESULT_WORDS})\s*$", re.IGNORECASE)
_MSG_NAME_RE = re.compile(r"^(?P<kind>Warning|Error|Info)(?::\s*(?P<ent>[A-Za-z]+\d+))?$")
_MSG_GPU_RE = re.compile(r"^\s*GPU\s+(?P<id>\d+)\b")
_METADATA_NAMES = ("dcgm version", "driver version detected", "gpu device ids detected")
_OLD_HEALTH_RE = re.compile(
    r"^(?P<sys>[A-Za-z][A-Za-z ]*? system|Driver|NvSwitch (?:NF|F))\s*:\s*(?P<res>Healthy|Warning|Failure)"
    r"(?:\s*-\s*(?P<msg>.*))?$"
)
_DCGMI_ERROR_RE = re.compile(
    r"^\s*Error: (?:[Uu]nable to .*|Health watches not enabled.*|.*\b(?:DCGM|host engine|nv-hostengine)\b.*)$"
)
_OVERALL_RE = re.compile(r"Overall Health\s*:\s*(?P<res>Healthy|Warning|Failure|Internal error)")

_SNIFF_DIAG = re.compile(r"^\|\s*Diagnostic\s+\|\s*Result\s+\|", re.MULTILINE)
_SNIFF_SECTION = re.compile(r"^[|+]-----  (?:Metadata|Deployment|Integration|Hardware|Stress)  -+\+", re.MULTILINE)
_SNIFF_HEALTH = re.compile(r"^\|\s*Health Monitor Report\s+\|", re.MULTILINE)
_SNIFF_OVERALL = re.compile(r"^\|\s*Overall Health\s+\|\s*(?:Healthy|Warning|Failure)", re.MULTILINE)
_SNIFF_ROW = re.compile(
    r"^\|\s[A-Za-z][\w /().-]*?\s+\|\s(?:Pass|Fail|Skip)(?: - (?:All|GPUs?: [\d, ]+))?\s+\|\s*$", re.MULTILINE
)
_SNIFF_MSG = re.compile(r"^\|\s(?:Warning|Error)\s+\|\sGPU \d+ ", re.MULTILINE)


def sniff(head: str) -> int:
    if _SNIFF_DIAG.search(head) or _SNIFF_HEALTH.search(head):
        return 95
    sections = len(_SNIFF_SECTION.findall(head))
    if sections >= 2 or _SNIFF_OVERALL.search(head):
        return 85
    rows = len(_SNIFF_ROW.findall(head))
    msgs = len(_SNIFF_MSG.findall(head))
    if sections and (rows or msgs):
        return 80
    if rows and msgs:
        return 70
    if rows >= 3:
        return 60
    return 0


def _norm_result(value: str) -> str:
    v = value.strip()
    low = v.lower()
    for word in ("Pass", "Fail", "Skip", "Warn", "Warning", "Not Run", "Error", "Failure", "Healthy"):
        if low == word.lower():
            return word
    return v[:1].upper() + v[1:]


def _who(who: str | None) -> tuple[str | None, list[str]]:
    """(gpus string, list of entity names) from ``All`` / ``GPUs: 1, 2`` / ``GPU: 0``."""
    if not who:
        return None, []
    w = who.strip()
    if w.lower() == "all":
        return "All", []
    m = re.match(r"^(?P<grp>[A-Za-z]+?)s?:\s*(?P<ids>[\d,\s]+)$", w)
    if not m:
        return w, []
    grp = m.group("grp")
    grp = "GPU" if grp.upper() == "GPU" else grp
    ents = [f"{grp}{i}" for i in re.findall(r"\d+", m.group("ids"))]
    return ",".join(ents), ents


@dataclass
class _Group:
    line: int
    text: str
    host: str | None
    test: str
    result: str
    gpus: str | None
    ents: list[str]
    details: list[str] = field(default_factory=list)
    kind: str = "diag"


@dataclass
class _Msg:
    label: str  # Warning / Error / Info
    entity: str | None
    line: int
    text: str
    chunks: list[str] = field(default_factory=list)


def _split_row(line: str) -> tuple[str, str | None] | None:
    """(name cell, info cell or None) of a ``| name | info |`` row (a missing closing bar is tolerated)."""
    s = line.rstrip()
    if not s.startswith("|"):
        return None
    second = s.find("|", 1)
    if second < 0:
        return s[1:], None
    name = s[1:second]
    rest = s[second + 1 :]
    if rest.endswith("|"):
        rest = rest[:-1]
    return name, rest


def _chunk(info: str) -> str:
    """The printed 45-character chunk of a wrapped diag message cell (``" " + chunk.ljust(45) + " "``)."""
    if len(info) >= 47 and info.startswith(" "):
        return info[1:46]
    return info[1:] if info.startswith(" ") else info


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


class _State:
    def __init__(self, source: str, records: list[Record]) -> None:
        self.source = source
        self.records = records
        self.section: str | None = None
        self.groups: list[_Group] = []  # groups of the current test (diag)
        self.msg: _Msg | None = None
        self.mode: str | None = None  # 'diag' | 'health'
        # health tree
        self.entity_group: str | None = None
        self.entity: str | None = None
        self.incident: _Group | None = None

    # ---------------------------------------------------------------- diag
    def close_msg(self) -> None:
        m = self.msg
        self.msg = None
        if m is None or m.label == "Info":
            return
        body = "".join(m.chunks).strip() if m.chunks else ""
        if not body:
            return
        ent = m.entity
        if ent is None:
            gm = _MSG_GPU_RE.match(body)
            if gm:
                ent = f"GPU{gm.group('id')}"
        target: _Group | None = None
        if self.groups:
            named = [g for g in self.groups if ent and ent in g.ents]
            failing = [g for g in named if g.result not in ("Pass", "Skip")]
            target = (failing or named or [self.groups[-1]])[-1]
        if target is None:
            target = _Group(line=m.line, text=m.text, host=None, test=self.section or m.label, result=m.label,
                            gpus=ent, ents=[ent] if ent else [])
            self.groups.append(target)
        target.details.append(body)

    def close_test(self) -> None:
        self.close_msg()
        for g in self.groups:
            self.emit(g)
        self.groups = []

    def emit(self, g: _Group) -> None:
        detail = "; ".join(g.details) if g.details else None
        self.records.append(DcgmResult(source=self.source, line=g.line, text=clip(g.text), host=g.host, test=g.test,
                                       result=g.result, gpus=g.gpus, detail=detail, kind=g.kind))

    # ---------------------------------------------------------------- health
    def close_incident(self) -> None:
        if self.incident is not None:
            self.emit(self.incident)
        self.incident = None

    def close_all(self) -> None:
        self.close_test()
        self.close_incident()


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    st = _State(source, records)
    last_table_line = 0
    footer_seen = True

    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if _DCGMI_ERROR_RE.match(line):
            st.close_all()
            records.append(ToolError(source=source, line=n, text=clip(line), host=cur_host, tool="dcgmi",
                                     message=stripped))
            continue
        if not stripped.startswith(("|", "+")):
            # a table is contiguous: any other line ends it (job logs interleave other tools' tables and text)
            st.close_all()
            st.mode = None
            sh = shell_line(line)
            if sh is not None and sh[0]:
                cur_host = sh[0]
            continue
        if _DIAG_HEADER_RE.match(stripped):
            st.close_all()
            st.mode, st.section = "diag", None
            last_table_line, footer_seen = n, False
            continue
        if _HEALTH_HEADER_RE.match(stripped):
            st.close_all()
            st.mode, st.entity_group, st.entity = "health", None, None
            last_table_line, footer_seen = n, False
            continue
        sm = _SECTION_RE.match(stripped)
        if sm:
            st.close_test()
            st.section = sm.group("sec").strip()
            if st.mode is None:
                st.mode = "diag"
            last_table_line, footer_seen = n, False
            continue
        if set(stripped) <= set("+-=|"):
            st.close_all()
            footer_seen = True
            continue
        row = _split_row(stripped)
        if row is None:
            continue
        name_cell, info_cell = row
        om = _OVERALL_RE.search(stripped)
        if om and not name_cell.strip().startswith("Overall Health"):
            # DCGM 1.x: `| Group 1 | Overall Health: Warning |`
            st.close_all()
            st.mode = "health"
            st.emit(_Group(line=n, text=line, host=cur_host, test="Overall Health", result=om.group("res"),
                           gpus=None, ents=[], kind="health"))
            last_table_line, footer_seen = n, False
            continue
        if st.mode is None:
            name = name_cell.strip()
            info = (info_cell or "").strip()
            if name.startswith(("Overall Health", "->")):
                st.mode = "health"
            elif name and (_OLD_RESULT_RE.match(info) or _NEW_RESULT_RE.match(info)):
                st.mode = "diag"  # a table excerpt without its header
            else:
                continue  # some other tool's table
        last_table_line, footer_seen = n, False
        if st.mode == "health":
            _health_row(st, n, line, name_cell, info_cell, cur_host)
        else:
            _diag_row(st, n, line, name_cell, info_cell, cur_host)

    st.close_all()
    if last_table_line and not footer_seen:
        problems.append(f"truncated: table ends at line {last_table_line} without its closing border")


def _diag_row(st: _State, n: int, line: str, name_cell: str, info_cell: str | None, host: str | None) -> None:
    name = name_cell.strip()
    info_raw = info_cell if info_cell is not None else ""
    info = info_raw.strip()
    if (st.section or "").lower() == "metadata" or name.lower() in _METADATA_NAMES:
        return
    mm = _MSG_NAME_RE.match(name) if name else None
    if mm:
        st.close_msg()
        st.msg = _Msg(label=mm.group("kind").title(), entity=mm.group("ent"), line=n, text=line,
                      chunks=[_chunk(info_raw)])
        return
    if name:
        st.close_test()
        om = _OLD_RESULT_RE.match(info)
        nm = _NEW_RESULT_RE.match(info)
        if om:
            gpus, ents = _who(om.group("who"))
            res = om.group("res")
        elif nm:
            gpus, ents = f"{nm.group('grp')}{nm.group('id')}", [f"{nm.group('grp')}{nm.group('id')}"]
            res = nm.group("res")
        else:
            return  # not a result row (another tool's table, or a layout this parser does not know)
        st.groups.append(_Group(line=n, text=line, host=host, test=name, result=_norm_result(res), gpus=gpus,
                                ents=ents))
        return
    # empty name cell: another result group of the current test, or a message continuation
    om = _OLD_RESULT_RE.match(info)
    nm = _NEW_RESULT_RE.match(info)
    if (om or nm) and st.groups:
        st.close_msg()
        test = st.groups[0].test
        if om:
            gpus, ents = _who(om.group("who"))
            res = om.group("res")
        else:
            assert nm is not None
            gpus, ents = f"{nm.group('grp')}{nm.group('id')}", [f"{nm.group('grp')}{nm.group('id')}"]
            res = nm.group("res")
        st.groups.append(_Group(line=n, text=line, host=host, test=test, result=_norm_result(res), gpus=gpus,
                                ents=ents))
        return
    if st.msg is not None:
        st.msg.chunks.append(_chunk(info_raw))


def _health_row(st: _State, n: int, line: str, name_cell: str, info_cell: str | None, host: str | None) -> None:
    label_raw = name_cell[1:] if name_cell.startswith(" ") else name_cell
    label = label_raw.rstrip()
    value = (info_cell or "").strip()
    if not label.strip():
        if not value:
            return
        om = _OLD_HEALTH_RE.match(value)
        if om and st.entity is not None:
            st.close_incident()
            st.incident = _Group(line=n, text=line, host=host, test=om.group("sys"), result=om.group("res"),
                                 gpus=st.entity, ents=[st.entity], kind="health")
            if om.group("msg"):
                st.incident.details.append(om.group("msg").strip())
            return
        if st.incident is not None:
            if st.incident.details:
                st.incident.details[-1] = st.incident.details[-1] + " " + value
            else:
                st.incident.details.append(value)
        return
    m = re.match(r"^(?P<ind>\s*)(?P<arrow>->\s*)?(?P<lab>.*)$", label)
    assert m is not None
    lab = m.group("lab").strip()
    level = 0 if not m.group("arrow") else len(m.group("ind")) // 3 + 1
    if lab == "Overall Health" and level == 0:
        st.close_incident()
        st.emit(_Group(line=n, text=line, host=host, test="Overall Health", result=_norm_result(value) if value else "",
                       gpus=None, ents=[], kind="health"))
        return
    gid = re.match(r"^(?P<grp>GPU|NvSwitch|Switch|ConnectX|CPU|Cpu|Link)\s+ID:\s*(?P<id>\d+)$", lab)
    if gid:  # DCGM 1.x entity row
        st.close_incident()
        st.entity = f"{gid.group('grp')}{gid.group('id')}"
        return
    if level == 0:
        st.close_incident()
        st.entity_group, st.entity = lab, None
        return
    if level == 1:
        st.close_incident()
        st.entity = f"{st.entity_group or ''}{lab}"
        return
    if lab == "Errors":
        st.close_incident()
        return
    st.close_incident()
    st.incident = _Group(line=n, text=line, host=host, test=lab, result=_norm_result(value) if value else "",
                         gpus=st.entity, ents=[st.entity] if st.entity else [], kind="health")
