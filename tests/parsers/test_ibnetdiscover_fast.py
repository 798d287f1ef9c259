"""The fast ibnetdiscover reader and the column-wise fabric build give what the line-by-line / row-by-row code gives.

* ``ibnetdiscover.parse`` (chunked, column-wise) against ``ibnetdiscover._parse_lines`` (every line through the
  line-by-line logic) on every sample in tests/data/ibnetdiscover, every fixture file that sniffs as
  ibnetdiscover output, variants of them (CRLF, ANSI colour, truncation, shell prompts and tool errors in the
  middle, tiny chunks) and generated mixtures of real and malformed lines: same records (type, every field,
  line, text) in the same order, same problems.
* ``build_fabric`` against the per-row networkx build it replaced (``_reference_build_fabric`` below, kept here
  as the reference): same graph (nodes, attributes, edges, keys, in order), ports, LID/host maps, summary, and
  the same answers for every port.

Formats: rdma-core ``infiniband-diags/ibnetdiscover.c`` and the topology-file section of its man page,
https://github.com/linux-rdma/rdma-core/blob/master/infiniband-diags/man/common/sec_topology-file.rst (see
tests/data/ibnetdiscover/README.md for where each sample comes from).
"""

from __future__ import annotations

import dataclasses
import gc
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.evidence.context import sval, val
from diagnose.evidence.frames import build_frames
from diagnose.models.records import ParseResult, Record
from diagnose.parsers import iblinkinfo, ibnetdiscover, ibqueryerrors
from diagnose.parsers._fabric import FabricLink, FabricNode, FabricPortState
from diagnose.parsers._ib import IbPort, ToolError
from diagnose.pipeline import gather
from diagnose.topology import Fabric, build_fabric, link_gbps
from diagnose.topology.fabric import PortInfo

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "ibnetdiscover"


def _topology_files() -> list[Path]:
    """The samples, and every fixture file whose content sniffs as ibnetdiscover output."""
    files = sorted(p for p in DATA.iterdir() if p.suffix != ".md")
    for p in sorted((ROOT / "fixtures").rglob("*")):
        if p.is_file() and p.suffix not in (".gz", ".yaml", ".md"):
            try:
                head = p.read_bytes()[:65536].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if ibnetdiscover.sniff(head) > 0:
                files.append(p)
    return files


FILES = _topology_files()


