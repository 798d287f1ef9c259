"""OpenSM qos-policy.conf: port groups, QoS levels, match rules, qos-ulps and the qos-setup tables."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import opensm_conf, opensm_partitions, qos_policy, registry
from diagnose.parsers.qos_policy import (
    QosLevel,
    QosMatchRule,
    QosPortGroupMember,
    QosSl2VlScope,
    QosUlp,
    QosVlArbScope,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "qos_policy"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _of(records: list, cls: type) -> list:
    return [r for r in records if isinstance(r, cls)]


def test_doc_full_policy_example() -> None:
    res = qos_policy.parse(_read("opensm_doc_full_policy_example.conf"), "qos-policy.conf")
    assert res.problems == []
    groups = [(m.line, m.group, m.kind, m.members) for m in _of(res.records, QosPortGroupMember)]
    assert groups == [
        (12, "Storage", "port-guid", ("0x10000000000001", "0x10000000000005-0x1000000000FFFA")),
        (13, "Storage", "port-guid", ("0x1000000000FFFF",)),
        (22, "Virtual Servers", "port-name", ("vs1 HCA-1/P1", "vs2 HCA-1/P1")),
        (28, "Partitions", "partition", ("Part1",)),
        (29, "Partitions", "pkey", ("0x1234",)),
        (36, "CAs and SM", "node-type", ("CA", "SELF")),
    ]
    levels = _of(res.records, QosLevel)
    assert [(lv.line, lv.name, lv.sl) for lv in levels] == [(56, "DEFAULT", 0), (62, "WholeSet", 1)]
    whole = levels[1]
    assert (whole.mtu_limit, whole.rate_limit, whole.packet_life, whole.pkey) == (4, 5, 8, "0x1234")
    rules = _of(res.records, QosMatchRule)
    assert [(r.index, r.line, r.level) for r in rules] == [
        (1, 80, "WholeSet"), (2, 88, "WholeSet"), (3, 94, "DEFAULT"), (4, 104, "WholeSet")]
    last = rules[3]
    assert (last.qos_class, last.source_groups, last.destination_groups, last.pkey) == (
        "7-9,11", "Virtual Servers", "Storage", "0x0F00-0x0FFF")
    assert last.service_id == "0x0000000000010000-0x000000000001FFFF"
    # the example's qos-setup holds comments only (OpenSM parses and ignores the section)
    assert _of(res.records, QosVlArbScope) == [] and _of(res.records, QosSl2VlScope) == []


def test_doc_qos_ulps_every_keyword_tabs_and_continuation_comments() -> None:
    res = qos_policy.parse(_read("opensm_doc_qos_ulps_all_keywords.conf"), "f")
    assert res.problems == []
    ulps = _of(res.records, QosUlp)
    assert len(ulps) == 15
    assert [(u.line, u.ulp, u.selector, u.sl) for u in ulps[:4]] == [
        (2, "default", None, 0), (3, "sdp", "port-num 30000", 0), (6, "sdp", "port-num 10000-20000", 0),
        (7, "sdp", None, 1)]
    assert (ulps[-1].line, ulps[-1].ulp, ulps[-1].selector, ulps[-1].sl) == (
        28, "any", "source-target-port-guid 0x9abcd", 8)  # a tab-indented line in the doc
    assert {u.ulp for u in ulps} == {"default", "sdp", "rds", "iser", "ipoib", "any", "srp"}


def test_shortest_policies() -> None:
    lv = _of(qos_policy.parse(_read("opensm_doc_shortest_qos_levels.conf"), "f").records, QosLevel)
    assert [(x.line, x.name, x.sl, x.text.strip()) for x in lv] == [(4, "DEFAULT", 0, "sl: 0")]
    ul = qos_policy.parse(_read("opensm_doc_qos_ulps_shortest.conf"), "f")
    assert [(u.line, u.ulp, u.sl) for u in _of(ul.records, QosUlp)] == [(2, "default", 0)] and ul.problems == []


def test_qos_setup_scopes_from_the_grammar() -> None:
    res = qos_policy.parse(_read("opensm_parser_y_qos_setup_comment_examples.conf"), "f")
    assert res.problems == []
    (arb,) = _of(res.records, QosVlArbScope)
    assert (arb.line, arb.groups, arb.across, arb.high_limit) == (7, ("Storage",), ("Storage",), 10)
    assert arb.high[:2] == ((0, 255), (1, 127)) and len(arb.high) == 8
    assert arb.low == ((8, 255), (9, 127), (10, 63), (11, 31), (12, 15), (13, 7), (14, 3))
    (s2v,) = _of(res.records, QosSl2VlScope)
    assert (s2v.line, s2v.groups, s2v.from_ports, s2v.to_ports, s2v.across_to, s2v.across_from) == (
        18, ("Part1",), "*", "*", ("Storage2",), ("Storage1",))
    assert s2v.vls == (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7)


def test_truncated_rfc_excerpt_keeps_what_was_read() -> None:
    res = qos_policy.parse(_read("ofa_general_2007_qos_policy_rfc_excerpt_truncated.conf"), "f")
    assert len(_of(res.records, QosPortGroupMember)) == 7
    (arb,) = _of(res.records, QosVlArbScope)  # cut at 'vlarb-low:': kept, with the high table only
    assert arb.line == 51 and len(arb.high) == 8 and arb.low == ()
    assert any("line 16" in p for p in res.problems)  # a comment wrapped without '#'
    assert any("vlarb-scope not closed" in p for p in res.problems)
    assert any("qos-setup not closed" in p for p in res.problems)


def test_prompt_names_the_host_illegal_sl_and_cut_section() -> None:
    res = qos_policy.parse(_read("var_prompt_qos_ulps_sm01.txt"), "f")
    assert {r.host for r in res.records} == {"sm01"}
    ulps = _of(res.records, QosUlp)
    assert [(u.line, u.selector, u.sl) for u in ulps if u.ulp == "any"] == [
        (12, "service-id 0x6234", 6), (16, "service-id 0x6234", 6)]  # "0x6234:6" without blanks
    assert [(u.line, u.sl) for u in ulps if u.ulp == "iser"] == [(17, None)]
    assert any("illegal SL value '17'" in p for p in res.problems)
    assert [(lv.line, lv.sl) for lv in _of(res.records, QosLevel)] == [(23, 3)]
    assert any("qos-levels not closed" in p for p in res.problems)


def test_crlf_empty_and_garbage() -> None:
    text = _read("opensm_doc_full_policy_example.conf")
    lf = qos_policy.parse(text, "f")
    crlf = qos_policy.parse(text.replace("\n", "\r\n"), "f")
    assert [(type(r), r.line) for r in crlf.records] == [(type(r), r.line) for r in lf.records]
    assert crlf.problems == []
    assert qos_policy.parse("", "f").records == [] and qos_policy.sniff("") == 0
    junk = qos_policy.parse("qos-levels\n  qos-level\n    sl: banana\n    color: red\n", "f")
    assert [lv.sl for lv in _of(junk.records, QosLevel)] == [None]
    assert any("color" in p for p in junk.problems) and any("banana" in p for p in junk.problems)


def test_sniff_own_samples_high_and_others_zero() -> None:
    for f in sorted(DATA.iterdir()):
        if f.suffix != ".md":
            assert qos_policy.sniff(f.read_text()) >= 80, f
            for mod in (opensm_conf, opensm_partitions):
                assert mod.sniff(f.read_text()) == 0, (mod.FORMAT, f)
    others = [p for p in (DATA.parent).rglob("*") if p.is_file() and p.parent.name != "qos_policy"]
    for f in others:
        try:
            head = f.read_text()[:65536]
        except (UnicodeDecodeError, OSError):
            continue
        assert qos_policy.sniff(head) == 0, f
    assert "qos_policy" in {m.FORMAT for m in registry()}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["default", "ipoib", "rds", "any, pkey 0x8001", "sdp, port-num 9"]),
                          st.integers(0, 15)), min_size=1, max_size=10))
def test_any_ulp_list_round_trips(rules: list[tuple[str, int]]) -> None:
    body = "".join(f"    {u} : {sl}\n" for u, sl in rules)
    ulps = _of(qos_policy.parse(f"qos-ulps\n{body}end-qos-ulps\n", "f").records, QosUlp)
    assert [(u.line, u.sl) for u in ulps] == [(i + 2, sl) for i, (_, sl) in enumerate(rules)]


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400))
def test_garbage_never_raises(text: str) -> None:
    res = qos_policy.parse(text, "f")
    assert not any(p.startswith("parser error") for p in res.problems)
    qos_policy.sniff(text)
