"""The InfiniBand QoS path extractor (extractors/qos_path.py) on frames built in the test."""

from __future__ import annotations

from diagnose.evidence.context import Context
from diagnose.evidence.extractors.qos_path import ib_qos_path
from diagnose.evidence.frames import build_frames
from diagnose.parsers._common import EnvSetting
from diagnose.parsers._fabric import FabricLink, FabricNode, SmConfigOption
from diagnose.parsers.smpquery_sl2vl import Sl2VlEntry
from diagnose.parsers.smpquery_vlarb import VlArbEntry

MOD8 = (0, 1, 2, 3, 4, 5, 6, 7) * 2


def ctx_of(*records: object) -> Context:
    return Context(frames=build_frames(list(records)), formats=set())  # type: ignore[arg-type]


def sl2vl(lid: int, out_port: int, vls: tuple[int, ...] = MOD8, ins: int = 3, line: int = 1) -> list[Sl2VlEntry]:
    if out_port == 0:
        return [Sl2VlEntry(source="q.txt", line=line, text="ports: in  0, out  0:", lid=lid, guid=None, in_port=0,
                           out_port=0, vls=vls)]
    return [Sl2VlEntry(source="q.txt", line=line + i, text=f"ports: in {i:2d}, out {out_port:2d}:", lid=lid, guid=None,
                       in_port=i, out_port=out_port, vls=vls) for i in range(ins)]


def vlarb(lid: int, port: int, low: list[tuple[int, int]], high: list[tuple[int, int]], line: int = 50) -> list[
        VlArbEntry]:
    out = []
    for table, entries, ln in (("low", low, line), ("high", high, line + 1)):
        for i, (vl, w) in enumerate(entries):
            out.append(VlArbEntry(source="q.txt", line=ln, text="WEIGHT: |...", lid=lid, guid=None, port=port,
                                  table=table, index=i, vl=vl, weight=w, cap=8))
    return out


def env(value: str, host: str = "gpu-1", line: int = 1) -> EnvSetting:
    return EnvSetting(source="job.log", line=line, text=f"NCCL_IB_SL={value}", host=host, name="NCCL_IB_SL",
                      value=value, origin="env_dump")


def kinds(found: list) -> dict[str, object]:
    return {f.kind: f for f in found}


NO_VL1 = [(0, 64), (2, 64), (3, 32)]
WITH_VL1 = [(0, 64), (1, 64), (2, 64), (3, 32)]
HIGH = [(4, 64)]


def test_sl_on_a_vl_without_weight_is_starved_and_placed_at_the_switch_port_by_name() -> None:
    topo = [FabricNode(source="t", line=1, text="Switch", guid="0x0000000000000a01", node_type="SW",
                       description="MF0;leaf01:MQM9700/U1", ports=65, lid=3),
            FabricLink(source="t", line=2, text="[33]", guid="0x0000000000000a01", port=33,
                       peer_guid="0x0000000000000b01", peer_port=1, width="4X", speed="NDR", state="Active",
                       phys_state="LinkUp", lid=3, peer_lid=2, description="MF0;leaf01:MQM9700/U1",
                       peer_description="MF0;spine01:MQM9700/U1")]
    ctx = ctx_of(env("1"), *sl2vl(3, 33), *vlarb(3, 33, NO_VL1, HIGH), *topo)
    f = kinds(ib_qos_path(ctx))
    assert set(f) == {"ib_sl_starved_vl"}
    st = f["ib_sl_starved_vl"]
    assert {k: st.attrs[k] for k in ("sl", "vl", "ports", "ports_checked", "weight", "reason", "sl_set")} == {
        "sl": 1, "vl": 1, "ports": 1, "ports_checked": 1, "weight": 0, "reason": "zero_weight", "sl_set": True}
    assert (st.location.device, st.location.port) == ("leaf01", 33)
    assert "NCCL_IB_SL=1" in st.summary and "leaf01/P33" in st.summary
    assert {e.file for e in st.evidence} == {"job.log", "q.txt"}


def test_weighted_vl_is_evidence_against() -> None:
    ctx = ctx_of(env("1"), *sl2vl(3, 33), *vlarb(3, 33, WITH_VL1, HIGH), *sl2vl(21, 0, line=20),
                 *vlarb(21, 1, WITH_VL1, HIGH, line=60))
    f = kinds(ib_qos_path(ctx))
    assert set(f) == {"ib_sl_vl_ok"}
    assert {k: f["ib_sl_vl_ok"].attrs[k] for k in ("sl", "vl", "ports", "min_weight", "table")} == {
        "sl": 1, "vl": 1, "ports": 2, "min_weight": 64, "table": "low"}


