"""Fabric configuration files as the real tools print them: ``opensm.conf``, ``partitions.conf``,
``smpquery pkeys`` / ``sl2vl`` / ``vlarb`` captures and ``iblinkinfo``.

Layouts follow the real samples the project's parsers are tested on (``tests/data/<format>/``): opensm.conf as
``opensm --create-config`` writes it (linux-rdma/opensm ``opensm/osm_subnet.c``: ``#`` section banners, a comment
line, ``key value``), partitions.conf as in opensm ``doc/partition-config.txt``, smpquery tables as
``infiniband-diags/smpquery.c`` and libibmad ``dump.c`` print them (the ibsim tutorial session and the
linlinw5/rdma_ib_tutorial QoS chapter), iblinkinfo's default mode as ``infiniband-diags/iblinkinfo.c``
``print_port`` prints it, with ``ibdiag_common.c`` ``get_max_msg``'s ``Could be`` hints. Every capture starts
with the shell prompt line of the command that made it.
"""

from __future__ import annotations

from diagnose.simulate.scenario import Scenario
from diagnose.simulate.topology import End, Node

SPEED_TEXT = {"NDR": "106.25 Gbps", "HDR": "53.125 Gbps"}
DOWN_PORT = '==(                Down/ Polling)==>             [  ] "" ( )'


def opensm_conf(routing_engine: str, qos: dict[str, str] | None = None, partitions: str = "/etc/opensm/partitions.conf",
                ar_comment: bool = True) -> str:
    """An opensm.conf (the sections a responder greps: device attributes, partitioning, routing, QoS)."""
    q = {"qos": "FALSE", "qos_max_vls": "15", "qos_high_limit": "0", "qos_vlarb_high": "0:4",
         "qos_vlarb_low": "0:0,1:4,2:4,3:4,4:4,5:4,6:4,7:4", "qos_sl2vl": "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7",
         **(qos or {})}
    lines = [
        "#", "# DEVICE ATTRIBUTES OPTIONS", "#",
        "# The port GUID on which the OpenSM is running", "guid 0x0000000000000000", "",
        "# M_Key value sent to all ports qualifying all Set(PortInfo)", "m_key 0x0000000000000000", "",
        "# SM_Key value of the SM used for SM authentication", "sm_key 0x0000000000000001", "",
        "# Subnet prefix used on this subnet", "subnet_prefix 0xfe80000000000000", "",
        "# The LMC value used on this subnet", "lmc 0", "",
        "#", "# PARTITIONING OPTIONS", "#",
        "# Partition configuration file to be used", f"partition_config_file {partitions}", "",
        "# Disable partition enforcement by switches", "no_partition_enforcement FALSE", "",
        "#", "# SWEEP OPTIONS", "#",
        "# The number of seconds between subnet sweeps (0 disables it)", "sweep_interval 10", "",
        "# If TRUE every trap will cause a heavy sweep.", "# NOTE: successive identical traps (>10) are suppressed",
        "sweep_on_trap TRUE", "",
        "#", "# ROUTING OPTIONS", "#",
        "# Routing engine", "# Multiple routing engines can be specified separated by",
        "# commas so that specific ordering of routing algorithms will",
        "# be tried if earlier routing engines fail.",
        "# Supported engines: minhop, updn, dnup, file, ftree, lash,", "#    dor, torus-2QoS, dfsssp, sssp, chain,"
        + (" ar_updn, ar_ftree, ar_torus, ar_dor (AR)" if ar_comment else ""),
        f"routing_engine {routing_engine}", "",
        "# Use unicast routing cache (use FALSE if unsure)", "use_ucast_cache FALSE", "",
        "#", "# QoS OPTIONS", "#",
        "# Enable QoS setup", f"qos {q.pop('qos')}", "",
        "# QoS policy file to be used", "qos_policy_file /etc/opensm/qos-policy.conf", "",
        "# QoS default options",
    ]
    lines += [f"{k} {v}" for k, v in q.items()]
    return "\n".join(lines) + "\n"


def partitions_conf(sm: str, tenant: str, key: int, guids: list[str], comment: str = "") -> str:
    """partitions.conf: the default partition limited for everyone, and one tenant partition by port GUID."""
    lines = [f"# /etc/opensm/partitions.conf on {sm}",
             "# Default partition: limited for everyone, so tenants cannot reach each other over it",
             "Default=0x7fff, ipoib : ALL=limited, SELF=full ;", ""]
    if comment:
        lines.append(f"# {comment}")
    lines.append(f"{tenant}=0x{key:04x}, ipoib, defmember=full :")
    for i, g in enumerate(guids):
        lines.append(f"        {g}{' ;' if i == len(guids) - 1 else ','}")
    return "\n".join(lines) + "\n"


