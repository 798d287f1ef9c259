"""OpenSM partitions.conf: partition members with their membership."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import opensm_conf, opensm_partitions, smpquery_pkeys
from diagnose.parsers._pkeys import PartitionMember

DATA = Path(__file__).resolve().parents[1] / "data"


def _members(text: str) -> list[PartitionMember]:
    return [r for r in opensm_partitions.parse(text, "f").records if isinstance(r, PartitionMember)]


def test_opensm_doc_examples_default_membership_and_defmember() -> None:
    ms = _members((DATA / "opensm_partitions/opensm_doc_partition-config_examples.conf").read_text())
    first = [(m.line, m.partition, m.pkey, m.member, m.membership) for m in ms if m.line in (1, 4)]
    assert first == [
        (1, "Default", 0x7FFF, "ALL", "limited"), (1, "Default", 0x7FFF, "SELF", "full"),
        (4, "NewPartition", None, "0x0000000000123456", "full"),
        (4, "NewPartition", None, "0x0000003456789034", "limited"),  # '=limi': a prefix of limited
        (4, "NewPartition", None, "0x0000002134af2306", "limited"),
    ]
    share = {m.member: m.membership for m in ms if m.partition == "ShareIO"}
    assert share["0x0000000000123451"] == "full"  # defmember=full
    assert share["0x0000000000123453"] == "limited"  # no defmember: limited
    assert share["0x000000000012345c"] == "limited" and share["0x000000000012345d"] == "full"
    assert [(m.line, m.member, m.membership, m.ipoib) for m in ms if m.line >= 18] == [(24, "ALL", "full", True)]


def test_wrapped_definition_prompt_comment_prefix_and_cut() -> None:
    res = opensm_partitions.parse(
        (DATA / "opensm_partitions/var_prompt_wrapped_tenant_cut.conf").read_text(), "f")
    ms = [r for r in res.records if isinstance(r, PartitionMember)]
    assert {m.host for m in ms} == {"sm01"}
    tenant = [(m.line, m.member, m.membership) for m in ms if m.partition == "tenantA"]
    assert tenant == [(5, "0x0002c903000a1234", "full"), (6, "0x0002c903000a1240", "limited"),
                      (7, "ALL_SWITCHES", "full")]
    assert [(m.member, m.membership) for m in ms if m.partition == "storage"] == [
        ("ALL_CAS", "limited"), ("0x0002c903000a1250", "full")]
    assert [m.pkey for m in ms if m.partition == "tenantB"] == [2, 2]
    assert any("tenantB" in p for p in res.problems)


def test_sniff_zero_on_other_formats() -> None:
    for fmt in ("opensm_conf", "smpquery_pkeys", "sysfs_infiniband", "opensm_log"):
        for f in sorted((DATA / fmt).iterdir()):
            if f.suffix != ".md":
                assert opensm_partitions.sniff(f.read_text()) == 0, f
    own = (DATA / "opensm_partitions/ibsim_tutorial_p3_two_tenants.conf").read_text()
    assert opensm_conf.sniff(own) == 0 and smpquery_pkeys.sniff(own) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, (1 << 64) - 1), st.sampled_from(["full", "limited", "both", None])),
                min_size=1, max_size=8), st.integers(1, 0x7FFF))
def test_any_member_list_round_trips(members: list[tuple[int, str | None]], key: int) -> None:
    body = ",\n    ".join(f"0x{g:x}" + (f"={m}" if m else "") for g, m in members)
    ms = _members(f"t=0x{key:x} :\n    {body} ;\n")
    assert [(m.member, m.membership, m.pkey) for m in ms] == [
        (f"0x{g:016x}", m or "limited", key) for g, m in members]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_garbage_never_raises(text: str) -> None:
    opensm_partitions.parse(text, "f")
    opensm_partitions.sniff(text)
