"""``diagnose collect``: gather the evidence of one host, read-only, into a bundle ``triage`` reads best.

One table of collectors (:data:`COLLECTORS`): each a read-only command, the file its output goes to, a timeout,
the cause ids whose rules ask for it (their ``collect:`` lists), and whether it needs root to say everything. A
tool that is missing is recorded, not an error; a command that runs past its timeout is killed and recorded; the
whole run has a bound (``deadline_s``), past which the remaining collectors are recorded as skipped. Nothing is
changed on the host: no command of the table loads modules, resets devices, writes to the fabric or sets anything
(``DENY`` is checked against the table by a test). Counters are read twice, each read after a ``date`` line, the
interval apart, so rates and bit error ratios come from one bundle. The job's environment is read from a process
(``--pid``: ``/proc/<pid>/environ``) or a file (``--env-file``), and only the communication variables of it
(``NCCL_*``, ``UCX_*``, ``CUDA_*``, ``FI_*``, ``OMPI_MCA_*``... as :func:`diagnose.parsers._common.is_comm_env`
decides): never all variables, so no secret is collected.

Every bundle holds ``manifest.json``: the host, the time, the collector's version, and per command its argv, exit
code, duration, output file and status (``ok``, ``failed``, ``timeout``, ``missing``, ``skipped``). ``triage`` reads
the manifest for the host's name (no guessing from folder names) and leaves it out of the evidence.

A collector may run once per item the host shows (``each``): ``mlnx_qos -i``/``ethtool -S`` per RDMA netdev
(``ibdev2netdev``'s, else ``/sys/class/infiniband/*/device/net``), each output after a ``$ <command>`` echo line the
parsers read the interface from. ``optional`` collectors run only when asked (``dcgmi diag -r 1`` with ``--dcgm``).
With ``out=None`` nothing is written: the files stay in :attr:`Result.files` (``collect --out -`` streams them, see
:mod:`diagnose.collect.stream`), which is how a job's hosts are collected (:mod:`diagnose.collect.fanout`) and the
fabric once (:mod:`diagnose.collect.fabric`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path

MANIFEST = "manifest.json"
MANIFEST_KIND = "diagnose-collect"
JOB_MANIFEST_KIND = "diagnose-collect-job"  # the top of a job's bundle: its hosts' outcomes, no host of its own


@dataclass(frozen=True)
class Collector:
    name: str
    argv: tuple[str, ...]
    out: str
    causes: tuple[str, ...]
    timeout_s: float = 20.0
    root: bool = False  # says more as root (lspci's capabilities, dmesg on restricted kernels)
    twice: bool = False  # a counter read: run twice, the interval apart, a `date` line before each
    keep: str | None = None  # a regex: only the output lines it matches are kept (dmesg: what the parsers read)
    each: str | None = None  # "netdev" / "roce_netdev" / "job_port": run once per item, "{item}" in argv replaced
    optional: str | None = None  # run only when this option is given ("dcgm")
    outdir: bool = False  # writes files into "{dir}" (ibdiagnet -o), which are kept under out/<out>/
    echo: str = "$ {cmd}"  # with ``each``: the line before each item's output ({cmd}: the command, {item}: the item)


_DMESG_KEEP = (r"mlx5|mlx4|ib_|infiniband|NVRM|Xid|nvidia|peermem|nv_peer_mem|pcieport|AER|PCIe Bus Error|DMAR|IOMMU"
               r"|iommu|fabric ?manager|nvlink|NVLink|hugepage|oom|Out of memory|link (?:up|down)|Link (?:up|down)")

COLLECTORS: tuple[Collector, ...] = (
    Collector("ibstat", ("ibstat",), "ibstat.out", ("link.port_down", "link.degraded", "fabric.sm_problem",
                                                     "host.nic_driver_firmware")),
    Collector("ibv_devinfo", ("ibv_devinfo", "-v"), "ibv_devinfo.out", ("mtu.mismatch", "roce.gid_index")),
    Collector("ibdev2netdev", ("ibdev2netdev",), "ibdev2netdev.out", ("link.port_down", "nccl.interface_selection")),
    Collector("show_gids", ("show_gids",), "show_gids.out", ("roce.gid_index",)),
    Collector("perfquery", ("perfquery", "-x"), "perfquery.txt", ("link.bad_cable", "link.flapping",
                                                                 "fabric.congestion"), twice=True),
    Collector("sminfo", ("sminfo",), "sminfo.out", ("fabric.sm_problem",)),
    Collector("lspci", ("lspci", "-vvv"), "lspci.out", ("host.pcie_acs_iommu", "host.pcie_degraded",
                                                         "host.nic_driver_firmware"), root=True),
    Collector("lspci_tree", ("lspci", "-tv"), "lspci-tree.out", ("host.pcie_acs_iommu", "host.gdr_unavailable",
                                                                  "host.topology_misdetect")),
    Collector("lsmod", ("lsmod",), "lsmod.out", ("host.gdr_unavailable",)),
    Collector("dmesg", ("dmesg", "-T"), "dmesg.out", ("gpu.xid_error", "host.nic_driver_firmware",
                                                       "host.pcie_acs_iommu", "link.flapping"),
              root=True, keep=_DMESG_KEEP),
    Collector("ulimit", ("bash", "-c", "ulimit -a"), "ulimit.out", ("host.memlock_limit",)),
    Collector("df_shm", ("df", "-h", "/dev/shm"), "df-shm.out", ("host.shm_too_small",)),
    Collector("dev_infiniband", ("ls", "-l", "/dev/infiniband"), "dev-infiniband.out",
              ("host.container_rdma_access",)),
    # container and cgroup facts: which runtime (``none`` on a bare host), the process's cgroups, and the limits and
    # device rules that apply to it (cgroup v2 files, else v1's devices.list: ``c 231:* rwm`` lets it open the HCAs)
    Collector("container", ("systemd-detect-virt", "--container"), "container.out",
              ("host.container_rdma_access", "host.shm_too_small")),
    Collector("cgroup", ("cat", "/proc/self/cgroup"), "cgroup.out", ("host.container_rdma_access",)),
    Collector("cgroup_limits", ("grep", "-H", ".", "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/pids.max",
                                "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/devices/devices.list"), "cgroup-limits.out",
              ("host.container_rdma_access", "host.memlock_limit")),
    Collector("nvidia_smi", ("nvidia-smi",), "nvidia-smi.out", ("gpu.xid_error", "gpu.throttling")),
    Collector("nvidia_smi_q", ("nvidia-smi", "-q"), "nvidia-smi-q.out", ("gpu.throttling", "host.pcie_degraded",
                                                                         "gpu.xid_error"), timeout_s=60),
    Collector("nvidia_smi_topo", ("nvidia-smi", "topo", "-m"), "nvidia-smi-topo.out",
              ("host.topology_misdetect", "host.numa_affinity", "host.gdr_unavailable")),
    Collector("nvidia_smi_nvlink", ("nvidia-smi", "nvlink", "-s"), "nvidia-smi-nvlink.out", ("gpu.nvlink_degraded",)),
    Collector("nvidia_smi_nvlink_errors", ("nvidia-smi", "nvlink", "-e"), "nvidia-smi-nvlink-errors.out",
              ("gpu.nvlink_degraded",), twice=True),
    Collector("fabricmanager", ("systemctl", "status", "nvidia-fabricmanager", "--no-pager", "-l"),
              "fabricmanager-status.out", ("gpu.fabric_manager",)),
    Collector("ofed_info", ("ofed_info", "-s"), "ofed_info.out", ("host.nic_driver_firmware",
                                                                   "nccl.version_mismatch")),
    Collector("ucx_info", ("ucx_info", "-v"), "ucx_info.out", ("nccl.version_mismatch",)),
    # per RDMA netdev (after ibdev2netdev and ibstat above, which name them and their link layer)
    Collector("rdma_statistic", ("rdma", "statistic", "show"), "rdma-statistic.out", ("roce.pfc_ecn",), twice=True),
    Collector("mlnx_qos", ("mlnx_qos", "-i", "{item}"), "mlnx_qos.out", ("roce.pfc_ecn", "fabric.qos_misconfig"),
              each="roce_netdev"),
    Collector("ethtool_stats", ("ethtool", "-S", "{item}"), "ethtool-S.out", ("roce.pfc_ecn", "fabric.qos_misconfig",
                                                                              "link.bad_cable"),
              each="netdev", twice=True, echo="=== {item} ==="),  # the parser's own per-netdev header
    Collector("dcgmi_diag", ("dcgmi", "diag", "-r", "1"), "dcgmi-diag.out", ("gpu.xid_error", "gpu.nvlink_degraded",
                                                                             "host.pcie_degraded"),
              timeout_s=180, optional="dcgm"),
)

# what no collector's command may hold: loading or unloading modules, resetting or reconfiguring devices, ports,
# GPUs or QoS, writing firmware or fabric state, clearing counters (perfquery -r/-R, ibqueryerrors -k/-K, ibdiagnet
# --pc), stress tests (dcgmi diag levels past 1), restarting services, killing processes, writing files by shell
DENY = re.compile(
    r"\b(?:modprobe|rmmod|insmod|reboot|shutdown|kill|pkill|killall|flint|mstflint|mstfwreset|mlxfwreset|mlxreg"
    r"|ibportstate|smpset|ibsetup|opensm|echo|tee|dd|write|set)\b"
    r"|(?:^|\s)--?reset\b|\breset\b|[>|]"
    r"|\bmlxconfig\b.*\s(?:s|set|reset|r)\b"
    r"|\bperfquery\b.*\s-(?:[a-zA-Z]*[rR]\b|-reset)"
    r"|\bibqueryerrors\b.*\s(?:-[a-zA-Z]*[kK]\b|--clear)"
    r"|\bibdiagnet\b.*\s(?:--?pc\b|--ber_test\b|--reset|--load_db\b|--sc\b)"
    r"|\bnvidia-smi\s+(?:-(?:r|pm|e|c|ac|rac|pl|lgc|rgc|lmc|rmc|am|caa|mig|cc|dm|dog|acp)\b|--(?:gpu-reset|persistence"
    r"|ecc-config|compute-mode|applications-clocks|power-limit|lock|reset|auto-boost))"
    r"|\bnvidia-smi\b.*\bnvlink\b.*\s(?:-r|--resetcounters|-sc|--setcontrol)\b"
    r"|\bdcgmi\b.*\s-r\s*[2-4]\b|\bdcgmi\s+(?:config|policy)\b"
    r"|\bethtool\s+-[sKGACLEfrWXNUp]\b|\bethtool\s+--(?:change|set|reset|flash|config|identify)"
    r"|\bmlnx_qos\b.*\s(?:-[psrfd]\b|--(?:trust|pfc|dscp2prio|prio_tc|prio2buffer|tsa|tcbw|ratelimit|cable_len"
    r"|buffer_size|dcbx))"
    r"|\bsystemctl\b(?!.*\bstatus\b)|\bip\s+(?:link|addr|route)\s+(?:set|add|del|change|replace)\b")


@dataclass
class Step:
    name: str
    argv: list[str]
    out: str | None
    status: str  # ok | failed | timeout | missing | skipped
    exit_code: int | None = None
    duration_s: float = 0.0
    note: str | None = None


_SEVERITY = {"ok": 0, "failed": 1, "timeout": 2}


@dataclass
class Result:
    out: Path | None
    host: str
    steps: list[Step] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # with out=None: the bundle's files, manifest included
    manifest: dict[str, object] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = {}
        for s in self.steps:
            c[s.status] = c.get(s.status, 0) + 1
        return c


def comm_env(text: str) -> list[str]:
    """The communication variables of an environment (``NAME=value`` lines or ``/proc/<pid>/environ``'s NULs)."""
    from diagnose.parsers._common import is_comm_env

    out = []
    for item in re.split(r"[\0\n]", text):
        name, sep, _ = item.partition("=")
        if sep and is_comm_env(name.strip()):
            out.append(item.strip())
    return sorted(set(out))


def _now() -> str:
    return datetime.now(timezone.utc).astimezone().strftime("%a %b %d %H:%M:%S %Z %Y")


def run_command(argv: Sequence[str], keep: str | None, timeout_s: float) -> tuple[str, int | None, str, str | None]:
    """(output, exit code, status, note) of one command; never raises."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, errors="replace", timeout=timeout_s,
                           stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        return partial, None, "timeout", f"killed after {timeout_s:g} s"
    except OSError as exc:
        return "", None, "failed", str(exc)
    text = p.stdout + (p.stderr if p.returncode else "")
    if keep:
        rx = re.compile(keep)
        text = "".join(ln for ln in text.splitlines(keepends=True) if rx.search(ln))
    return text, p.returncode, "ok" if p.returncode == 0 else "failed", None


_IBDEV2NETDEV = re.compile(r"^(?P<dev>\S+) port (?P<port>\d+) ==> (?P<netdev>\S+)", re.MULTILINE)
_NETDEV = re.compile(r"^[A-Za-z0-9][\w.\-@:]{0,30}$")  # what may go into an argv as an interface name


def _netdevs(files: dict[str, str], sysfs: Path = Path("/sys/class/infiniband")) -> list[tuple[str, int, str]]:
    """(device, port, netdev) of this host's RDMA netdevs: ibdev2netdev's lines, else sysfs's device/net links."""
    found = [(m["dev"], int(m["port"]), m["netdev"]) for m in _IBDEV2NETDEV.finditer(files.get("ibdev2netdev.out", ""))]
    if not found:
        try:
            for dev in sorted(sysfs.iterdir()):
                net = dev / "device" / "net"
                for nd in sorted(net.iterdir()) if net.is_dir() else ():
                    port = (nd / "dev_port").read_text().strip() if (nd / "dev_port").is_file() else "0"
                    found.append((dev.name, int(port) + 1 if port.isdigit() else 1, nd.name))
        except OSError:
            pass
    return [f for f in dict.fromkeys(found) if _NETDEV.match(f[2])]


def _roce(files: dict[str, str]) -> set[tuple[str, int]]:
    """(device, port) pairs whose link layer ibstat shows as Ethernet (RoCE); empty when ibstat said nothing."""
    from diagnose.parsers import ibstat
    from diagnose.parsers._ib import IbPort

    text = files.get("ibstat.out", "")
    ports = [r for r in ibstat.parse(text, "ibstat.out").records if isinstance(r, IbPort)] if text else []
    return {(r.device, r.port) for r in ports if (r.link_layer or "").lower() == "ethernet"}


def _items(c: Collector, files: dict[str, str], items: dict[str, list[str]]) -> list[str]:
    """What a per-item collector runs on: this host's RDMA netdevs (RoCE ones for ``roce_netdev`` when ibstat names
    link layers), or the given items (the fabric's job ports)."""
    if c.each in items:
        return items[c.each]
    if c.each not in ("netdev", "roce_netdev"):
        return []
    devs = _netdevs(files)
    if c.each == "roce_netdev" and "ibstat.out" in files:
        roce = _roce(files)
        devs = [d for d in devs if (d[0], d[1]) in roce]
    return [d[2] for d in devs]


def _argv(template: Sequence[str], item: str | None, tmp: str | None) -> list[str]:
    """A command of the table with its item (an argv element ``{item}`` becomes the item's words) and folder."""
    out: list[str] = []
    for a in template:
        if a == "{item}":
            out.extend((item or "").split())
        else:
            out.append(a.replace("{dir}", tmp or ""))
    return out


def collect(out: Path | None, *, interval_s: float = 30.0, deadline_s: float = 300.0, pid: int | None = None,
            env_file: Path | None = None, collectors: Sequence[Collector] = COLLECTORS,
            host: str | None = None, progress: Callable[[str], None] | None = None,
            options: frozenset[str] = frozenset(), items: dict[str, list[str]] | None = None,
            scope: str = "host", extra: dict[str, object] | None = None) -> Result:
    """Run the collectors into ``out`` (created; nothing is written outside it) and write its manifest; with
    ``out=None`` into :attr:`Result.files` only. ``options`` turns on optional collectors (``"dcgm"``,
    ``"ibdiagnet"``); ``items`` gives the per-item collectors their items (else this host's netdevs)."""
    from diagnose import __version__

    host = host or socket.gethostname().split(".")[0]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    res = Result(out, host)
    started = time.monotonic()
    items = items or {}

    def left() -> float:
        return deadline_s - (time.monotonic() - started)

    def put(name: str, text: str) -> None:
        res.files[name] = text
        if out is not None:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(text, encoding="utf-8")

    for c in collectors:
        if c.optional and c.optional not in options:
            continue
        if progress:
            progress(c.name)
        if shutil.which(c.argv[0]) is None:
            res.steps.append(Step(c.name, list(c.argv), None, "missing", note=f"{c.argv[0]} not found on PATH"))
            continue
        if left() <= 0:
            res.steps.append(Step(c.name, list(c.argv), None, "skipped", note=f"the run's {deadline_s:g} s bound"))
            continue
        each = _items(c, res.files, items) if c.each else [None]
        if not each and c.each:  # (each is [None] when c.each is unset)
            res.steps.append(Step(c.name, list(c.argv), None, "skipped", note=f"no {c.each.replace('_', ' ')} here"))
            continue
        t0 = time.monotonic()
        parts: list[str] = []
        runs: list[tuple[int | None, str, str | None]] = []  # (exit code, status, note) of each command run
        with tempfile.TemporaryDirectory(prefix="diagnose-collect-") if c.outdir else nullcontext(None) as tmp:
            for i in range(2 if c.twice else 1):
                if i:
                    time.sleep(max(0.0, min(interval_s, left() - c.timeout_s)))
                if c.twice:
                    parts.append(f"{_now()}\n")
                for item in each:
                    argv = _argv(c.argv, item, tmp)
                    text, code, status, note = run_command(argv, c.keep, max(0.1, min(c.timeout_s, left())))
                    if c.each:
                        parts.append(c.echo.replace("{cmd}", " ".join(argv)).replace("{item}", item or "") + "\n")
                    parts.append(text)
                    runs.append((code, status, note if len(each) == 1 or not note else f"{item}: {note}"))
                    if status == "timeout" or left() <= 0:
                        break
                if any(r[1] == "timeout" for r in runs) or all(r[1] != "ok" for r in runs):
                    break  # a counter read that hung, or failed on every item, is not read again
            if tmp:
                _keep_outdir(Path(tmp), c.out, put)
        body = "".join(parts)
        if not c.outdir and body.strip():
            put(c.out, body)
        elif not c.outdir:  # nothing to read: listed in the manifest, not left as an empty file
            runs.append((runs[-1][0], runs[-1][1], "no output" if not c.keep else "no line the parsers read"))
        worst = max(runs, key=lambda r: _SEVERITY[r[1]])
        notes = "; ".join(dict.fromkeys(r[2] for r in runs if r[2])) or None
        argv = [a.replace("{item}", ",".join(x or "" for x in each)) for a in c.argv]
        res.steps.append(Step(c.name, argv, c.out if c.out in res.files or c.outdir else None, worst[1], worst[0],
                              round(time.monotonic() - t0, 3), notes))
    env_text = ""
    if pid is not None:
        try:
            env_text = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError as exc:
            res.steps.append(Step("env", [f"/proc/{pid}/environ"], None, "failed", note=str(exc)))
    elif env_file is not None:
        try:
            env_text = env_file.read_text(errors="replace")
        except OSError as exc:
            res.steps.append(Step("env", [str(env_file)], None, "failed", note=str(exc)))
    if env_text:
        put("env.txt", "".join(f"{v}\n" for v in comm_env(env_text)))
        res.steps.append(Step("env", ["--pid" if pid is not None else "--env-file"], "env.txt", "ok"))
    manifest: dict[str, object] = {"kind": MANIFEST_KIND, "scope": scope, "host": host,
                                   "collected_at": datetime.now(timezone.utc).isoformat(),
                                   "collector_version": __version__, "interval_s": interval_s}
    if scope == "host":  # which fabric tools this host has: the fan-out reads the fabric from the first that has them
        from diagnose.collect.fabric import FABRIC_TOOLS

        manifest["fabric_tools"] = [t for t in FABRIC_TOOLS if shutil.which(t)]
    if os.environ.get("SLURMD_NODENAME"):  # under srun: the node's name in the job's node list
        manifest["slurm_node"] = os.environ["SLURMD_NODENAME"]
    manifest.update(extra or {})
    manifest["commands"] = [asdict(s) for s in res.steps]
    res.manifest = manifest
    put(MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return res


_KEEP_CAP = 64 << 20  # bytes of one file an output folder (ibdiagnet's) may hand in


def _keep_outdir(tmp: Path, into: str, put: Callable[[str, str], None]) -> None:
    """The regular files a tool wrote into its own folder, under ``into/`` (a file past the cap is left out)."""
    for f in sorted(tmp.rglob("*")):
        if f.is_file() and not f.is_symlink() and f.stat().st_size <= _KEEP_CAP:
            put(f"{into}/{f.relative_to(tmp).as_posix()}", f.read_text(encoding="utf-8", errors="replace"))


_MANIFEST_CAP = 16 << 20


def _read_manifest(folder: Path) -> dict[str, object] | None:
    """The JSON object in ``folder/manifest.json`` when that is a regular file (a FIFO or device named so is never
    opened: a bundle is hostile input) of sane size and not a symbolic link (which could lead out of the bundle);
    else None."""
    f = folder / MANIFEST
    try:
        if f.is_symlink() or not f.is_file() or f.stat().st_size > _MANIFEST_CAP:
            return None
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_manifest(folder: Path) -> bool:
    """True when ``folder`` holds a manifest this collector wrote (a host's, the fabric's or a job's)."""
    data = _read_manifest(folder)
    return data is not None and data.get("kind") in (MANIFEST_KIND, JOB_MANIFEST_KIND)


def job_failures(folder: Path) -> list[tuple[str, str, str]]:
    """The hosts (and the fabric's turn) a job's manifest in ``folder`` records as not collected: (their folder or
    name, the host, what happened), so that a triage of the bundle lists them instead of leaving them out unsaid."""
    data = _read_manifest(folder)
    if data is None or data.get("kind") != JOB_MANIFEST_KIND:
        return []
    out: list[tuple[str, str, str]] = []
    fabric = data.get("fabric")
    for row in [*json_list(data.get("hosts")), *([fabric] if isinstance(fabric, dict) else [])]:
        if not isinstance(row, dict) or row.get("status") in ("ok", None):
            continue
        host = str(row.get("host") or "-")[:200]
        where = str(row.get("folder") or host)[:200]
        note = " ".join(str(row.get("note") or "").split())[:300]
        what = "the fabric's collection" if row is fabric else f"collect on {host}"
        out.append((where, host, f"{what}: {row.get('status')}" + (f" ({note})" if note else "")))
    return out


def json_list(value: object) -> list[object]:
    """A manifest's list as it was read (a list the collector wrote; anything else, as a damaged or forged manifest
    may hold, is no list: empty)."""
    return value if isinstance(value, list) else []


_COMM_TOOLS = ("nvidia_smi", "ibstat", "ibv_devinfo")  # one of them runs on any GPU or RDMA host


def hosts_without_comm_tools(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The hosts of the bundles this collector wrote among ``paths`` (a host's bundle, or a job's with a folder per
    host) when none of them has a GPU or RDMA tool (nvidia-smi, ibstat, ibv_devinfo all recorded missing): a login
    node or a VM. Empty when any host has one, or when no host's manifest is there."""
    hosts: list[str] = []
    for raw in paths:
        p = Path(raw)
        try:
            if not p.is_dir() or p.is_symlink():
                continue
            folders = [p, *sorted(q for q in islice(p.iterdir(), 100_000) if q.is_dir() and not q.is_symlink())]
        except OSError:
            continue
        for folder in folders:
            data = _read_manifest(folder)
            if data is None or data.get("kind") != MANIFEST_KIND or data.get("scope", "host") != "host":
                continue
            status = {c.get("name"): c.get("status") for c in json_list(data.get("commands")) if isinstance(c, dict)}
            if any(status.get(t) != "missing" for t in _COMM_TOOLS):
                return []
            hosts.append(str(data.get("host") or folder.name))
    return hosts


def manifest_host(folder: Path) -> str | None:
    """The host a collected bundle folder names in its manifest (None: no manifest of ours there)."""
    data = _read_manifest(folder)
    if data is None or data.get("kind") != MANIFEST_KIND or data.get("scope", "host") != "host":
        return None  # the fabric's outputs are the whole fabric's, not the host they were read from
    host = data.get("host")
    return host if isinstance(host, str) and host.strip() else None