def smpquery_pkeys(prompt: str, tables: list[tuple[int, list[int]]], capacity: int = 128) -> str:
    """``smpquery pkeys <lid>`` of each port: 8 keys a row, ``N pkeys capacity for this port``."""
    out: list[str] = []
    for lid, keys in tables:
        full = (keys + [0] * capacity)[:capacity]
        out.append(f"{prompt} smpquery pkeys {lid}")
        for i in range(0, capacity, 8):
            out.append(f"{i:4d}: " + " ".join(f"0x{k:04x}" for k in full[i:i + 8]))
        out.append(f"{capacity} pkeys capacity for this port")
        out.append("")
    return "\n".join(out)


def _sl_row(vls: list[int]) -> str:
    return "|" + "|".join(f"{v:2d}" for v in vls) + "|"


def smpquery_qos(prompt: str, ports: list[tuple[int, int | None, int]], sl2vl: list[int],
                 low: list[tuple[int, int]], high: list[tuple[int, int]]) -> str:
    """``smpquery sl2vl`` and ``smpquery vlarb`` of each (lid, egress port or None for an HCA, input ports)."""
    head = "#                 SL: " + _sl_row(list(range(16)))
    out: list[str] = []
    for lid, port, nin in ports:
        if port is None:
            out += [f"{prompt} smpquery sl2vl {lid}", f"# SL2VL table: Lid {lid}", head,
                    f"ports: in  0, out  0: {_sl_row(sl2vl)}"]
        else:
            out += [f"{prompt} smpquery sl2vl {lid} {port}", f"# SL2VL table: Lid {lid}", head]
            out += [f"ports: in {i:2d}, out {port:2d}: {_sl_row(sl2vl)}" for i in range(nin + 1)]
        p = port if port is not None else 1
        out += [f"{prompt} smpquery vlarb {lid} {p}", f"# VLArbitration tables: Lid {lid} port {p} LowCap 8 HighCap 8"]
        for title, table in (("Low", low), ("High", high)):
            t = (table + [(0, 0)] * 8)[:8]
            out += [f"# {title} priority VL Arbitration Table:",
                    "VL    : |" + "|".join(f"0x{v:<2x}" for v, _w in t) + "|",
                    "WEIGHT: |" + "|".join(f"0x{w:<2x}" for _v, w in t) + "|"]
    return "\n".join(out) + "\n"


def iblinkinfo(sc: Scenario, prompt: str) -> str:
    """``iblinkinfo`` (default mode): every switch's ports and every HCA, with ``Could be`` on a link trained
    below what both ends support."""
    tree = sc.tree
    lines = [f"{prompt} iblinkinfo"]

    def port_text(node: str, port: int) -> str:
        link = tree.link_at(node, port)
        me = tree.nodes[node]
        if link is None or not sc.state(link).up:
            return f"{me.lid:6d} {port:4d}[  ] {DOWN_PORT}"
        st = sc.state(link)
        r = link.other(End(node, port))
        rn = tree.nodes[r.node]
        hint = " "
        if st.width != "4X":
            hint = "Could be 4X "
        elif st.speed != "NDR":
            hint = f" Could be {SPEED_TEXT['NDR']}"
        return (f"{me.lid:6d} {port:4d}[  ] ==({st.width:>3} {SPEED_TEXT[st.speed]:>18} {'Active':>6}/{'LinkUp':>8})==>"
                f"  {rn.lid:6d} {r.port:4d}[  ] \"{rn.description}\" ({hint})")

    for n in sorted(tree.hcas(), key=lambda n: n.lid):
        lines.append(f"CA: {n.description}:")
        lines.append(f"      {n.guid} {port_text(n.name, 1)}")
    for sw in sorted(tree.switches(), key=lambda n: n.lid):
        lines.append(f"Switch: {sw.guid} {sw.description}:")
        lines += [f"      {port_text(sw.name, p)}" for p in range(1, sw.nports + 1)]
    return "\n".join(lines) + "\n"


def dump_lfts(prompt: str, switch: Node, rows: list[tuple[int, int, Node]]) -> str:
    """``dump_lfts.sh`` of one switch as rdma-core's ``dump_fts.c`` prints it (tests/data/ibroute/README.md): the
    header with the LID range, the two column-header lines, one ``0x%04x %03u : (<type> portguid <guid>: '<desc>')``
    row per destination LID (its out port), and the ``%d valid lids dumped`` footer."""
    top = max((lid for lid, _p, _n in rows), default=0)
    out = [f"{prompt} dump_lfts.sh",
           f"Unicast lids [0x0-0x{top:x}] of switch Lid {switch.lid} guid {switch.guid} ({switch.description}):",
           "  Lid  Out   Destination", "       Port     Info "]
    for lid, port, dest in sorted(rows, key=lambda r: r[0]):
        kind = "Switch" if dest.kind == "SW" else "Channel Adapter"
        out.append(f"0x{lid:04x} {port:03d} : ({kind} portguid {dest.guid}: '{dest.description}')")
    out.append(f"{len(rows)} valid lids dumped ")
    return "\n".join(out) + "\n"