def test_unset_sl_is_sl0_and_the_opensm_default_high_table_serves_vl0() -> None:
    # OpenSM defaults: low 0:0,1:4..., high 0:4: VL 0 has no low weight but a high one
    ctx = ctx_of(*sl2vl(3, 33), *vlarb(3, 33, [(0, 0), (1, 4), (2, 4)], [(0, 4), (1, 0)]))
    f = kinds(ib_qos_path(ctx))
    assert set(f) == {"ib_sl_vl_ok"}
    assert f["ib_sl_vl_ok"].attrs["sl"] == 0 and f["ib_sl_vl_ok"].attrs["sl_set"] is False
    assert f["ib_sl_vl_ok"].attrs["table"] == "high"


def test_vl15_drops_and_no_topology_names_the_lid() -> None:
    drop = (0, 15) + MOD8[2:]
    f = kinds(ib_qos_path(ctx_of(env("1"), *sl2vl(7, 5, vls=drop))))
    st = f["ib_sl_starved_vl"]
    assert st.attrs["reason"] == "dropped" and st.attrs["vl"] == 15
    assert (st.location.device, st.location.port) == ("lid 7", 5)


def test_switch_port_0_rows_are_not_the_path() -> None:
    # `smpquery sl2vl <switch lid>` without a port prints the management port's rows: no data crosses it
    rows = sl2vl(3, 0) + [Sl2VlEntry(source="q", line=9, text="r", lid=3, guid=None, in_port=4, out_port=0, vls=MOD8)]
    assert ib_qos_path(ctx_of(env("1"), *rows)) == []


def test_ports_mapping_the_sl_to_different_vls_are_inconsistent() -> None:
    other = (0, 2) + MOD8[2:]
    ctx = ctx_of(env("1"), *sl2vl(3, 33), *sl2vl(4, 12, vls=other, line=10), *sl2vl(5, 1, line=20),
                 *vlarb(3, 33, WITH_VL1, HIGH), *vlarb(4, 12, WITH_VL1, HIGH), *vlarb(5, 1, WITH_VL1, HIGH))
    f = kinds(ib_qos_path(ctx))
    inc = f["ib_sl2vl_inconsistent"]
    assert inc.attrs["vls"] == "1,2" and (inc.location.device, inc.location.port) == ("lid 4", 12)
    assert "ib_sl_vl_ok" in f  # both VLs are weighted


def test_another_hosts_sl_on_the_same_vl_is_shared() -> None:
    # SL 9 -> VL 1 with 8 VLs (SL mod 8): the job on SL 1 and the other tenant on SL 9 share VL 1
    ctx = ctx_of(env("1", "gpu-1", 1), env("1", "gpu-2", 2), env("9", "gpu-7", 3), *sl2vl(3, 33),
                 *vlarb(3, 33, WITH_VL1, HIGH))
    sh = kinds(ib_qos_path(ctx))["ib_sl_shares_vl"]
    assert {k: sh.attrs[k] for k in ("sl", "other_sl", "vl", "ports")} == {"sl": 1, "other_sl": 9, "vl": 1, "ports": 1}
    ctx = ctx_of(env("1", "gpu-1", 1), env("1", "gpu-2", 2), env("2", "gpu-7", 3), *sl2vl(3, 33),
                 *vlarb(3, 33, WITH_VL1, HIGH))
    assert "ib_sl_shares_vl" not in kinds(ib_qos_path(ctx))


def conf(*pairs: tuple[str, str]) -> list[SmConfigOption]:
    return [SmConfigOption(source="opensm.conf", line=i + 1, text=f"{k} {v}", host="sm01", key=k, value=v)
            for i, (k, v) in enumerate(pairs)]


