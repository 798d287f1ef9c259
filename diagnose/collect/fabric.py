"""The fabric's evidence, read once for a whole job from one host that reaches the subnet manager.

:data:`FABRIC` is the fabric's collector table (the same :class:`~diagnose.collect.Collector` rows and rules as a
host's): the topology (``ibnetdiscover``), every port's error counters and link state (``ibqueryerrors -r``), the
links' widths and speeds (``iblinkinfo``), the SM (``sminfo``), the SL-to-VL map and VL arbitration of the job's own
HCA ports (``smpquery sl2vl``/``vlarb <lid> <port>``, one call each, the ports from the hosts' ``ibstat``), and with
``--ibdiagnet`` a whole ``ibdiagnet`` run into its own folder. Every one of them only reads: none clears counters
(no ``ibqueryerrors -k/-K``, no ``ibdiagnet --pc``), sets ports or writes to the SM (the collector's ``DENY`` is
checked against this table too). The fabric folder's manifest has ``scope: fabric``: its files describe the
fabric, so ``triage`` does not take the host they were read from for theirs.
"""

from __future__ import annotations

from collections.abc import Iterable

from diagnose.collect import Collector

FABRIC: tuple[Collector, ...] = (
    Collector("ibnetdiscover", ("ibnetdiscover",), "ibnetdiscover.out",
              ("link.degraded", "fabric.route_imbalance", "fabric.rail_isolation", "mtu.mismatch"), timeout_s=180),
    Collector("ibqueryerrors", ("ibqueryerrors", "-r"), "ibqueryerrors.out",
              ("link.bad_cable", "link.flapping", "fabric.congestion", "link.port_down"), timeout_s=240),
    Collector("iblinkinfo", ("iblinkinfo",), "iblinkinfo.out", ("link.degraded", "link.port_down", "mtu.mismatch"),
              timeout_s=180),
    Collector("sminfo", ("sminfo",), "sminfo.out", ("fabric.sm_problem",)),
    Collector("smpquery_sl2vl", ("smpquery", "sl2vl", "{item}"), "smpquery-sl2vl.out", ("fabric.qos_misconfig",),
              timeout_s=10, each="job_port"),
    Collector("smpquery_vlarb", ("smpquery", "vlarb", "{item}"), "smpquery-vlarb.out", ("fabric.qos_misconfig",),
              timeout_s=10, each="job_port"),
    Collector("ibdiagnet", ("ibdiagnet", "-o", "{dir}"), "ibdiagnet2", ("link.bad_cable", "link.degraded",
                                                                       "fabric.sm_problem", "fabric.pkey_mismatch",
                                                                       "fabric.congestion"),
              timeout_s=900, optional="ibdiagnet", outdir=True),
)

FABRIC_TOOLS = ("ibnetdiscover", "ibqueryerrors", "iblinkinfo", "sminfo", "smpquery", "ibdiagnet")
MAX_PORTS = 1024  # job ports queried one by one; past this many, the first ones (a note says so)


def ports_of(ibstat_text: str, source: str = "ibstat.out") -> list[tuple[int, int]]:
    """The (LID, port) of every InfiniBand port with a unicast LID in an ``ibstat`` capture (RoCE ports have none,
    a port that never came up 0 or 0xFFFF)."""
    from diagnose.parsers import ibstat
    from diagnose.parsers._ib import IbPort

    out = []
    for r in ibstat.parse(ibstat_text, source).records:
        if isinstance(r, IbPort) and r.lid and 0 < r.lid < 0xC000 \
                and (r.link_layer or "InfiniBand").lower() == "infiniband":  # a unicast LID: 0xFFFF is none
            out.append((r.lid, r.port))
    return out


def port_items(ports: Iterable[tuple[int, int]]) -> list[str]:
    """The per-port collectors' items (``"<lid> <port>"``), each port once, in order, at most :data:`MAX_PORTS`."""
    return [f"{lid} {port}" for lid, port in dict.fromkeys(ports)][:MAX_PORTS]


def parse_ports(text: str) -> list[tuple[int, int]]:
    """``--ports 12/1,13/1`` (LID/port; a bare LID is port 1); raises ValueError in one line."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lid, _, port = part.partition("/")
        if not lid.isdigit() or not (port or "1").isdigit() or not 0 < int(lid) < 0xC000:
            raise ValueError(f"--ports takes LID/port pairs such as 12/1,13/1, not {part!r}")
        out.append((int(lid), int(port or "1")))
    return out


def local_ports(timeout_s: float = 20.0) -> list[tuple[int, int]]:
    """This host's InfiniBand ports (``ibstat``), for ``collect --fabric`` without ``--ports``; [] without ibstat."""
    import shutil

    from diagnose.collect import run_command

    if shutil.which("ibstat") is None:
        return []
    text, _, status, _ = run_command(["ibstat"], None, timeout_s)
    return ports_of(text) if status == "ok" else []
