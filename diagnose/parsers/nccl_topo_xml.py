"""NCCL topology XML (``NCCL_TOPO_DUMP_FILE`` output / ``NCCL_TOPO_FILE`` input) and graph XML
(``NCCL_GRAPH_DUMP_FILE``).

System file (NCCL ``src/graph/topo.cc``/``xml.cc``)::

    <system version="1">
      <cpu numaid="0" affinity="..." arch="x86_64" vendor="AuthenticAMD" familyid="175" modelid="1">
        <pci busid="0001:00:00.0" class="0x030200" vendor="0x10de" ... link_speed="" link_width="0">
          <gpu dev="0" sm="80" rank="0" gdr="1">
            <nvlink target="0002:00:00.0" count="12" tclass="0x030200"/>
          </gpu>
        </pci>
        <nic>
          <net name="eth0" dev="0" speed="100000" port="0" latency="0.000000" guid="0x0" maxconn="65536" gdr="0"/>
        </nic>
      </cpu>
    </system>

Graph file (``src/graph/search.cc``)::

    <graphs version="1">
      <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra="12" speedinter="12" ... typeintra="SYS">
        <channel>
          <net dev="0"/>  <gpu dev="0"/>  <gpu dev="1"/> ...
        </channel>

Every element except the ``system``/``graphs`` root and ``channel`` becomes an
:class:`~diagnose.parsers._gpu.NcclTopoNode` (attributes verbatim, sorted), cited at its start tag's line.

Safety: the text is parsed with expat directly (no ``xml.etree`` tree, no network, no files). A document holding any
DOCTYPE/ENTITY/ELEMENT/ATTLIST/NOTATION declaration is rejected before parsing (and the expat handlers refuse them
too), so nothing is ever expanded or fetched; parsing stops at the first error (a truncated dump keeps the elements
read so far and reports a problem). Text before the root (a shell prompt) and after it is ignored.
"""

from __future__ import annotations

import re
from xml.parsers import expat

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._gpu import NcclTopoNode
from diagnose.parsers.base import guarded_parse

FORMAT = "nccl_topo_xml"

_ROOTS = ("system", "graphs")
_START_RE = re.compile(r"^\s*<(?:\?xml\b|system\b|graphs\b)", re.MULTILINE)
_MAX_ELEMENTS = 200_000
_DTD_RE = re.compile(r"<!\s*(?:DOCTYPE|ENTITY|ELEMENT|ATTLIST|NOTATION)\b", re.IGNORECASE)

_SNIFF_SYSTEM = re.compile(r"^\s*<system\s+version=\"\d+\"\s*>", re.MULTILINE)
_SNIFF_GRAPHS = re.compile(r"^\s*<graphs\s+version=\"\d+\"\s*>", re.MULTILINE)
_SNIFF_GRAPH = re.compile(r"^\s*<graph\s+id=\"\d+\"\s+pattern=", re.MULTILINE)
_SNIFF_PCI = re.compile(r"^\s*<pci\s+busid=\"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\"", re.MULTILINE)
_SNIFF_CPU = re.compile(r"^\s*<cpu\s+numaid=", re.MULTILINE)


def sniff(head: str) -> int:
    if _SNIFF_SYSTEM.search(head) and (_SNIFF_CPU.search(head) or _SNIFF_PCI.search(head)):
        return 95
    if _SNIFF_GRAPHS.search(head) and _SNIFF_GRAPH.search(head):
        return 95
    if _SNIFF_SYSTEM.search(head) or (_SNIFF_CPU.search(head) and _SNIFF_PCI.search(head)):
        return 80
    if _SNIFF_GRAPH.search(head) and "<channel>" in head:
        return 70
    return 0


class _Reject(Exception):
    pass


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    if _DTD_RE.search(text):
        problems.append("rejected: DOCTYPE/ENTITY declarations are not allowed")
        return
    m = _START_RE.search(text)
    if not m:
        problems.append("no <system> or <graphs> element found")
        return
    start = m.start()
    # skip leading whitespace of that line so the document begins at '<'
    while start < len(text) and text[start] in " \t\r\n":
        start += 1
    line_offset = text.count("\n", 0, start)  # lines before the document
    doc = text[start:]
    lines = text.split("\n")

    parser = expat.ParserCreate()
    try:
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    except Exception:  # noqa: BLE001 - older expat builds
        pass

    stack: list[tuple[str, str | None]] = []  # (tag, busid if pci)
    graph_id: list[str | None] = [None]
    channel_idx = [-1]
    in_channel = [False]
    root_seen: list[str] = []
    closed_root = [False]
    count = [0]

    def reject_doctype(*_args: object) -> None:
        raise _Reject("DOCTYPE declarations are not allowed")

    def reject_entity(*_args: object) -> None:
        raise _Reject("ENTITY declarations are not allowed")

    def reject_external(*_args: object) -> int:
        raise _Reject("external entity references are not allowed")

    parser.StartDoctypeDeclHandler = reject_doctype
    parser.EntityDeclHandler = reject_entity
    parser.UnparsedEntityDeclHandler = reject_entity
    parser.ExternalEntityRefHandler = reject_external
    parser.NotationDeclHandler = reject_entity

    def start_el(tag: str, attrs: dict[str, str]) -> None:
        count[0] += 1
        if count[0] > _MAX_ELEMENTS:
            raise _Reject(f"more than {_MAX_ELEMENTS} elements")
        line_no = parser.CurrentLineNumber + line_offset
        if not stack:
            root_seen.append(tag)
            if tag not in _ROOTS:
                problems.append(f"line {line_no}: unexpected root element <{tag}>")
            stack.append((tag, None))
            return
        parent_busid = next((b for t, b in reversed(stack) if t == "pci" and b), None)
        if tag == "graph":
            graph_id[0] = attrs.get("id")
            channel_idx[0] = -1
        if tag == "channel":
            channel_idx[0] += 1
            in_channel[0] = True
            stack.append((tag, None))
            return
        raw = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
        chan = channel_idx[0] if in_channel[0] else None
        gid = graph_id[0] if (tag == "graph" or in_channel[0]) else None
        records.append(
            NcclTopoNode(
                source=source,
                line=line_no,
                text=clip(raw),
                host=host,
                kind=tag.lower(),
                attrs=tuple(sorted((str(k), str(v)) for k, v in attrs.items())),
                parent_busid=parent_busid,
                graph_id=gid,
                channel=chan,
            )
        )
        stack.append((tag, attrs.get("busid") if tag == "pci" else None))

    def end_el(tag: str) -> None:
        if stack:
            stack.pop()
        if tag == "channel":
            in_channel[0] = False
        if tag == "graph":
            graph_id[0] = None
        if not stack:
            closed_root[0] = True

    parser.StartElementHandler = start_el
    parser.EndElementHandler = end_el
    try:
        parser.Parse(doc, True)
    except _Reject as exc:
        problems.append(f"rejected: {exc}")
        records.clear()
        return
    except expat.ExpatError as exc:
        if closed_root[0] and exc.code == expat.errors.codes.get(expat.errors.XML_ERROR_JUNK_AFTER_DOC_ELEMENT):
            return  # trailing text after a complete document (a shell prompt, a log line)
        ln = (exc.lineno or 0) + line_offset
        if not closed_root[0] and ln >= len(lines) - 1:
            problems.append(f"truncated: XML ends before </{stack[0][0] if stack else 'system'}> ({exc})")
        else:
            problems.append(f"malformed XML at line {ln}: {expat.errors.messages.get(exc.code, str(exc))}")
        return
    if not root_seen:
        problems.append("no XML element found")
