"""The job's own output: the NCCL 2.21.5 debug log (``NCCL_DEBUG=INFO``) every rank writes, PyTorch
``ProcessGroupNCCL`` errors, and the nccl-tests ``all_reduce_perf`` run the responder made on the job's hosts.

Formats are NVIDIA/nccl v2.21.5-1's (line numbers of WARNs from that tag):

* ``src/debug.cc``: ``<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>``; WARN lines start with a newline and carry
  ``<file>:<line>``;
* ``src/misc/param.cc:75`` ``NCCL_X set by environment to N.`` (integer parameters), ``src/misc/socket.cc:331``,
  ``src/graph/topo.cc:677`` and ``src/graph/paths.cc:244`` (string ones, no period), ``src/transport/net_ib.cc:413``
  ``NCCL_IB_HCA set to ...``;
* ``src/transport/net_ib.cc:538`` ``NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB bond0:<ip><0>`` (``/RoCE`` on Ethernet
  ports), ``:1057``/``:1065`` the queue pair lines of the NET subsystem (``mtu`` is the IB MTU enum, 5 = 4096),
  ``:1909`` the completion error (``localGid``/``remoteGids`` on RoCE), ``:101`` async events;
* ``src/transport/net_socket.cc:62`` ``NET/Socket : Using [0]bond0:<ip><0>``, ``src/init.cc:322`` ``Using network``;
* channel lines of ``src/transport/net.cc``, ``p2p.cc`` and ``shm.cc:95`` (``via NET/IB/<dev>[(<proxy rank>)]/GDRDMA``,
  ``via P2P/CUMEM/read``, ``via SHM/direct/direct``).

PyTorch lines follow torch 2.3-2.5 ``ProcessGroupNCCL.cpp`` (watchdog timeout, desync report of
``TORCH_NCCL_DESYNC_DEBUG=1``, ``DistBackendError ... Last error:``); nccl-tests follows NVIDIA/nccl-tests
``src/common.cu`` (2024-07 layout, busbw = algbw x 2(n-1)/n for AllReduce, doc/PERFORMANCE.md).
"""

from __future__ import annotations

import math

from diagnose.simulate.scenario import (
    CUDA_DRIVER,
    CUDA_VERSION,
    GPU_NAME,
    MTU_ENUM,
    NCCL_VERSION,
    OOB_IF,
    Rank,
    Scenario,
    gpu_bus,
)
from diagnose.simulate.topology import rng_for

# NCCL string parameters echoed without a trailing period (the integer ones of NCCL_PARAM end with '.')
_STRING_PARAMS = {"NCCL_SOCKET_IFNAME", "NCCL_TOPO_FILE", "NCCL_P2P_LEVEL", "NCCL_ALGO", "NCCL_PROTO",
                  "NCCL_COMM_ID", "NCCL_GRAPH_FILE", "NCCL_NET"}


def env_line(name: str, value: str) -> str:
    """How NCCL 2.21.5 echoes a setting it read from the environment."""
    if name == "NCCL_IB_HCA":
        return f"NCCL_IB_HCA set to {value}"
    if name in _STRING_PARAMS:
        return f"{name} set by environment to {value}"
    return f"{name} set by environment to {value}."


def prefix(r: Rank, tid: int | None = None) -> str:
    return f"{r.name}:{r.pid}:{tid if tid is not None else r.pid} [{r.local}]"


def info(r: Rank, msg: str, tid: int | None = None) -> str:
    return f"{prefix(r, tid)} NCCL INFO {msg}"


def warn(r: Rank, src: str, msg: str, tid: int | None = None) -> list[str]:
    """A WARN as debug.cc prints it: an empty line first (the message starts with a newline)."""
    return ["", f"{prefix(r, tid)} {src} NCCL WARN {msg}"]


def trace(r: Rank, srcs: list[str], code: int, tid: int | None = None) -> list[str]:
    """The ``file:line -> code`` propagation lines NCCLCHECK prints under a failure."""
    return [info(r, f"{s} -> {code}", tid) for s in srcs]