def test_configuration_stands_in_for_the_tables_and_names_the_setting() -> None:
    opts = conf(("qos", "TRUE"), ("qos_vlarb_high", "4:64"), ("qos_vlarb_low", "0:64,1:64,2:64"),
                ("qos_swe_vlarb_low", "0:64,2:64,3:32"), ("qos_swe_vlarb_high", "(null)"), ("qos_ca_sl2vl", "(null)"))
    st = kinds(ib_qos_path(ctx_of(env("1"), *opts)))["ib_sl_starved_vl"]
    # switch external ports read qos_swe_*, and so do switch-to-switch ports without qos_sw2sw_* of their own
    assert st.attrs["source"] == "opensm.conf" and st.attrs["vl"] == 1 and st.attrs["ports"] == 2
    assert "qos_swe_vlarb_low 0:64,2:64,3:32" in str(st.attrs["setting"]) and "switch external ports" in st.summary
    assert st.location.host == "sm01"
    assert any(e.file == "opensm.conf" and e.line == 4 for e in st.evidence)


def test_configuration_with_qos_off_or_a_weighted_vl() -> None:
    assert ib_qos_path(ctx_of(env("1"), *conf(("qos", "FALSE"), ("qos_vlarb_low", "0:64")))) == []
    ok = kinds(ib_qos_path(ctx_of(env("1"), *conf(("qos", "TRUE")))))  # OpenSM defaults: VL 1 low weight 4
    assert set(ok) == {"ib_sl_vl_ok"} and ok["ib_sl_vl_ok"].attrs["min_weight"] == 4


def test_unbounded_high_limit_preempts_a_low_only_vl() -> None:
    opts = conf(("qos", "TRUE"), ("qos_high_limit", "255"), ("qos_vlarb_high", "2:255"), ("qos_vlarb_low", "1:4"))
    st = kinds(ib_qos_path(ctx_of(env("1"), *opts)))["ib_sl_starved_vl"]
    assert st.attrs["reason"] == "preempted" and st.attrs["ports"] == 3
    bounded = conf(("qos", "TRUE"), ("qos_high_limit", "4"), ("qos_vlarb_high", "2:255"), ("qos_vlarb_low", "1:4"))
    assert set(kinds(ib_qos_path(ctx_of(env("1"), *bounded)))) == {"ib_sl_vl_ok"}


def test_measured_tables_win_over_the_configuration() -> None:
    opts = conf(("qos", "TRUE"), ("qos_vlarb_low", "0:64,2:64"))
    f = kinds(ib_qos_path(ctx_of(env("1"), *opts, *sl2vl(3, 33), *vlarb(3, 33, WITH_VL1, HIGH))))
    assert set(f) == {"ib_sl_vl_ok"} and f["ib_sl_vl_ok"].attrs["source"] == "measured"


# --------------------------------------------------------------------------------------------- qos-policy.conf


def policy(text: str) -> list:
    from diagnose.parsers import qos_policy

    res = qos_policy.parse(text, "qos-policy.conf", host="sm01")
    assert not res.problems, res.problems
    return res.records


def pctx(*records: object, formats: tuple[str, ...] = ("qos_policy", "opensm_conf")) -> Context:
    return Context(frames=build_frames(list(records)), formats=set(formats))  # type: ignore[arg-type]


ULPS_SL1 = "qos-ulps\n    default  : 1 # default SL\n    ipoib    : 1\nend-qos-ulps\n"
STARVE_VL1 = (("qos", "TRUE"), ("qos_vlarb_high", "4:64"), ("qos_vlarb_low", "0:64,2:64,3:32"))
SERVE_VL1 = (("qos", "TRUE"), ("qos_vlarb_high", "4:64"), ("qos_vlarb_low", "0:64,1:64,2:64,3:32"))


def test_policy_default_sl_on_a_vl_without_weight_starves_a_job_without_nccl() -> None:
    # no NCCL in the bundle: the job's connections get the SL the SA hands out, qos-ulps default : 1
    st = kinds(ib_qos_path(pctx(*conf(*STARVE_VL1), *policy(ULPS_SL1))))["ib_sl_starved_vl"]
    assert {k: st.attrs[k] for k in ("sl", "vl", "reason", "sl_set", "source", "sl_source", "sa_sl")} == {
        "sl": 1, "vl": 1, "reason": "zero_weight", "sl_set": False, "source": "opensm.conf",
        "sl_source": "qos-policy.conf", "sa_sl": 1}
    assert "SA PathRecord queries get" in st.summary and "NCCL would use NCCL_IB_SL" in st.summary
    assert any(e.file == "qos-policy.conf" and e.line == 2 for e in st.evidence)
    assert any(e.file == "opensm.conf" and e.line == 3 for e in st.evidence)


