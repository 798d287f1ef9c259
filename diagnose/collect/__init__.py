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
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

MANIFEST = "manifest.json"
MANIFEST_KIND = "diagnose-collect"


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
    Collector("nvidia_smi", ("nvidia-smi",), "nvidia-smi.out", ("gpu.xid_error", "gpu.throttling")),
    Collector("nvidia_smi_q", ("nvidia-smi", "-q"), "nvidia-smi-q.out", ("gpu.throttling", "host.pcie_degraded",
                                                                         "gpu.xid_error"), timeout_s=60),
    Collector("nvidia_smi_topo", ("nvidia-smi", "topo", "-m"), "nvidia-smi-topo.out",
              ("host.topology_misdetect", "host.numa_affinity", "host.gdr_unavailable")),
    Collector("nvidia_smi_nvlink", ("nvidia-smi", "nvlink", "-s"), "nvidia-smi-nvlink.out", ("gpu.nvlink_degraded",)),
    Collector("fabricmanager", ("systemctl", "status", "nvidia-fabricmanager", "--no-pager", "-l"),
              "fabricmanager-status.out", ("gpu.fabric_manager",)),
    Collector("ofed_info", ("ofed_info", "-s"), "ofed_info.out", ("host.nic_driver_firmware",
                                                                   "nccl.version_mismatch")),
    Collector("ucx_info", ("ucx_info", "-v"), "ucx_info.out", ("nccl.version_mismatch",)),
)

# words no collector's command may hold: loading or unloading modules, resetting or reconfiguring devices and
# ports, writing firmware or fabric state, killing processes
DENY = re.compile(r"\b(?:modprobe|rmmod|insmod|reset|--reset|-r\b|mlxconfig\s+.*\bs(?:et)?\b|ibportstate|set|"
                  r"reboot|kill|write|flint|mstfwreset|ip\s+link\s+set|ethtool\s+-[sKGA]|echo|tee|dd)\b")


@dataclass
class Step:
    name: str
    argv: list[str]
    out: str | None
    status: str  # ok | failed | timeout | missing | skipped
    exit_code: int | None = None
    duration_s: float = 0.0
    note: str | None = None


@dataclass
class Result:
    out: Path
    host: str
    steps: list[Step] = field(default_factory=list)

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


def _run(c: Collector, timeout_s: float) -> tuple[str, int | None, str, str | None]:
    """(output, exit code, status, note) of one command; never raises."""
    try:
        p = subprocess.run(list(c.argv), capture_output=True, text=True, errors="replace", timeout=timeout_s,
                           stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        return partial, None, "timeout", f"killed after {timeout_s:g} s"
    except OSError as exc:
        return "", None, "failed", str(exc)
    text = p.stdout + (p.stderr if p.returncode else "")
    if c.keep:
        rx = re.compile(c.keep)
        text = "".join(ln for ln in text.splitlines(keepends=True) if rx.search(ln))
    return text, p.returncode, "ok" if p.returncode == 0 else "failed", None


def collect(out: Path, *, interval_s: float = 30.0, deadline_s: float = 300.0, pid: int | None = None,
            env_file: Path | None = None, collectors: Sequence[Collector] = COLLECTORS,
            host: str | None = None, progress: Callable[[str], None] | None = None) -> Result:
    """Run the collectors into ``out`` (created; nothing is written outside it) and write its manifest."""
    from diagnose import __version__

    host = host or socket.gethostname().split(".")[0]
    out.mkdir(parents=True, exist_ok=True)
    res = Result(out, host)
    started = time.monotonic()

    def left() -> float:
        return deadline_s - (time.monotonic() - started)

    for c in collectors:
        if progress:
            progress(c.name)
        if shutil.which(c.argv[0]) is None:
            res.steps.append(Step(c.name, list(c.argv), None, "missing", note=f"{c.argv[0]} not found on PATH"))
            continue
        if left() <= 0:
            res.steps.append(Step(c.name, list(c.argv), None, "skipped", note=f"the run's {deadline_s:g} s bound"))
            continue
        t0 = time.monotonic()
        parts: list[str] = []
        status, code, note = "ok", None, None
        for i in range(2 if c.twice else 1):
            if i:
                time.sleep(max(0.0, min(interval_s, left() - c.timeout_s)))
            text, code, status, note = _run(c, max(0.1, min(c.timeout_s, left())))
            parts.append((f"{_now()}\n" if c.twice else "") + text)
            if status != "ok":
                break
        (out / c.out).write_text("".join(parts), encoding="utf-8")
        res.steps.append(Step(c.name, list(c.argv), c.out, status, code, round(time.monotonic() - t0, 3), note))
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
        (out / "env.txt").write_text("".join(f"{v}\n" for v in comm_env(env_text)), encoding="utf-8")
        res.steps.append(Step("env", ["--pid" if pid is not None else "--env-file"], "env.txt", "ok"))
    manifest = {"kind": MANIFEST_KIND, "host": host, "collected_at": datetime.now(timezone.utc).isoformat(),
                "collector_version": __version__, "interval_s": interval_s,
                "commands": [asdict(s) for s in res.steps]}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return res


def manifest_host(folder: Path) -> str | None:
    """The host a collected bundle folder names in its manifest (None: no manifest of ours there)."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    host = data.get("host") if isinstance(data, dict) and data.get("kind") == MANIFEST_KIND else None
    return host if isinstance(host, str) and host.strip() else None