def job_ranks(sc: Scenario) -> list[Rank]:
    tree = sc.tree
    rng = rng_for(sc.seed, "nccl-ranks")
    g = tree.hcas_per_host
    out: list[Rank] = []
    for hi, h in enumerate(sc.job_hosts):
        devs = sc.nccl_devs(h)
        base = rng.randint(150000, 3900000)
        for k in range(g):
            out.append(Rank(rank=hi * g + k, host=h, local=k, pid=base + k, ptid=base + k + rng.randint(90, 900),
                            comm=f"0x{rng.choice((0x55, 0x56))}{rng.getrandbits(40):010x}", ibdevs=devs,
                            name=sc.host(h).log_name or h))
    return out


def nic_for(sc: Scenario, r: Rank) -> tuple[int | None, int | None, bool]:
    """(netdev index, PXN proxy local GPU or None, GDR possible) GPU ``r.local`` sends through: a NIC the host
    forces on it (far NIC: no GDR, no proxy), its own NIC, or via PXN the NIC of the nearest GPU whose port is
    up. None when the host has no NIC NCCL can open."""
    hs = sc.host(r.host)
    if not r.ibdevs:
        return None, None, False
    forced = hs.nic_of_gpu.get(r.local)
    if forced is not None and forced in r.ibdevs:
        return r.ibdevs.index(forced), None, False
    if r.local in r.ibdevs:
        return r.ibdevs.index(r.local), None, True
    k = sorted(r.ibdevs, key=lambda d: (abs(d - r.local), d))[0]
    return r.ibdevs.index(k), k, True


def _qp_lines(sc: Scenario, r: Rank, netdev: int, rng) -> list[str]:
    """The NET subsystem's queue pair lines of one connection (net_ib.cc:1057 IB / :1065 RoCE)."""
    hca = r.ibdevs[netdev]
    mtu = MTU_ENUM.get(sc.host(r.host).active_mtu, 5)
    rkey, lkey = rng.getrandbits(24), rng.getrandbits(24)
    qpn = rng.randint(0x100, 0x3FFFF)
    if sc.roce:
        iid = rng.getrandbits(48)
        return [info(r, f"NET/IB: NCCL Dev {netdev} IbDev {hca} Port 1 qpn {qpn} mtu {mtu} query_ece={{supported=1, "
                        f"vendor_id=0x2c9, options=0x30000002, comp_mask=0x0}} GID {sc.env_of(r.host).get('NCCL_IB_GID_INDEX', '3')} "
                        f"(0/{iid:X}) fifoRkey=0x{rkey:x} fifoLkey=0x{lkey:x}")]
    lid = sc.hca_node(r.host, hca).lid
    return [info(r, f"NET/IB: NCCL Dev {netdev} IbDev {hca} Port 1 qpn {qpn} mtu {mtu} LID {lid} "
                    f"fifoRkey=0x{rkey:x} fifoLkey=0x{lkey:x}")]