def test_policy_default_sl_on_a_weighted_vl_is_served() -> None:
    ok = kinds(ib_qos_path(pctx(*conf(*SERVE_VL1), *policy(ULPS_SL1))))
    assert set(ok) == {"ib_sl_vl_ok"}
    assert {k: ok["ib_sl_vl_ok"].attrs[k] for k in ("sl", "vl", "min_weight", "sl_source")} == {
        "sl": 1, "vl": 1, "min_weight": 64, "sl_source": "qos-policy.conf"}


def test_the_default_qos_level_wins_over_the_ulps_default() -> None:
    text = ULPS_SL1 + "qos-levels\n  qos-level\n    name: default\n    sl: 2\n  end-qos-level\nend-qos-levels\n"
    ok = kinds(ib_qos_path(pctx(*conf(*STARVE_VL1), *policy(text))))["ib_sl_vl_ok"]
    assert ok.attrs["sl"] == 2 and ok.attrs["sa_sl"] == 2  # VL 2: low weight 64
    assert "qos-level DEFAULT, line 8" in ok.summary


def test_an_nccl_job_keeps_nccl_ib_sl_and_the_starved_sa_sl_is_only_said() -> None:
    # NCCL takes NCCL_IB_SL (unset: 0) whatever the SA gives: VL 0 is weighted; the SA's SL 1 is not
    nccl = EnvSetting(source="job.log", line=1, text="NCCL_DEBUG=INFO", host="gpu-1", name="NCCL_DEBUG",
                      value="INFO", origin="env_dump")
    f = kinds(ib_qos_path(pctx(nccl, *conf(*STARVE_VL1), *policy(ULPS_SL1))))
    assert set(f) == {"ib_sl_vl_ok"}
    ok = f["ib_sl_vl_ok"]
    assert (ok.attrs["sl"], ok.attrs["sl_source"], ok.attrs["sa_sl"]) == (0, "NCCL default", 1)
    assert "get SL 1" in ok.summary and "neither VLArb table gives a weight" in ok.summary
    assert "NCCL uses NCCL_IB_SL (default 0) and never asks the SA" in ok.summary
    st = kinds(ib_qos_path(pctx(env("1"), *conf(*STARVE_VL1), *policy(ULPS_SL1))))["ib_sl_starved_vl"]
    assert (st.attrs["sl"], st.attrs["sl_set"], st.attrs["sl_source"]) == (1, True, "NCCL_IB_SL")


SETUP_STARVES_VL1 = """qos-setup
    vlarb-tables
        vlarb-scope
            group: Compute
            vlarb-high: 4:64
            vlarb-low: 0:64,2:64,3:32
        end-vlarb-scope
    end-vlarb-tables
end-qos-setup
qos-ulps
    default : 1
end-qos-ulps
"""


def test_qos_setup_tables_do_not_stand_in_for_opensm_conf() -> None:
    # OpenSM parses qos-setup and ignores it: opensm.conf's tables (VL 1 weighted) are what the ports get
    ok = kinds(ib_qos_path(pctx(*conf(*SERVE_VL1), *policy(SETUP_STARVES_VL1))))
    assert set(ok) == {"ib_sl_vl_ok"}
    got = ok["ib_sl_vl_ok"]
    assert got.attrs["policy_setup_ignored"] is True and got.attrs["source"] == "opensm.conf"
    assert "parsed and ignored by OpenSM" in got.summary
    assert any(e.file == "qos-policy.conf" and e.line == 6 for e in got.evidence)


def test_policy_with_qos_off_or_not_in_the_formats_changes_nothing() -> None:
    assert ib_qos_path(pctx(*conf(("qos", "FALSE")), *policy(ULPS_SL1))) == []
    # without the qos_policy format the policy's tables are not read (the fabric lane's declared reads)
    f = kinds(ib_qos_path(pctx(*conf(*STARVE_VL1), *policy(ULPS_SL1), formats=("opensm_conf",))))
    assert set(f) == {"ib_sl_vl_ok"} and "sl_source" not in f["ib_sl_vl_ok"].attrs


def test_measured_tables_still_win_and_take_the_policy_sl_for_a_job_without_nccl() -> None:
    ctx = pctx(*sl2vl(3, 33), *vlarb(3, 33, NO_VL1, HIGH), *conf(*SERVE_VL1), *policy(ULPS_SL1))
    st = kinds(ib_qos_path(ctx))["ib_sl_starved_vl"]
    assert (st.attrs["source"], st.attrs["sl"], st.attrs["sl_source"]) == ("measured", 1, "qos-policy.conf")
