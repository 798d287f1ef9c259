from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.models.records import ParseResult
from diagnose.parsers import nccl_log
from diagnose.parsers._common import EnvSetting

DATA = Path(__file__).resolve().parent.parent / "data"


def _parse_text(text: str, name: str) -> ParseResult:
    """The parse with its row batches turned back into one record object per line."""
    res = nccl_log.parse(text, name)
    return dataclasses.replace(res, records=nccl_log.as_records(res))


def _parse(name: str) -> ParseResult:
    return _parse_text((DATA / "nccl_log" / name).read_text(), name)


def test_roce_init_sample() -> None:
    res = _parse("slurmv4_nccl2.27.5_roce_init.log")
    kinds = Counter(type(r).__name__ for r in res.records)
    assert kinds["NcclNetInit"] == 8 and kinds["NcclInitRank"] == 8
    init = next(r for r in res.records if isinstance(r, nccl_log.NcclNetInit))
    assert init.line == 1 and init.host == "tpgds-aihub0008" and init.pid == 207008 and init.dev == 1
    assert init.net == "IB"
    assert init.devices == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_11")
    assert set(init.link_layers) == {"RoCE"} and init.oob_if == "enp25s0np0" and init.oob_ip == "10.99.91.63"
    rank9 = next(r for r in res.records if isinstance(r, nccl_log.NcclInitRank) and r.rank == 9)
    assert (rank9.nranks, rank9.cuda_dev, rank9.bus_id, rank9.phase) == (16, 1, "2a000", "START")
    hca = [r for r in res.records if isinstance(r, EnvSetting) and r.name == "NCCL_IB_HCA"]
    assert hca and hca[0].value.startswith("mlx5_0,mlx5_1") and hca[0].origin == "nccl_log"


def test_channels_and_gdrdma() -> None:
    res = _parse("slurmv4_nccl2.27.5_roce_init_complete.log")
    ch = [r for r in res.records if isinstance(r, nccl_log.NcclChannel)]
    assert ch[0].line == 2 and (ch[0].channel, ch[0].rank, ch[0].peer, ch[0].transport) == (2, 8, 9, "P2P")
    net = [c for c in ch if c.transport == "NET"]
    assert net and all(c.net == "IB" and c.gdr for c in net)
    rings = [r for r in res.records if isinstance(r, nccl_log.NcclRingsConnected)]
    assert rings[0].pxn == 0 and rings[0].gdr == 1


def test_warn_lines_with_timestamp_and_wrapped_completion_error() -> None:
    res = _parse("slurmv4_socketPollConnect_warn.log")
    warns = [r for r in res.records if isinstance(r, nccl_log.NcclWarn)]
    assert len(warns) == 6
    assert warns[0].timestamp == "2026-02-25 16:33:59" and warns[0].src == "misc/socket.cc:578"
    assert warns[0].message.startswith("socketPollConnect: connect to 10.82.101.249<54709> returned Connection refused")
    res = _parse("stas00_net_ib_completion_error.md")
    w = next(r for r in res.records if isinstance(r, nccl_log.NcclWarn))
    assert "with error 12" in w.message and w.host == "node-2"
    trace = [r for r in res.records if isinstance(r, nccl_log.NcclErrorTrace)]
    assert [(t.src, t.code) for t in trace][:1] == [("transport/net.cc:1134", 6)]


def test_variations_launcher_prefixes_socket_and_gdr_disabled() -> None:
    text = (
        "[1,0]<stdout>:gpu-a01:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0>\n"
        "0: gpu-a01:1234:1234 [0] NCCL INFO Using network Socket\n"
        "[default0]:gpu-a01:1234:1240 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
        "gpu-a02:99:99 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
        "gpu-a02:99:99 [3] NCCL INFO Connected all rings, use ring PXN 0 GDR 0\n"
        "gpu-a02:99:99 [3] NCCL INFO NET/IB : No device found.\n"
        "gpu-a02:99:99 [3] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
    )
    res = _parse_text(text, "job.out")
    by = {type(r).__name__: r for r in res.records}
    assert by["NcclNetInit"].net == "Socket" and by["NcclNetInit"].devices == ("eth0",)
    assert by["NcclUsingNetwork"].net == "Socket"
    assert by["NcclChannel"].net == "Socket" and by["NcclChannel"].net_dev == 0 and not by["NcclChannel"].gdr
    assert by["NcclGdrStatus"].enabled is False and by["NcclGdrStatus"].device == "mlx5_0"
    assert by["NcclRingsConnected"].gdr == 0
    assert by["NcclNetNoDevice"].net == "IB"
    assert by["EnvSetting"].name == "NCCL_IB_DISABLE" and by["EnvSetting"].value == "1"


def test_sniff_claims_nccl_logs_only() -> None:
    assert nccl_log.sniff((DATA / "nccl_log" / "slurmv4_nccl2.27.5_roce_init.log").read_text()) >= 90
    for other in ("ibstat", "perfquery", "dmesg", "df", "ulimit", "env"):
        for f in (DATA / other).iterdir():
            if f.is_file() and f.name != "README.md":
                assert nccl_log.sniff(f.read_text(errors="replace")[:65536]) < 40, f


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parse_never_raises(text: str) -> None:
    res = nccl_log.parse(text, "x")
    assert res.format == "nccl_log"
    assert 0 <= nccl_log.sniff(text) <= 100


def test_newer_info_lines_gdr_path_qp_comm_plugin_graph() -> None:
    text = (
        "dgx-a24:199045:199045 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 7000 / HCA 0 (distance 4 <= 4), read 0 mode Default\n"
        "dgx-a24:199045:199045 [0] NCCL INFO NET/IB: NCCL Dev 3 IbDev 3 Port 1 qpn 1234 mtu 5 LID 77 subnet-prefix fe80 FLID 0 fifoRkey=0x1\n"
        "gpu-d021:1248213:1248369 [6] NCCL INFO comm 0x559adf639cc0 rank 6 nRanks 16 nNodes 2 localRanks 8 localRank 6 MNNVL 0\n"
        "gpu-d021:1248213:1248369 [6] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
        "gpu-d021:1248213:1248369 [6] NCCL INFO Failed to open libibverbs.so[.1]\n"
        "gpu-d021:1248213:1248369 [6] NCCL INFO Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1\n"
    )
    res = _parse_text(text, "x.log")
    by = {type(r).__name__: r for r in res.records}
    g = by["NcclGdrPath"]
    assert (g.enabled, g.gpu, g.hca_index, g.distance, g.limit, g.line) == (True, "7000", 0, 4, 4, 1)
    q = by["NcclQpInfo"]
    assert (q.net_dev, q.port, q.qpn, q.mtu, q.lid) == (3, 1, 1234, 5, 77)
    c = by["NcclCommInfo"]
    assert (c.rank, c.nranks, c.nnodes, c.local_ranks) == (6, 16, 2, 8)
    cats = [r.category for r in res.records if isinstance(r, nccl_log.NcclPluginNote)]
    assert cats == ["plugin_absent", "verbs_unavailable"]
    gr = by["NcclGraph"]
    assert (gr.pattern, gr.nchannels, gr.bw_inter, gr.path_type) == (4, 16, 40.0, "NVL/PIX")
