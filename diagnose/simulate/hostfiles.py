"""Host-side tool output, in the tools' own formats, for one simulated DGX H100-class host.

Pure functions: each takes what the tool would see and returns the text a responder would save from it.
Sources of the formats (and the real samples the project's parsers are tested against):

* ``lsmod`` - kmod ``tools/lsmod.c`` (``Module  Size  Used by``);
* ``ulimit -a`` - bash 5 builtin (``max locked memory       (kbytes, -l) 64``);
* ``df -h`` - GNU coreutils (``Filesystem Size Used Avail Use% Mounted on``);
* ``lspci -vvv`` - pciutils ``ls-caps.c`` (``LnkCap``/``LnkSta`` with ``(ok)``/``(downgraded)``, ``ACSCtl``), the
  PEX890xx/H100/ConnectX-7 blocks of leptonai/gpud ``pkg/pci/testdata/lspci-vvv``;
* ``nvidia-smi``, ``nvidia-smi -q``, ``nvidia-smi topo -m``, ``nvidia-smi nvlink -s/-e`` - NVIDIA System Management
  Interface documentation (https://docs.nvidia.com/deploy/nvidia-smi/index.html), layouts of driver 535;
* ``dcgmi health -c`` - NVIDIA DCGM user guide, "Health and Diagnostics" (https://docs.nvidia.com/datacenter/dcgm/);
* Fabric Manager log - NVIDIA Fabric Manager user guide (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/);
* NCCL topology XML - ``NCCL_TOPO_FILE`` format (NVIDIA/nccl ``src/graph/xml.cc``, ``<system version="1">``);
* ``ibv_devinfo -v`` - rdma-core ``libibverbs/examples/devinfo.c`` (GID table ``GID[  3]: ::ffff:10.1.2.3, RoCE v2``);
* ``ethtool -S`` - the mlx5 counters of the kernel's Documentation/networking/device_drivers/ethernet/mellanox/
  mlx5/counters.rst (``rx_prio3_bytes``, ``tx_prio3_pause``, ``tx_pause_storm_error_events``);
* ``rdma statistic show`` - iproute2 ``rdma/stat.c`` (``link mlx5_0/1 out_of_sequence 0 ... np_cnp_sent 0``);
* ``ibdev2netdev`` - MLNX_OFED (``mlx5_0 port 1 ==> enp25s0np0 (Up)``);
* ``opensm.log`` - linux-rdma/opensm ``osm_log.c`` line layout and ``osm_trap_rcv.c``/``osm_sminfo_rcv.c`` messages;
* ``sminfo`` - rdma-core ``infiniband-diags/sminfo.c``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from diagnose.simulate.scenario import (
    DRIVER,
    DRIVER_CUDA,
    GPU_NAME,
    HCA_PART_ID,
    MTU_ENUM,
    ctime,
    gpu_bus,
    hca_bus,
    socket_of,
)

# ------------------------------------------------------------------------------------------------ modules, limits, df

_LSMOD = (
    ("nvidia_uvm", 4956160, "0", ""), ("nvidia_drm", 122880, "0", ""), ("nvidia_modeset", 1355776, "1", "nvidia_drm"),
    ("nvidia", 54501376, "{nv_used}", "{nv_by}"), ("rdma_ucm", 28672, "0", ""),
    ("rdma_cm", 122880, "1", "rdma_ucm"), ("ib_ipoib", 135168, "0", ""), ("ib_cm", 131072, "2", "rdma_cm,ib_ipoib"),
    ("ib_umad", 36864, "8", ""), ("mlx5_ib", 487424, "0", ""), ("ib_uverbs", 163840, "{uv_used}", "{uv_by}"),
    ("ib_core", 442368, "8", "rdma_cm,ib_ipoib,ib_umad,rdma_ucm,ib_uverbs,mlx5_ib,ib_cm"),
    ("mlx5_core", 2265088, "1", "mlx5_ib"), ("mlxfw", 32768, "1", "mlx5_core"),
)


def lsmod(peermem: bool) -> str:
    """``lsmod`` of a GPU node with MLNX_OFED; ``nvidia_peermem`` loaded or not."""
    rows = [("nvidia_peermem", 16384, "0", "")] if peermem else []
    nv_by = "nvidia_uvm,nvidia_peermem,nvidia_modeset" if peermem else "nvidia_uvm,nvidia_modeset"
    uv_by = "nvidia_peermem,rdma_ucm,mlx5_ib" if peermem else "rdma_ucm,mlx5_ib"
    for name, size, used, by in _LSMOD:
        rows.append((name, size, used.format(nv_used=3 if peermem else 2, uv_used=3 if peermem else 2),
                     by.format(nv_by=nv_by, uv_by=uv_by)))
    out = ["Module                  Size  Used by"]
    for name, size, used, by in rows:
        out.append(f"{name:<19} {size:>8}  {used} {by}".rstrip())
    return "\n".join(out) + "\n"


def ulimit_a(memlock_kib: int | None) -> str:
    """``ulimit -a`` inside the job step; ``memlock_kib`` None is unlimited."""
    ml = "unlimited" if memlock_kib is None else str(memlock_kib)
    rows = [
        ("core file size", "(blocks, -c)", "0"), ("data seg size", "(kbytes, -d)", "unlimited"),
        ("scheduling priority", "(-e)", "0"), ("file size", "(blocks, -f)", "unlimited"),
        ("pending signals", "(-i)", "8254471"), ("max locked memory", "(kbytes, -l)", ml),
        ("max memory size", "(kbytes, -m)", "unlimited"), ("open files", "(-n)", "1048576"),
        ("pipe size", "(512 bytes, -p)", "8"), ("POSIX message queues", "(bytes, -q)", "819200"),
        ("real-time priority", "(-r)", "0"), ("stack size", "(kbytes, -s)", "8192"),
        ("cpu time", "(seconds, -t)", "unlimited"), ("max user processes", "(-u)", "unlimited"),
        ("virtual memory", "(kbytes, -v)", "unlimited"), ("file locks", "(-x)", "unlimited"),
    ]
    return "\n".join(f"{a}{b.rjust(36 - len(a))} {c}" for a, b, c in rows) + "\n"


def df_h(shm: tuple[str, str, str, int]) -> str:
    """``df -h`` inside the job's container; ``shm`` = (size, used, avail, use%) of /dev/shm."""
    size, used, avail, pct = shm
    rows = [
        ("overlay", "3.5T", "1.4T", "2.0T", "41%", "/"),
        ("tmpfs", "64M", "0", "64M", "0%", "/dev"),
        ("tmpfs", "1008G", "0", "1008G", "0%", "/sys/fs/cgroup"),
        ("shm", size, used, avail, f"{pct}%", "/dev/shm"),
        ("/dev/md0", "3.5T", "1.4T", "2.0T", "41%", "/etc/hosts"),
        ("/dev/nvme1n1", "7.0T", "2.1T", "4.9T", "30%", "/data"),
        ("tmpfs", "1008G", "12K", "1008G", "1%", "/proc/driver/nvidia"),
    ]
    out = [f"{'Filesystem':<13} {'Size':>5} {'Used':>4} {'Avail':>5} Use% Mounted on"]
    out += [f"{a:<13} {b:>5} {c:>4} {d:>5} {e:>4} {f}" for a, b, c, d, e, f in rows]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ lspci -vvv