def render_nccl_log(sc: Scenario) -> str:
    tree = sc.tree
    rng = rng_for(sc.seed, "nccl-log")
    ranks = sc.ranks
    g = tree.hcas_per_host
    nranks = len(ranks)
    nhosts = len(sc.job_hosts)
    comm_id = f"0x{rng.getrandbits(64):016x}"
    ll = "RoCE" if sc.roce else "IB"
    stage = sc.job.init_stage
    phases: list[dict[int, list[str]]] = [{}, {}, {}]
    for r in ranks:
        hs = sc.host(r.host)
        if hs.nccl_silent:
            continue
        ip = sc.host_ip[r.host]
        oob_if, oob_ip = hs.oob or (OOB_IF, ip)
        env = sc.env_of(r.host)
        p0 = [info(r, env_line(n, v)) for n, v in sorted(env.items()) if n != "NCCL_IB_HCA"]
        p0 += [
            info(r, f"NCCL_SOCKET_IFNAME set by environment to {oob_if}"),
            info(r, f"Bootstrap : Using {oob_if}:{oob_ip}<0>"),
        ]
        if r.rank == 0:
            p0.append(f"NCCL version {hs.nccl_version}+cuda{CUDA_VERSION}")
        p0 += [
            info(r, f"cudaDriverVersion {CUDA_DRIVER}"),
            info(r, "NET/Plugin: No plugin found (libnccl-net.so)"),
            info(r, "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such "
                    "file or directory : when loading libnccl-net.so"),
            info(r, "NET/Plugin: Using internal network plugin."),
        ]
        phases[0][r.rank] = p0
        bus = f"{gpu_bus(r.local):x}000"
        p1: list[str] = []
        if "NCCL_IB_HCA" in env:
            p1.append(info(r, env_line("NCCL_IB_HCA", env["NCCL_IB_HCA"])))
        p1 += sc.job.netinit.get(r.rank, [])  # lines a cause puts before the network choice
        if hs.net == "IB" and r.ibdevs:
            devs = " ".join(f"[{i}]mlx5_{k}:1/{ll}" for i, k in enumerate(r.ibdevs))
            p1 += [
                info(r, f"NET/IB : Using {devs} [RO]; OOB {oob_if}:{oob_ip}<0>"),
                info(r, "Using non-device net plugin version 0"),
                info(r, "Using network IB"),
            ]
            if hs.gdr:
                p1.append(info(r, f"DMA-BUF is available on GPU device {r.local}"))
        else:
            p1 += [
                info(r, f"NET/Socket : Using [0]{oob_if}:{oob_ip}<0>"),
                info(r, "Using non-device net plugin version 0"),
                info(r, "Using network Socket"),
            ]
        p1.append(info(r, f"ncclCommInitRank comm {r.comm} rank {r.rank} nranks {nranks} cudaDev {r.local} nvmlDev "
                          f"{r.local} busId {bus} commId {comm_id} - Init START"))
        phases[1][r.rank] = p1
        p2: list[str] = []
        if stage != "bootstrap":
            p2.append(info(r, f"comm {r.comm} rank {r.rank} nRanks {nranks} nNodes {nhosts} localRanks {g} "
                              f"localRank {r.local} MNNVL 0"))
            if r.local + 1 < g:
                if hs.intra.startswith("SHM"):
                    p2.append(info(r, f"Channel 00 : {r.rank}[{r.local}] -> {r.rank + 1}[{r.local + 1}] via {hs.intra}"))
                else:
                    p2.append(info(r, f"Channel 00/0 : {r.rank}[{r.local}] -> {r.rank + 1}[{r.local + 1}] via {hs.intra}"))
            if nhosts > 1:
                p2 += _net_channels(sc, r, rng)
            p2 += sc.job.setup.get(r.rank, [])
            if stage == "complete":
                p2 += [
                    info(r, "Connected all rings"),
                    info(r, "Connected all trees"),
                    info(r, f"ncclCommInitRank comm {r.comm} rank {r.rank} nranks {nranks} cudaDev {r.local} nvmlDev "
                            f"{r.local} busId {bus} commId {comm_id} - Init COMPLETE"),
                ]
        else:
            p2 += sc.job.setup.get(r.rank, [])
        phases[2][r.rank] = p2
    out: list[str] = []
    for ph in phases:
        queues = {k: list(v) for k, v in ph.items() if v}
        keys = sorted(queues)
        while keys:
            k = rng.choice(keys)
            line = queues[k].pop(0)
            out.append(line)
            if line == "" and queues[k]:  # a WARN's leading newline stays with its line
                out.append(queues[k].pop(0))
            if not queues[k]:
                keys.remove(k)
    out += sc.job.incident
    return "\n".join(out) + "\n"


def _net_channels(sc: Scenario, r: Rank, rng) -> list[str]:
    g = sc.tree.hcas_per_host
    nhosts = len(sc.job_hosts)
    hi = r.rank // g
    nxt = ((hi + 1) % nhosts) * g + r.local
    prv = ((hi - 1) % nhosts) * g + r.local
    hs = sc.host(r.host)
    out: list[str] = []
    if hs.net != "IB" or not r.ibdevs:
        for ch in (r.local, r.local + g):
            out.append(info(r, f"Channel {ch:02d}/0 : {prv}[{r.local}] -> {r.rank}[{r.local}] [receive] via NET/Socket/0"))
            out.append(info(r, f"Channel {ch:02d}/0 : {r.rank}[{r.local}] -> {nxt}[{r.local}] [send] via NET/Socket/0"))
        return out
    netdev, proxy, gdr_ok = nic_for(sc, r)
    assert netdev is not None
    gdr = "/GDRDMA" if hs.gdr and gdr_ok else ""
    via_send = f"NET/IB/{netdev}" + (f"({hi * g + proxy})" if proxy is not None else "") + gdr
    via_recv = f"NET/IB/{netdev}{gdr}"
    for ch in (r.local, r.local + g):
        out.append(info(r, f"Channel {ch:02d}/0 : {prv}[{r.local}] -> {r.rank}[{r.local}] [receive] via {via_recv}"))
        out.append(info(r, f"Channel {ch:02d}/0 : {r.rank}[{r.local}] -> {nxt}[{r.local}] [send] via {via_send}"))
        if sc.job.net_subsys:
            out += _qp_lines(sc, r, netdev, rng)
    return out