def _id(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _fast(text: str, host: str | None = None) -> ParseResult:
    return ibnetdiscover.parse(text, "f.txt", host)


def _line_by_line(text: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    ibnetdiscover._parse_lines(text, "f.txt", host, records, problems)
    return ParseResult(format=ibnetdiscover.FORMAT, records=records, problems=problems)


def _same(text: str, host: str | None = None) -> ParseResult:
    fast, ref = _fast(text, host), _line_by_line(text, host)
    assert [type(r) for r in fast.records] == [type(r) for r in ref.records]
    for a, b in zip(fast.records, ref.records, strict=True):
        assert a == b, (a, b)
    assert fast.problems == ref.problems
    return fast


# ----------------------------------------------------------------------------------------------- the reader


def test_the_samples_cover_both_shapes() -> None:
    names = {p.name for p in FILES}
    assert {"ibnetdiscover_ports_test.out", "topology_file_example_manpage.txt"} <= names
    assert any(p.suffix == ".topo" for p in FILES)  # the simulated fat trees in fixtures/


@pytest.mark.parametrize("path", FILES, ids=[_id(p) for p in FILES])
def test_fast_reader_matches_line_by_line(path: Path) -> None:
    res = _same(path.read_text())
    assert res.records  # every sample holds nodes or ports


# the simulated fat trees in fixtures/ share one generator: the samples and one of them are enough for variants
VARIANT_FILES = [p for p in FILES if p.suffix != ".topo"] + [p for p in FILES if p.suffix == ".topo"][-1:]


@pytest.mark.parametrize("path", VARIANT_FILES, ids=[_id(p) for p in VARIANT_FILES])
def test_variants_match_line_by_line(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = path.read_text()
    lines = text.split("\n")
    mid = len(lines) // 2
    variants = {
        "crlf": text.replace("\n", "\r\n"),
        "ansi": "\n".join(f"\x1b[1;32m{ln}\x1b[0m" if i % 3 == 0 else ln for i, ln in enumerate(lines)),
        "prompt": "\n".join([*lines[:mid], "[root@sm01 ~]# ibnetdiscover", *lines[mid:]]),
        "tool_error": "\n".join([*lines[:mid], "ibwarn: [7187] mad_rpc: _do_madrpc failed; dport (DR path slid 0)",
                                 *lines[mid:]]),
        "indented": "\n".join("   " + ln if i % 5 == 1 else ln for i, ln in enumerate(lines)),
        "blank_padded": "\n\n  \n" + text + "\n\t\n",
        "head_cut": "\n".join(lines[mid:]),
    }
    for cut in (len(text) // 3, len(text) // 2, len(text) - 7):
        variants[f"cut_{cut}"] = text[:cut]
    for name, v in variants.items():
        for host in (None, "h0"):
            try:
                _same(v, host=host)
            except AssertionError as exc:
                raise AssertionError(f"variant {name!r}, host {host!r}: {exc}") from exc
    monkeypatch.setattr(ibnetdiscover, "_CHUNK", 7)  # chunk boundaries inside node blocks
    _same(text)
    _same(variants["prompt"])


def test_common_lines_skip_the_line_by_line_logic(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clean topology file only the header comments reach the line-by-line logic."""
    path = next(p for p in FILES if p.suffix == ".topo")
    fed: list[int] = []
    feed = ibnetdiscover._Lines.feed
    monkeypatch.setattr(ibnetdiscover._Lines, "feed", lambda self, n, line: (fed.append(n), feed(self, n, line)))
    res = _fast(path.read_text())
    assert sum(isinstance(r, FabricLink) for r in res.records) > 1000
    assert fed and all(path.read_text().split("\n")[n - 1].startswith("#") for n in fed)


def test_odd_lines_keep_their_meaning() -> None:
    """Lines the fast shapes leave to the line-by-line logic still give its records and problems."""
    text = "\n".join([
        "[root@sm01 ~]# ibnetdiscover",
        "switchguid=0x5442ba00003080(5442ba00003080)",
        'Switch\t24 "S-005442ba00003080"\t\t# "ISR9024 Voltaire" base port 0 lid 6 lmc 0',
        '[1]\t"H-0008f10403961354"[1](8f10403961355)\t\t# "MT23108" lid 4 4xSDR',
        '[2][ext 1]\t"H-0008f10403961355"[1]\t\t# "a \\"quoted\\" host" lid 5 4xSDR',
        '[3]\t"H-0008f10403961356"[1]\t\t# lid 16 lmc 0 "wrong shape for a switch" lid 3 4xSDR',
        "ibwarn: [3] port 4 query failed",
        'Ca\t2 "H-0008f10403960984"\t\t# "gpu-a017 mlx5_0"',
        '[1](8f10403960985)\t"S-005442ba00003080"[6]\t\t# lid 16 lmc 1 "ISR9024 Voltaire" lid 6 4xSDR',
        '[2](8f10403960986)\t"S-005442ba00003080"[7]\t\t# lid 17 lmc 1 "ISR9024 Voltaire" lid 6 4xSDR',
        "$ ibnetdiscover -p",
        "SW     6  1 0x005442ba00003080 4x SDR - CA    16  1 0x0008f10403960985 ( 'ISR9024 Voltaire' - 'gpu-a017' )",
        "SW     6  9 0x005442ba00003080 4x ???                                    'ISR9024 Voltaire'",
        "SW     6 10 0x005442ba00003080 4x SDR - broken",
        '[5]\t"H-0008f10403961357"[1]\t\t# "after a prompt" lid 9 4xSDR',
        'Switch\t24 "S-005442ba00003099"\t\t# "cut" base port 0 lid 7 lmc 0',
    ])
    res = _same(text, host="sm01")
    links = [r for r in res.records if isinstance(r, FabricLink)]
    assert [(lk.line, lk.port, lk.width) for lk in links] == [
        (4, 1, "4X"), (5, 2, "4X"), (6, 3, None), (9, 1, "4X"), (10, 2, "4X"), (12, 1, "4X")]
    ca = next(r for r in res.records if isinstance(r, FabricNode) and r.node_type == "CA")
    assert ca.lid == 16  # the first port line of a CA gives its LID
    assert [r.line for r in res.records if isinstance(r, ToolError)] == [7]
    assert [r.line for r in res.records if isinstance(r, FabricPortState)] == [13, 14]  # 14 also has a problem
    assert res.problems == [
        "line 14: unparseable peer part '- broken'",
        "line 15: port line outside a node block (node line missing or cut off)",
        "line 6: unparseable port comment 'lid 16 lmc 0 \"wrong shape for a switch\" lid 3 4xSDR'",
        "truncated: switch block at line 16 ends early (no port shown)",
    ]


# generated mixtures: real lines from every sample plus lines the fast shapes must hand over
_POOL = sorted({ln for p in FILES[:8] for ln in p.read_text().split("\n")[:400]})
_ODD = [
    "", "   ", "\t", "\x0c", "#", "# ibnetdiscover", "$ ibnetdiscover -p", "[admin@ufm01 ~]$ sudo ibnetdiscover",
    "ibpanic: [4321] discover failed", "src/ibnetdisc.c:811; iberror: failed", "Failed to open device",
    'Rt\t2 "R-00aa"\t\t# "router one" lid 3', 'Switch\t4 "S-00bb"', 'Ca\t1 "H-00dd"\t\t# ""', 'Ca 1 "H-00ee" # "open',
    '[5]\t"H-0d"[1]\t\t# "" lid 7 1xSDR', '[6](0e) \t"S-0f"[7]\t\t# lid 8 lmc 1 "" lid 2 12xFDR10', '[4]\t"H-0c"[1]',
    '[7]\t"S-10"[7]\t\t# "z" lid 2 4xNDR trailing', '  [1]\t"H-0001"[1]\t\t# "x" lid 1 4xNDR',
    '[9]\t"X-01"[2]\t\t# "m"',
    "SW  1 2 0x01 4x EDR - SW 3 4 0x02 ( 'a'b' - 'c' )", "CA 1 1 0x0a 3x QDR", "RT 5 1 0x0b 4x ???   ", "caguid=0x1 x",
    '[13] "S-01"[2] # "' + "x" * 300 + '" lid 6 4xNDR', "[\u0661]\t\"H-01\"[1]\t\t# \"u\" lid \u0662 4xNDR",
]


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_POOL) | st.sampled_from(_ODD), max_size=60), st.sampled_from([None, "h1"]),
       st.sampled_from([1, 3, 1 << 16]))
def test_generated_mixtures_match_line_by_line(lines: list[str], host: str | None, chunk: int) -> None:
    saved = ibnetdiscover._CHUNK
    ibnetdiscover._CHUNK = chunk
    try:
        _same("\n".join(lines), host)
    finally:
        ibnetdiscover._CHUNK = saved


def test_odd_port_lines_inside_long_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Port lines whose comment does not fit their block, between many usual ones: each is read with the state of
    its own block (the CA's LID still comes from its first usual port line), the others column-wise."""
    path = next(p for p in FILES if p.suffix == ".topo")
    lines = path.read_text().split("\n")
    switches = [i for i, ln in enumerate(lines) if ln.startswith("Switch")]
    cas = [i for i, ln in enumerate(lines) if ln.startswith("Ca")]
    sw, ca = switches[len(switches) // 2], cas[len(cas) // 2]
    assert sw < ca
    sw_port, ca_port = lines[sw + 1], lines[ca + 1]
    lines[sw + 2] = ca_port  # a CA port's comment in a switch block
    lines[ca + 1:ca + 1] = [sw_port]  # a switch port's comment as a CA's first port line; its second gives the LID
    text = "\n".join(lines)
    res = _same(text)
    assert [p.split(":")[0] for p in res.problems] == [f"line {sw + 3}", f"line {ca + 2}"]
    fed: list[int] = []
    feed = ibnetdiscover._Lines.feed
    monkeypatch.setattr(ibnetdiscover._Lines, "feed", lambda self, n, line: (fed.append(n), feed(self, n, line)))
    _fast(text)
    assert [n for n in fed if not lines[n - 1].startswith("#")] == [sw + 3, ca + 2]
    monkeypatch.setattr(ibnetdiscover, "_CHUNK", 5)
    _same(text)


def test_cleaned_lines_and_wide_characters() -> None:
    """A CR left before a colour code ends a node line's text until ``clip``; non-ASCII text and lone surrogates
    (undecodable bytes) go through the per-line kinds too."""
    text = "\n".join([
        'Switch\t2 "S-00bb"\t\t# "sw \u00e9" base port 0 lid 4 lmc 0\r\x1b[0m',
        '[1]\t"H-00dd"[1](dd)\t\t# "h\udcff" lid 9 4xNDR',
        'Ca\t1 "H-00dd"\t\t# "h\udcff"\r\x1b[0m',
        '[1](dd)\t"S-00bb"[1]\t\t# lid 9 lmc 0 "sw \u00e9" lid 4 4xNDR\r\x1b[0m',
        '[2](dd)\t"S-00bb"[2]\t\t# lid 9 lmc 0 "sw \u00e9" lid 4 4xNDR',
    ])
    res = _same(text)
    assert [r.text for r in res.records if isinstance(r, FabricNode)] == [
        'Switch\t2 "S-00bb"\t\t# "sw \u00e9" base port 0 lid 4 lmc 0', 'Ca\t1 "H-00dd"\t\t# "h\udcff"']
    _same(text.replace("\r\x1b[0m", ""))


def test_collector_state_is_restored() -> None:
    text = (DATA / "topology_file_example_manpage.txt").read_text()
    assert gc.isenabled()
    _fast(text)
    assert gc.isenabled()
    gc.disable()
    try:
        _fast(text)
        assert not gc.isenabled()  # a caller's own pause is left alone
    finally:
        gc.enable()


def test_build_gives_the_constructors_records() -> None:
    rows = [
        dict(source="s", line=3, text="t", host=None, guid="0x01", port=1, peer_guid="0x02", peer_port=7, width="4X",
             speed="NDR", state=None, phys_state=None, lid=5, peer_lid=None, description="d", peer_description=""),
        dict(source="s", line=4, text="u", host="h", guid="0x03", port=2, peer_guid="0x04", peer_port=1, width=None,
             speed=None, state="Active", phys_state="LinkUp", lid=None, peer_lid=9, description=None,
             peer_description="p"),
    ]
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    built = ibnetdiscover._build(FabricLink, 2, **cols)
    expected = [FabricLink(**r) for r in rows]
    assert built == expected
    assert [repr(b) for b in built] == [repr(e) for e in expected]
    assert [hash(b) for b in built] == [hash(e) for e in expected]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built[0].port = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="not its fields"):
        ibnetdiscover._build(FabricLink, 2, **{k: v for k, v in cols.items() if k != "lid"})
    with pytest.raises(ValueError, match="not 2 values"):
        ibnetdiscover._build(FabricLink, 2, **{**cols, "lid": iter([1])})
    with pytest.raises(ValueError, match="not 2 values"):
        ibnetdiscover._build(FabricLink, 2, **{**cols, "lid": [1, 2, 3]})


# ----------------------------------------------------------------------------------------------- the fabric


def _reference_build_fabric(frames: dict[str, pd.DataFrame]) -> Fabric | None:
    """The per-row networkx build that ``build_fabric`` replaced (pandas row access, one ``add_node``/``add_edge``
    per record, Dijkstra for the tiers), kept as the reference it must agree with."""
    nodes = frames.get("FabricNode")
    links = frames.get("FabricLink")
    if links is None or links.empty:
        return None
    g = nx.MultiGraph()
    ports: dict[tuple[str, int], PortInfo] = {}
    by_lid: dict[int, str] = {}
    by_host_dev: dict[tuple[str, str], str] = {}

    def add_node(guid: str, ntype: str | None, desc: str | None, lid: Any) -> None:
        if guid not in g:
            g.add_node(guid, type=ntype, desc=desc, lid=lid)
        d = g.nodes[guid]
        if ntype and not d.get("type"):
            d["type"] = ntype
        if desc and not d.get("desc"):
            d["desc"] = desc
        if lid and not d.get("lid"):
            d["lid"] = lid

    if nodes is not None and not nodes.empty:
        for guid, ntype, desc, lid in zip(nodes["guid"], nodes["node_type"], nodes["description"], nodes["lid"],
                                          strict=True):
            add_node(str(guid), sval(ntype), sval(desc), val(lid))
    for r in links.itertuples(index=False):
        a, b = str(r.guid), str(r.peer_guid)
        add_node(a, None, sval(r.description), val(r.lid))
        add_node(b, None, sval(r.peer_description), val(r.peer_lid))
        pa, pb = int(r.port), int(r.peer_port)
        width, speed = sval(r.width), sval(r.speed)
        for (x, px), (y, py) in (((a, pa), (b, pb)), ((b, pb), (a, pa))):
            info = ports.get((x, px))
            if info is None:
                ports[(x, px)] = PortInfo(x, px, (y, py), width, speed, sval(r.state), (str(r.source), int(r.line)))
            elif (link_gbps(width, speed) or 1e9) < (link_gbps(info.width, info.speed) or 1e9):
                info.width, info.speed, info.evidence = width, speed, (str(r.source), int(r.line))
        key = (min((a, pa), (b, pb)), max((a, pa), (b, pb)))
        if not g.has_edge(a, b, key=key):
            g.add_edge(a, b, key=key, width=sval(r.width), speed=sval(r.speed))
    states = frames.get("FabricPortState")
    if states is not None and not states.empty:
        for r in states.itertuples(index=False):
            k = (str(r.guid), int(r.port))
            if k not in ports:
                add_node(k[0], None, sval(r.description), val(r.lid))
                ports[k] = PortInfo(k[0], k[1], None, sval(r.width), sval(r.speed), sval(r.state),
                                    (str(r.source), int(r.line)))
    for guid, d in g.nodes(data=True):
        if not d.get("type"):
            d["type"] = "SW" if g.degree(guid) > 2 else "CA"
    ibp = frames.get("IbPort")
    guid_host: dict[str, tuple[str, str]] = {}
    if ibp is not None and not ibp.empty:
        for host, dev, pg, ng in zip(ibp["host"], ibp["device"], ibp["port_guid"], ibp["node_guid"], strict=True):
            h = sval(host)
            for gg in (sval(pg), sval(ng)):
                if h and gg:
                    guid_host.setdefault(gg.lower(), (h, str(dev)))
    ca_desc = re.compile(
        r"^(?P<host>[A-Za-z0-9][\w.\-]*)\s+(?P<dev>(?:mlx\d+_(?:bond_)?\d+|HCA-\d+|ib[\w]+|irdma\d+|bnxt_re\d+))\b")
    sw_name = re.compile(r"^(?:MF\d+;)?(?P<name>[^:;]+?)(?::\S+)?$")
    for guid, d in g.nodes(data=True):
        if d["type"] == "CA":
            m = ca_desc.match(d.get("desc") or "")
            if m:
                d["host"], d["device"] = m["host"], m["dev"]
            elif guid in guid_host:
                d["host"], d["device"] = guid_host[guid]
            if d.get("host") and d.get("device"):
                by_host_dev[(d["host"], d["device"])] = guid
        else:
            desc = d.get("desc")
            m = sw_name.match(desc.strip()) if desc else None
            d["name"] = ((m.group("name") if m else desc).strip() or guid) if desc else guid
        if d.get("lid"):
            by_lid[int(d["lid"])] = guid
    cas = [n for n, d in g.nodes(data=True) if d["type"] == "CA"]
    for n in cas:
        g.nodes[n]["tier"] = 0
    if cas:
        for n, dd in nx.multi_source_dijkstra_path_length(g, cas).items():
            if g.nodes[n]["type"] != "CA":
                g.nodes[n]["tier"] = int(dd)
    return Fabric(graph=g, ports=ports, by_lid=by_lid, by_host_dev=by_host_dev)


def _assert_same_fabric(fab: Fabric | None, ref: Fabric | None) -> None:
    assert (fab is None) == (ref is None)
    if fab is None or ref is None:
        return
    g, h = fab.graph, ref.graph
    def nodes(graph: nx.MultiGraph) -> list[tuple[str, list[tuple[str, Any]]]]:
        return [(n, list(d.items())) for n, d in graph.nodes(data=True)]  # attribute order too

    assert nodes(g) == nodes(h)
    assert list(g.edges(keys=True, data=True)) == list(h.edges(keys=True, data=True))
    assert [(n, list(g.adj[n])) for n in g] == [(n, list(h.adj[n])) for n in h]
    assert list(fab.ports.items()) == list(ref.ports.items())
    assert list(fab.by_lid.items()) == list(ref.by_lid.items())
    assert list(fab.by_host_dev.items()) == list(ref.by_host_dev.items())
    assert fab.summary() == ref.summary()
    assert fab.switches() == ref.switches() and fab.hcas() == ref.hcas()
    for guid, port in fab.ports:
        assert fab.peer(guid, port) == ref.peer(guid, port)
        assert fab.label(guid, port) == ref.label(guid, port)
        assert (fab.kind(guid), fab.tier(guid), fab.host_device(guid)) == (
            ref.kind(guid), ref.tier(guid), ref.host_device(guid))
        assert fab.leaf_of(guid) == ref.leaf_of(guid)
    for host, dev in ref.by_host_dev:
        assert fab.hca(host, dev) == ref.hca(host, dev)


def _fabric_bundles() -> list[Path]:
    """Fixture bundles with a topology source (topology file, ports report, iblinkinfo, ibqueryerrors -r)."""
    out = []
    for bundle in sorted(p.parent for p in (ROOT / "fixtures").rglob("expect.yaml")):
        for p in bundle.rglob("*"):
            if p.is_file() and p.suffix not in (".gz", ".yaml", ".md"):
                head = p.read_bytes()[:65536].decode("utf-8", "replace")
                if any(m.sniff(head) >= 60 for m in (ibnetdiscover, iblinkinfo, ibqueryerrors)):
                    out.append(bundle)
                    break
    return out


BUNDLES = _fabric_bundles()


def test_fabric_bundles_found() -> None:
    assert len(BUNDLES) >= 5


@pytest.mark.parametrize("bundle", BUNDLES, ids=[_id(b) for b in BUNDLES])
def test_fabric_matches_reference_on_fixture_bundles(bundle: Path) -> None:
    files = [str(p) for p in sorted(bundle.rglob("*")) if p.is_file() and p.suffix not in (".gz", ".yaml", ".md")]
    frames = build_frames(gather(files).records)
    fab = build_fabric(frames)
    assert fab is not None and fab.ports
    _assert_same_fabric(fab, _reference_build_fabric(frames))


def _random_frames(rng: random.Random) -> dict[str, pd.DataFrame]:
    """Frames with what real sources leave out or get wrong: missing types and LIDs (NaN columns), LID 0,
    ends that disagree on the speed, cables seen once or twice, loops, IbPort-only hosts, ports without peer."""
    guids = [f"0x{rng.randrange(1, 40):016x}" for _ in range(rng.randrange(2, 30))]
    descs = [None, "", "gpu-a001 mlx5_0", "gpu-a002 mlx5_1", "MF0;leaf01:MQM9700/U1", "spine-3", "odd", "n7 HCA-1"]
    recs: list[Record] = []
    for i in range(rng.randrange(0, 15)):
        recs.append(FabricNode(source="n", line=i, text="t", guid=rng.choice(guids),
                               node_type=rng.choice([None, "SW", "CA", "RT", ""]), description=rng.choice(descs),
                               ports=rng.choice([None, 1, 36]), lid=rng.choice([None, 0, 1, 5, 7])))
    for i in range(rng.randrange(1, 60)):
        recs.append(FabricLink(source=rng.choice(["a", "b"]), line=i, text="t", guid=rng.choice(guids),
                               port=rng.randrange(1, 5), peer_guid=rng.choice(guids), peer_port=rng.randrange(1, 5),
                               width=rng.choice([None, "4X", "2X", "1X", "12X", "3X"]),
                               speed=rng.choice([None, "NDR", "HDR", "EDR", "???"]),
                               state=rng.choice([None, "Active", "Down"]), phys_state=None,
                               lid=rng.choice([None, 0, 3, 9]), peer_lid=rng.choice([None, 0, 4]),
                               description=rng.choice(descs), peer_description=rng.choice(descs)))
    for i in range(rng.randrange(0, 10)):
        recs.append(FabricPortState(source="s", line=i, text="t", guid=rng.choice(guids), port=rng.randrange(1, 6),
                                    state=rng.choice([None, "Down", "Active", "Init"]), phys_state=None,
                                    width=rng.choice([None, "4X"]), speed=rng.choice([None, "NDR"]),
                                    lid=rng.choice([None, 2]), description=rng.choice(descs), could_be=None))
    for i in range(rng.randrange(0, 5)):
        g = rng.choice(guids)
        recs.append(IbPort(source="i", line=i, text="t", host=rng.choice([None, "gpu-x1", "gpu-x2"]),
                           device=rng.choice(["mlx5_0", "mlx5_3"]), port=1, state=None, phys_state=None,
                           rate_gbps=None, width=None, speed=None, link_layer=None, lid=None, sm_lid=None,
                           port_guid=rng.choice([None, g, g.upper()]), node_guid=rng.choice([None, g]), ca_type=None,
                           firmware=None))
    rng.shuffle(recs)
    return build_frames(recs)


@pytest.mark.slow
def test_fabric_matches_reference_on_irregular_frames() -> None:
    rng = random.Random(20240614)
    kinds: dict[str, int] = defaultdict(int)
    for _ in range(200):
        frames = _random_frames(rng)
        fab = build_fabric(frames)
        _assert_same_fabric(fab, _reference_build_fabric(frames))
        if fab is not None:
            kinds["degraded"] += bool(fab.summary()["degraded_links"])
            kinds["down"] += bool(fab.summary()["ports_down"])
            kinds["ibport_host"] += any(k for k in fab.by_host_dev if k[0].startswith("gpu-x"))
    assert all(kinds[k] > 5 for k in ("degraded", "down", "ibport_host")), kinds  # the cases were exercised


def test_fabric_of_a_simulated_fat_tree_topology() -> None:
    """Answers read off the fixture's topology file, independent of either build."""
    path = next(p for p in FILES if p.suffix == ".topo")
    res = ibnetdiscover.parse(path.read_text(), "topo")
    fab = build_fabric(build_frames(res.records))
    assert fab is not None
    links = [r for r in res.records if isinstance(r, FabricLink)]
    for lk in links:
        assert fab.peer(lk.guid, lk.port) == (lk.peer_guid, lk.peer_port)
    first = links[0]  # a switch port: the switch's name is its description without the 'MF0;' and ':model' parts
    assert fab.name(first.guid) == re.sub(r"^MF0;|:.*$", "", first.description or "")
    hca = next(lk for lk in links if lk.peer_description and " mlx5_" in lk.peer_description)
    host, dev = hca.peer_description.split()  # type: ignore[union-attr]
    assert fab.hca(host, dev) == hca.peer_guid and fab.leaf_of(hca.peer_guid) == {hca.guid}
    assert fab.tier(hca.peer_guid) == 0 and fab.tier(hca.guid) == 1
    assert fab.summary()["cables"] == len({tuple(sorted([(lk.guid, lk.port), (lk.peer_guid, lk.peer_port)]))
                                           for lk in links})


def test_fabric_ports_and_cables_made_on_first_read_are_the_same() -> None:
    """The ports made one at a time when first read, and the cables added when the adjacency is first read, are
    what reading everything at once gives (same objects, same graph), for copies and pickles too."""
    import pickle

    path = next(p for p in FILES if p.suffix == ".topo")
    frames = build_frames(ibnetdiscover.parse(path.read_text(), "topo").records)
    fab, ref = build_fabric(frames), _reference_build_fabric(frames)
    assert fab is not None and ref is not None
    some = list(ref.ports)[::7]
    got = [fab.ports.get(k) for k in some]  # before anything is iterated
    assert all(k in fab.ports for k in some) and len(fab.ports) == len(ref.ports)
    for bad in [("0x" + "f" * 16, 1), (some[0][0], 9999), (some[0][0], "1"), ("x",), None, (some[0][0], 1.5)]:
        assert fab.ports.get(bad) is None and bad not in fab.ports  # type: ignore[arg-type]
    assert fab.ports.get((some[0][0], float(some[0][1]))) is got[0]  # a dict finds 1.0 as 1
    assert all(g in fab.graph for g in ref.graph) and fab.graph.pending is not None  # nodes only so far
    copied = pickle.loads(pickle.dumps(fab.graph))
    assert list(copied.edges(keys=True, data=True)) == list(ref.graph.edges(keys=True, data=True))
    assert list(fab.graph.copy().edges(keys=True, data=True)) == list(ref.graph.edges(keys=True, data=True))
    _assert_same_fabric(fab, ref)
    assert [fab.ports[k] for k in some] == got and all(fab.ports[k] is g for k, g in zip(some, got, strict=True))


def test_fabric_neighbours_read_off_the_pending_cables() -> None:
    """``graph.neighbors`` (what ``leaf_of`` asks) answered from the cable table while the cables are pending is
    what the reference graph answers, in the same order, and leaves the cables pending; once the adjacency is
    read, networkx answers the same."""
    rng = random.Random(7)
    cases = [build_frames(ibnetdiscover.parse(p.read_text(), "topo").records) for p in FILES if p.suffix == ".topo"]
    cases += [_random_frames(rng) for _ in range(60)]
    for frames in cases:
        fab, ref = build_fabric(frames), _reference_build_fabric(frames)
        if fab is None or ref is None:
            assert fab is None and ref is None
            continue
        for guid in ref.graph:
            assert list(fab.graph.neighbors(guid)) == list(ref.graph.neighbors(guid)), guid
            assert fab.leaf_of(guid) == ref.leaf_of(guid)
        assert fab.graph.pending is not None
        with pytest.raises(nx.NetworkXError):
            fab.graph.neighbors("0xnot-a-node")
        assert fab.graph.pending is not None
        fab.graph.adj  # noqa: B018 - reads the adjacency: the cables are added
        assert fab.graph.pending is None
        assert all(list(fab.graph.neighbors(g)) == list(ref.graph.neighbors(g)) for g in ref.graph)