_ACS_OFF = "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
_ACS_ON = "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"


def _lnk(cap: tuple[int, int], sta: tuple[float, int]) -> list[str]:
    cs, cw = cap
    ss, sw = sta
    sn = "ok" if ss >= cs else "downgraded"
    wn = "ok" if sw >= cw else "downgraded"
    ss_txt = f"{ss:g}"
    return [f"\t\tLnkCap:\tPort #0, Speed {cs}GT/s, Width x{cw}, ASPM not supported",
            "\t\t\tClockPM- Surprise- LLActRep- BwNot- ASPMOptComp+",
            f"\t\tLnkSta:\tSpeed {ss_txt}GT/s ({sn}), Width x{sw} ({wn})",
            "\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-"]


def lspci_vvv(host: str, ngpu: int, nic_sta: dict[int, int] | None = None, acs: bool = False,
              gpu_idle: bool = True, numa: bool = True) -> str:
    """``lspci -vvv`` of the PCIe switches, GPUs and ConnectX-7 NICs: per GPU/NIC pair a PEX890xx switch with two
    downstream ports (``<bus-1>:01.0`` above the GPU, ``:02.0`` above the NIC). ``nic_sta``: NIC index -> trained
    width (x16 when absent); ``acs``: ACS redirect enabled on the switch ports; ``gpu_idle``: the GPUs were idle
    when captured (Gen5 capable, running at 2.5 GT/s to save power, as idle GPUs do)."""
    nic_sta = nic_sta or {}
    out = [f"[root@{host} ~]# lspci -vvv -d ::0604 -d 10de: -d 15b3:"]
    for k in range(ngpu):
        g, n = gpu_bus(k), hca_bus(k)
        sw = g - 1
        width = nic_sta.get(k, 16)
        for fn, child, w in ((1, g, 16), (2, n, width)):
            out += [
                f"{sw:02x}:{fn:02x}.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) (prog-if 00 [Normal decode])",
                "\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR+ FastB2B- DisINTx+",
                f"\tBus: primary={sw - 1:02x}, secondary={child:02x}, subordinate={child:02x}, sec-latency=0",
                "\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00",
                *_lnk((32, 16), (32, w)),
                "\tCapabilities: [1c0 v1] Access Control Services",
                "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+",
                f"\t\tACSCtl:\t{_ACS_ON if acs else _ACS_OFF}",
                "\tKernel driver in use: pcieport",
                "",
            ]
        out += [
            f"{g:02x}:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",
            "\tSubsystem: NVIDIA Corporation GH100 [H100 SXM5 80GB]",
            f"\tNUMA node: {socket_of(k, ngpu) if numa else 0}",
            "\tCapabilities: [68] Express (v2) Endpoint, MSI 00",
            "\t\tDevCtl:\tCorrErr- NonFatalErr+ FatalErr+ UnsupReq-",
            "\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop+ FLReset-",
            "\t\t\tMaxPayload 256 bytes, MaxReadReq 4096 bytes",
            *_lnk((32, 16), (2.5 if gpu_idle else 32, 16)),
            "\tKernel driver in use: nvidia",
            "",
            f"{n:02x}:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]",
            "\tSubsystem: Mellanox Technologies MT2910 Family [ConnectX-7]",
            f"\tNUMA node: {socket_of(k, ngpu) if numa else 0}",
            "\tCapabilities: [60] Express (v2) Endpoint, MSI 00",
            "\t\tDevCtl:\tCorrErr+ NonFatalErr+ FatalErr+ UnsupReq+",
            "\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop+ FLReset-",
            "\t\t\tMaxPayload 256 bytes, MaxReadReq 4096 bytes",
            *_lnk((32, 16), (32, nic_sta.get(k, 16))),
            "\tKernel driver in use: mlx5_core",
            "",
        ]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ nvidia-smi