# ------------------------------------------------------------------------------------------------- PyTorch

# ncclResult_t -> (ncclGetErrorString text PyTorch puts in the message, the ncclXxx line it adds after it)
_NCCL_ERRORS = {
    "system": ("unhandled system error",
               "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. "),
    "remote": ("remote process exited or there was a network error",
               "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
               "prematurely."),
    "internal": ("internal error - please report this issue to the NCCL developers",
                 "ncclInternalError: Internal check failed."),
}


def torch_backend_error(rank: int, code: str, last_error: str, version: str = NCCL_VERSION) -> list[str]:
    """PyTorch's DistBackendError for a failed NCCL call (torch 2.4/2.5, NCCLUtils.hpp:317): ``code`` is
    ``system``, ``remote`` or ``internal``; NCCL's last error is echoed after ``Last error:``."""
    reason, detail = _NCCL_ERRORS[code]
    return [
        f"[rank{rank}]: Traceback (most recent call last):",
        f"[rank{rank}]:   File \"/workspace/train.py\", line 212, in <module>",
        f"[rank{rank}]:     model = FSDP(model, device_id=torch.cuda.current_device())",
        f"[rank{rank}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        f"NCCLUtils.hpp:317, {reason} (run with NCCL_DEBUG=INFO for details), NCCL version {version}",
        f"[rank{rank}]: {detail}",
        f"[rank{rank}]: Last error:",
        f"[rank{rank}]: {last_error}",
    ]


def torch_watchdog(rank: int, seq: int, t: str, ran_ms: int, op: str = "ALLREDUCE", numel: int = 1) -> str:
    """The ProcessGroupNCCL watchdog timeout line (ProcessGroupNCCL.cpp:616, torch 2.5)."""
    return (f"[rank{rank}]:[E{t} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran "
            f"for {ran_ms} milliseconds before timing out.")


# ------------------------------------------------------------------------------------------------- nccl-tests

def render_nccl_tests(sc: Scenario, hosts: list[str], factor: float) -> str | None:
    """all_reduce_perf over ``hosts`` (8 GPUs each) peaking at the healthy bandwidth times ``factor``."""
    if not hosts:
        return None
    tree = sc.tree
    rng = rng_for(sc.seed, "nccl-tests")
    g = tree.hcas_per_host
    n = len(hosts) * g
    peak = rng.uniform(470, 485) if len(hosts) == 1 else rng.uniform(372, 388)
    bw = peak * factor
    lat = 20.0 + 6.0 * math.log2(max(n, 2))
    lines = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for hi, h in enumerate(hosts):
        base = rng.randint(150000, 3900000)
        for k in range(g):
            lines.append(f"#  Rank {hi * g + k:2d} Group {0:2d} Pid {base + k:6d} on {h:>10} device {k:2d} "
                         f"[0x{gpu_bus(k):02x}] {GPU_NAME}")
    lines += [
        "#",
        f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place"
        "          ",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
        f"{'busbw':>6} {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6} {'#wrong':>6}",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
        f"{'':>5}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}",
    ]
    busf = 2 * (n - 1) / n if n > 1 else 1.0
    total, count = 0.0, 0
    size = 8
    while size <= 8589934592:
        row = f"{size:12d}  {size // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
        for _ in range(2):
            t = (lat + size * busf / (bw * 1e3) * (1 + 24 * 2**20 / size)) * rng.uniform(0.985, 1.015)
            algbw = size / 1e3 / t
            busbw = algbw * busf
            total += busbw
            count += 1
            ts = f"{t:7.0f}" if t >= 10000.0 else f"{t:7.1f}" if t >= 100.0 else f"{t:7.2f}"
            row += f"  {ts:>7}  {algbw:6.2f}  {busbw:6.2f}  {0.0:5g}"
        lines.append(row)
        size *= 2
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total / count:g} ",
        "#",
        "",
    ]
    return "\n".join(lines) + "\n"
