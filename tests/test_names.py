"""GUIDs and LIDs named the way an operator finds them (diagnose.evidence.names)."""

from __future__ import annotations

from diagnose.evidence.context import Context
from diagnose.evidence.frames import build_frames
from diagnose.evidence.names import build, guid_for, label, name_for, node
from diagnose.parsers._fabric import FabricLink, FabricNode, SmInfo
from diagnose.parsers._ib import IbPort


def _ctx(*records: object) -> Context:
    frames = build_frames(list(records))  # type: ignore[arg-type]
    return Context(frames=frames, formats=set())


def _node(guid: str, kind: str, desc: str | None, lid: int | None = None, ports: int | None = 2) -> FabricNode:
    return FabricNode(source="ibnetdiscover.txt", line=1, text="", guid=guid, node_type=kind, description=desc,
                      ports=ports, lid=lid)


def _ibport(host: str, dev: str, port_guid: str, node_guid: str, lid: int) -> IbPort:
    return IbPort(source=f"{host}/ibstat.txt", line=3, text="", host=host, device=dev, port=1, state="Active",
                  phys_state="LinkUp", rate_gbps=100.0, width=None, speed=None, link_layer="InfiniBand", lid=lid,
                  sm_lid=1, port_guid=port_guid, node_guid=node_guid, ca_type=None, firmware=None)


def test_an_hca_is_named_by_the_host_in_its_node_description() -> None:
    ctx = _ctx(_node("0x0002c903000e0b72", "CA", "gpu-a101 HCA-1", lid=7),
               _node("0x0002c90200482d08", "SW", "MF0;switch-a:SX6036/U1", lid=4, ports=36))
    assert name_for(ctx, "0x0002c903000e0b72") == "gpu-a101"
    assert label(ctx, "0x0002c903000e0b72") == "gpu-a101 (0x0002c903000e0b72)"
    # a switch: its node description as the fabric model shortens it
    assert name_for(ctx, "0x0002c90200482d08") == "switch-a"
    n = node(ctx, lid=4)
    assert n is not None and (n.kind, n.host, n.device) == ("SW", None, "switch-a")


def test_guids_are_matched_whatever_way_the_tool_printed_them() -> None:
    ctx = _ctx(_node("0x0002c903000e0b72", "CA", "gpu-a101 mlx5_0"))
    for spelling in ("0x2c903000e0b72", "0x0002C903000E0B72", "0002:c903:000e:0b72", "2c903000e0b72"):
        assert name_for(ctx, spelling) == "gpu-a101", spelling
        assert label(ctx, spelling) == "gpu-a101 (0x0002c903000e0b72)"


def test_an_mlx4_port_guid_is_named_through_its_node_guid() -> None:
    # mlx4: port GUID = node GUID + port; the node GUID + 1 is the HCA's port 1 unless another node owns it
    ctx = _ctx(_node("0x0002c903000e0b70", "CA", "gpu-a101 mlx4_0", ports=2),
               _node("0x0002c903000e0b72", "CA", "gpu-a102 mlx4_0", ports=2))
    assert name_for(ctx, "0x0002c903000e0b71") == "gpu-a101"
    assert name_for(ctx, "0x0002c903000e0b72") == "gpu-a102"  # a node of its own, not gpu-a101's port 2
    assert name_for(ctx, "0x0002c903000e0b75") is None  # beyond gpu-a102's two ports


def test_a_default_node_description_is_named_by_the_host_folder_holding_its_guid() -> None:
    ctx = _ctx(_node("0x7cfe900300a595c0", "CA", "MT4123 ConnectX6 Mellanox Technologies", lid=12),
               _ibport("gpu-b207", "mlx5_2", "0x7cfe900300a595c0", "0x7cfe900300a595c0", 12))
    n = node(ctx, "0x7cfe900300a595c0")
    assert n is not None and (n.name, n.host, n.device, n.kind) == ("gpu-b207", "gpu-b207", "mlx5_2", "CA")


def test_host_tools_alone_name_a_port_by_its_port_guid_node_guid_and_lid() -> None:
    ctx = _ctx(_ibport("gpu-c01", "mlx5_0", "0x1070fd0300a1b2c4", "0x1070fd0300a1b2c4", 21),
               _ibport("gpu-c02", "mlx4_0", "0x0002c90300123401", "0x0002c90300123400", 22))
    assert name_for(ctx, "0x0002c90300123401") == "gpu-c02"
    assert name_for(ctx, "0x0002c90300123400") == "gpu-c02"
    assert name_for(ctx, lid=21) == "gpu-c01"
    assert guid_for(ctx, lid=22) == "0x0002c90300123401"


def test_link_ends_name_peers_that_no_node_record_lists() -> None:
    link = FabricLink(source="iblinkinfo.txt", line=5, text="", guid="0x248a070300f8a9b0", port=1,
                      peer_guid="0x7cfe900300b1c2d2", peer_port=1, width="4X", speed="HDR", state="Active",
                      phys_state="LinkUp", lid=3, peer_lid=40, description="MF0;leaf02:MQM8700/U1",
                      peer_description="gpu-d44 mlx5_1")
    ctx = _ctx(link)
    assert name_for(ctx, "0x7cfe900300b1c2d2") == "gpu-d44"
    assert name_for(ctx, lid=3) == "leaf02"


def test_an_sm_lid_from_sminfo_leads_to_the_named_node() -> None:
    smi = SmInfo(source="sminfo.txt", line=1, text="", sm_lid=4, sm_guid="0x0002c90200482d08", activity=10,
                 priority=14, state="MASTER")
    ctx = _ctx(smi, _node("0x0002c90200482d08", "SW", "MF0;switch-a:SX6036/U1", lid=None, ports=36))
    assert label(ctx, lid=4) == "switch-a (0x0002c90200482d08)"


def test_unknown_places_fall_back_to_the_guid_or_the_lid() -> None:
    ctx = _ctx(_node("0x0002c903000e0b72", "CA", "gpu-a101 HCA-1"))
    assert name_for(ctx, "0x0008f10400411111") is None
    assert label(ctx, "0x8f10400411111") == "0x0008f10400411111"
    assert label(ctx, lid=99) == "lid 99"
    assert name_for(ctx) is None
    empty = _ctx()
    assert label(empty, "0x1") == "0x0000000000000001" and name_for(empty, lid=1) is None


def test_the_table_is_built_once_per_context() -> None:
    ctx = _ctx(_node("0x0002c903000e0b72", "CA", "gpu-a101 HCA-1"))
    assert build(ctx) is build(ctx)