def nvidia_smi(t: datetime, ngpu: int, temps: list[int], power: list[int], driver: str = DRIVER,
               cuda: str = DRIVER_CUDA) -> str:
    """The ``nvidia-smi`` summary table (driver 535 layout)."""
    bar = "+-----------------------------------------+------------------------+----------------------+"
    head = f"NVIDIA-SMI {driver}             Driver Version: {driver}     CUDA Version: {cuda}"
    out = [
        ctime(t),
        "+-----------------------------------------------------------------------------------------+",
        f"| {head:<88}|",
        "|-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    for k in range(ngpu):
        out += [
            f"| {k:>3}  {GPU_NAME:<31}On  |   00000000:{gpu_bus(k):02X}:00.0 Off |                    0 |",
            f"| N/A   {temps[k]:>2}C    P0            {power[k]:>3}W /  700W |   71342MiB /  81559MiB |    100%      Default |",
            "|                                         |                        |             Disabled |",
            bar,
        ]
    return "\n".join(out) + "\n"


def nvidia_smi_q(host: str, t: datetime, ngpu: int, temps: list[int], hot: set[int] | None = None,
                 power_cap: set[int] | None = None, driver: str = DRIVER, cuda: str = DRIVER_CUDA,
                 fabric_state: str = "Completed") -> str:
    """``nvidia-smi -q -d PERFORMANCE,TEMPERATURE`` with the Fabric block (H100 SXM: NVSwitch fabric registration).
    ``hot``: GPUs in HW/SW thermal slowdown; ``power_cap``: GPUs at their software power cap (normal at full load)."""
    hot, power_cap = hot or set(), power_cap or set()
    out = [f"[root@{host} ~]# nvidia-smi -q -d PERFORMANCE,TEMPERATURE", "", "==============NVSMI LOG==============", "",
           f"Timestamp                                 : {ctime(t)}",
           f"Driver Version                            : {driver}",
           f"CUDA Version                              : {cuda}", "",
           f"Attached GPUs                             : {ngpu}"]

    def act(on: bool) -> str:
        return "Active" if on else "Not Active"

    for k in range(ngpu):
        h = k in hot
        out += [
            f"GPU 00000000:{gpu_bus(k):02X}:00.0",
            "    Performance State                     : P0",
            "    Clocks Event Reasons",
            "        Idle                              : Not Active",
            "        Applications Clocks Setting       : Not Active",
            f"        SW Power Cap                      : {act(k in power_cap and not h)}",
            f"        HW Slowdown                       : {act(h)}",
            f"            HW Thermal Slowdown           : {act(h)}",
            "            HW Power Brake Slowdown       : Not Active",
            "        Sync Boost                        : Not Active",
            f"        SW Thermal Slowdown               : {act(h)}",
            "        Display Clock Setting             : Not Active",
            "    Temperature",
            f"        GPU Current Temp                  : {temps[k]} C",
            f"        GPU T.Limit Temp                  : {87 - temps[k]} C",
            "        GPU Shutdown T.Limit Temp         : -8 C",
            "        GPU Slowdown T.Limit Temp         : -2 C",
            "        GPU Max Operating T.Limit Temp    : 0 C",
            "        GPU Target Temperature            : N/A",
            f"        Memory Current Temp               : {temps[k] + 8} C",
            "        Memory Max Operating T.Limit Temp : 0 C",
            "    Fabric",
            f"        State                             : {fabric_state}",
            f"        Status                            : {'Success' if fabric_state == 'Completed' else 'N/A'}",
        ]
    return "\n".join(out) + "\n"


def nvidia_smi_topo(host: str, ngpu: int, nvlinks: dict[int, int] | None = None, nics: int | None = None) -> str:
    """``nvidia-smi topo -m`` of a DGX H100: NV18 between GPUs (``nvlinks``: GPU -> fewer active links), GPU k PIX
    to NIC k, NODE within a socket, SYS across."""
    nvlinks = nvlinks or {}
    n_nic = ngpu if nics is None else nics
    half = max(1, ngpu // 2)
    cols = [f"GPU{k}" for k in range(ngpu)] + [f"NIC{k}" for k in range(n_nic)]
    out = [f"[root@{host} ~]# nvidia-smi topo -m",
           "\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]

    def pcie(a: int, b: int) -> str:
        if a == b:
            return "PIX"
        return "NODE" if socket_of(a, ngpu) == socket_of(b, ngpu) else "SYS"

    for k in range(ngpu):
        row = []
        for j in range(ngpu):
            row.append(" X " if j == k else f"NV{min(nvlinks.get(k, 18), nvlinks.get(j, 18))}")
        row += [pcie(k, j) for j in range(n_nic)]
        cpus = "0-55,112-167" if k < half else "56-111,168-223"
        out.append(f"GPU{k}\t" + "\t".join(row) + f"\t{cpus}\t{socket_of(k, ngpu)}\t\tN/A")
    for k in range(n_nic):
        row = [pcie(k, j) for j in range(ngpu)] + [" X " if j == k else pcie(k, j) for j in range(n_nic)]
        out.append(f"NIC{k}\t" + "\t".join(row) + "\t\t\t\t")
    out += ["", "Legend:", "",
            "  X    = Self",
            "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
            "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
            "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
            "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
            "  PIX  = Connection traversing at most a single PCIe bridge",
            "  NV#  = Connection traversing a bonded set of # NVLinks", "", "NIC Legend:", ""]
    out += [f"  NIC{k}: mlx5_{k}" for k in range(n_nic)]
    return "\n".join(out) + "\n"


def gpu_uuid(rng) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def nvlink_s(host: str, uuids: list[str], inactive: dict[int, set[int]] | None = None) -> str:
    """``nvidia-smi nvlink -s``: 18 links per H100 at 26.562 GB/s, ``<inactive>`` where down."""
    inactive = inactive or {}
    out = [f"[root@{host} ~]# nvidia-smi nvlink -s"]
    for k, u in enumerate(uuids):
        out.append(f"GPU {k}: {GPU_NAME} (UUID: {u})")
        out += [f"\t Link {i}: {'<inactive>' if i in inactive.get(k, set()) else '26.562 GB/s'}" for i in range(18)]
    return "\n".join(out) + "\n"


def nvlink_e(host: str, uuids: list[str], errors: dict[tuple[int, int], tuple[int, int, int]] | None = None) -> str:
    """``nvidia-smi nvlink -e``: Replay/Recovery/CRC error counters per link; ``errors`` (gpu, link) -> counts."""
    errors = errors or {}
    out = [f"[root@{host} ~]# nvidia-smi nvlink -e"]
    for k, u in enumerate(uuids):
        out.append(f"GPU {k}: {GPU_NAME} (UUID: {u})")
        for i in range(18):
            rp, rc, crc = errors.get((k, i), (0, 0, 0))
            out += [f"\t Link {i}: Replay Errors: {rp}", f"\t Link {i}: Recovery Errors: {rc}",
                    f"\t Link {i}: CRC Errors: {crc}", ""]
    return "\n".join(out) + "\n"


def dcgmi_health(host: str, gpu: int | None) -> str:
    """``dcgmi health -g 0 -c``: Healthy, or a thermal clock-event warning on one GPU."""
    def row(left: str, right: str) -> str:
        return f"| {left:<26}| {right:<57}|"

    bar = "+---------------------------+----------------------------------------------------------+"
    out = [f"[root@{host} ~]# dcgmi health -g 0 -c", bar,
           "| Health Monitor Report                                                                |",
           "+===========================+==========================================================+"]
    if gpu is None:
        out.append(row("Overall Health", "Healthy"))
    else:
        out += [row("Overall Health", "Warning"), row("GPU", ""), row(f"-> {gpu}", "Warning"),
                row("   -> Errors", ""), row("      -> Thermal system", "Warning"),
                row("", "Detected clocks event due to thermal violation in GPU"), row("", f"{gpu}.")]
    out.append(bar)
    return "\n".join(out) + "\n"


def fabricmanager_log(t_start: datetime, fm_version: str, driver: str, tid: int) -> str:
    """``/var/log/fabricmanager.log`` of a start: configured, or refused because the driver does not match."""
    def ts(t: datetime) -> str:
        return f"[{t:%b %d %Y %H:%M:%S}] "

    t = t_start
    out = [f"Fabric Manager Log initializing at: {t:%m/%d/%Y %H:%M:%S}.{t.microsecond // 1000:03d}",
           f"{ts(t)}[INFO] [tid {tid}] Fabric Manager version {fm_version} is running with the following configuration options",
           f"{ts(t)}[INFO] [tid {tid}] Logging level = 4",
           f"{ts(t)}[INFO] [tid {tid}] Fabric Mode = 0",
           f"{ts(t)}[INFO] [tid {tid}] Abort CUDA jobs when FM exits = 1"]
    if fm_version != driver:
        out.append(f"{ts(t)}[ERROR] [tid {tid}] fabric manager NVIDIA GPU driver interface version {fm_version} don't"
                   f" match with driver version {driver}. Please update with matching NVIDIA driver package.")
        return "\n".join(out) + "\n"
    t2 = t + timedelta(seconds=1)
    t3 = t + timedelta(seconds=38)
    out += [f"{ts(t2)}[INFO] [tid {tid}] Connected to 1 node.",
            f"{ts(t2)}[INFO] [tid {tid}] Getting fabric node FM version info",
            f"{ts(t3)}[INFO] [tid {tid}] Successfully configured all the available NVSwitches to route GPU NVLink traffic."
            " NVLink Peer-to-Peer support will be enabled once the GPUs are successfully registered with the NVLink"
            " fabric."]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ NCCL topology XML

# NVIDIA DGX A100 (Azure ND A100 v4-like) GPU bus ids: another machine's topology
DGX_A100_GPUS = ("07", "0f", "47", "4e", "87", "90", "b7", "bd")
DGX_A100_NICS = ("0c", "12", "54", "58", "8d", "94", "ba", "cc")


def nccl_topo_xml(gpus: tuple[str, ...] = DGX_A100_GPUS, nics: tuple[str, ...] = DGX_A100_NICS) -> str:
    """An ``NCCL_TOPO_FILE`` for an 8-GPU/8-NIC two-socket machine (``<system version="1">``)."""
    out = ['<system version="1">']
    half = len(gpus) // 2
    for s in range(2):
        aff = "00000000,0000ffff,ffffffff" if s == 0 else "ffffffff,ffff0000,00000000"
        out.append(f'  <cpu numaid="{s}" affinity="{aff}" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">')
        for i in range(s * half, (s + 1) * half):
            out += [f'    <pci busid="0000:{int(gpus[i], 16) - 2:02x}:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">',
                    f'      <pci busid="0000:{gpus[i]}:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"/>',
                    f'      <pci busid="0000:{nics[i]}:00.0" class="0x020700" link_speed="16.0 GT/s PCIe" link_width="16"/>',
                    "    </pci>"]
        out.append("  </cpu>")
    out.append("</system>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ verbs, RoCE counters

def _guid_colon(guid: str) -> str:
    h = guid[2:].rjust(16, "0")
    return ":".join(h[i:i + 4] for i in range(0, 16, 4))


def ibv_devinfo(host: str, ports: list[dict]) -> str:
    """``ibv_devinfo -v``-style listing of the HCAs. Each port dict: device, guid, fw, state (PORT_ACTIVE...),
    active_mtu, max_mtu, sm_lid, lid, link_layer ('InfiniBand'/'Ethernet'), width, gids [(index, gid, type)]."""
    out = [f"[root@{host} ~]# ibv_devinfo -v"]
    for p in ports:
        eth = p["link_layer"] == "Ethernet"
        out += [
            f"hca_id:\t{p['device']}",
            "\ttransport:\t\t\tInfiniBand (0)",
            f"\tfw_ver:\t\t\t\t{p['fw']}",
            f"\tnode_guid:\t\t\t{_guid_colon(p['guid'])}",
            f"\tsys_image_guid:\t\t\t{_guid_colon(p['guid'])}",
            "\tvendor_id:\t\t\t0x02c9",
            f"\tvendor_part_id:\t\t\t{HCA_PART_ID}",
            "\thw_ver:\t\t\t\t0x0",
            "\tboard_id:\t\t\tMT_0000000838",
            "\tphys_port_cnt:\t\t\t1",
            "\t\tport:\t1",
            f"\t\t\tstate:\t\t\t{p['state']}",
            f"\t\t\tmax_mtu:\t\t{p['max_mtu']} ({MTU_ENUM[p['max_mtu']]})",
            f"\t\t\tactive_mtu:\t\t{p['active_mtu']} ({MTU_ENUM[p['active_mtu']]})",
            f"\t\t\tsm_lid:\t\t\t{0 if eth else p['sm_lid']}",
            f"\t\t\tport_lid:\t\t{0 if eth else p['lid']}",
            "\t\t\tport_lmc:\t\t0x00",
            f"\t\t\tlink_layer:\t\t{p['link_layer']}",
            f"\t\t\tactive_width:\t\t{p.get('width', '4X')} ({2 if p.get('width', '4X') == '4X' else 16})",
            "\t\t\tactive_speed:\t\t100.0 Gbps (128)",
            "\t\t\tphys_state:\t\tLINK_UP (5)",
        ]
        out += [f"\t\t\tGID[{i:3d}]:\t\t{gid}" + (f", {typ}" if typ else "") for i, gid, typ in p.get("gids", [])]
        out.append("")
    return "\n".join(out) + "\n"


def roce_gids(k: int, host_index: int, mac: int, rail_subnet: bool = True) -> list[tuple[int, str, str]]:
    """The GID table of a RoCE port: link-local v1/v2 from its MAC, then the IPv4-mapped v1/v2 of its address
    (one /24 per rail when ``rail_subnet``)."""
    eui = mac ^ (0x02 << 40)
    e = f"{eui >> 24:06x}fffe{eui & 0xFFFFFF:06x}"
    ll = f"fe80::{e[0:4]}:{e[4:8]}:{e[8:12]}:{e[12:16]}"
    ip = f"10.100.{k if rail_subnet else 0}.{host_index + 11}"
    octs = [int(x) for x in ip.split(".")]
    hexip = f"{octs[0]:02x}{octs[1]:02x}:{octs[2]:02x}{octs[3]:02x}"
    return [(0, f"fe80:0000:0000:0000:{e[0:4]}:{e[4:8]}:{e[8:12]}:{e[12:16]}", "RoCE v1"), (1, ll, "RoCE v2"),
            (2, f"0000:0000:0000:0000:0000:ffff:{hexip}", "RoCE v1"), (3, f"::ffff:{ip}", "RoCE v2")]


def ibdev2netdev(host: str, names: list[tuple[str, str, bool]]) -> str:
    out = [f"[root@{host} ~]# ibdev2netdev"]
    out += [f"{dev} port 1 ==> {nd} ({'Up' if up else 'Down'})" for dev, nd, up in names]
    return "\n".join(out) + "\n"


ETHTOOL_FILTER = "discards_phy|prio[0-7]_(bytes|pause)|pause_storm"


def ethtool_s(host: str, snaps: list[tuple[datetime, dict[str, dict[str, int]]]]) -> str:
    """Snapshots of ``ethtool -S <netdev> | grep -E '<filter>'`` for every RoCE netdev, each after ``date``."""
    out: list[str] = []
    for i, (t, devs) in enumerate(snaps):
        if i:
            out.append(f"[root@{host} ~]# sleep 30")
        out.append(f"[root@{host} ~]# date; for i in {' '.join(devs)}; do echo \"# $i\"; ethtool -S $i | grep -E"
                   f" '{ETHTOOL_FILTER}'; done")
        out.append(ctime(t, "UTC"))
        for dev, counters in devs.items():
            out.append(f"# {dev}")
            out += [f"     {name}: {value}" for name, value in counters.items()]
    return "\n".join(out) + "\n"


RDMA_COUNTERS = (
    "rx_write_requests", "rx_read_requests", "rx_atomic_requests", "out_of_buffer", "out_of_sequence",
    "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err",
    "rx_dct_connect", "resp_local_length_error", "resp_cqe_error", "req_cqe_error", "req_remote_invalid_request",
    "req_remote_access_errors", "resp_remote_access_errors", "resp_cqe_flush_error", "req_cqe_flush_error",
    "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps",
    "roce_slow_restart_trans", "rp_cnp_ignored", "rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent",
    "rx_icrc_encapsulated",
)


def rdma_statistic(host: str, snaps: list[tuple[datetime, dict[str, dict[str, int]]]]) -> str:
    """Snapshots of ``rdma statistic show`` (one ``link <dev>/1 name value ...`` line per port)."""
    out: list[str] = []
    for i, (t, devs) in enumerate(snaps):
        if i:
            out.append(f"root@{host}:~# sleep 30")
        out += [f"root@{host}:~# date; rdma statistic show", ctime(t, "UTC")]
        for dev, c in devs.items():
            out.append(f"link {dev}/1 " + " ".join(f"{n} {c.get(n, 0)}" for n in RDMA_COUNTERS) + " ")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ subnet manager

def osm_line(t: datetime, tid: str, level: str, msg: str) -> str:
    """One opensm.log line: ``Mon DD HH:MM:SS uuuuuu [TID] 0xLL -> message``."""
    return f"{t:%b %d %H:%M:%S} {t.microsecond:06d} [{tid}] {level} -> {msg}"


def sminfo_lines(readings: list[tuple[str, int, str, int, int]]) -> str:
    """``pdsh -w <hosts> sminfo | sort``: (host, sm lid, sm guid, activity, priority) per reading."""
    out = ["[root@mgmt01 ~]# pdsh -w " + ",".join(h for h, *_ in readings) + " sminfo | sort"]
    for host, lid, guid, act, prio in sorted(readings):
        out.append(f"{host}: sminfo: sm lid {lid} sm guid {guid}, activity count {act} priority {prio} state 3 "
                   "SMINFO_MASTER")
    return "\n".join(out) + "\n"


def env_dump(env: dict[str, str], extra: dict[str, str] | None = None) -> str:
    """``env | sort`` of one rank's environment (NCCL_* plus a few launcher variables)."""
    rows = {**(extra or {}), **env}
    return "\n".join(f"{k}={v}" for k, v in sorted(rows.items())) + "\n"
