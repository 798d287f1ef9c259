"""A fake cluster on this machine: stub ``srun``/``scontrol``/``squeue``/``ssh``/``pdsh``/``clush`` that run the command
they are given once per fake host, locally, with that host's stub tools first on PATH (real-format captures), and
print what it prints the way the real launcher does (``srun --label``'s ``N: ``, pdsh's and clush's ``host: ``, ssh
plain). A host can be made unreachable (the launcher's own error, no output) or hanging (it never answers).

Every launcher call is logged (one JSON argv per line) under the cluster's root, outside the bundle, so a test can
check what was asked of the launcher.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PORT_DOWN = ROOT / "fixtures" / "link" / "port_down" / "positive-hca-polling-one-host"
DATA = ROOT / "tests" / "data"

LAUNCHER = r'''#!{python}
"""Stub launcher: srun, scontrol, squeue, ssh, pdsh or clush, by the name it was called with."""
import json, os, subprocess, sys, threading
from pathlib import Path

ROOT = Path({root!r})
name = Path(sys.argv[0]).name
args = sys.argv[1:]
with open(ROOT / "calls.log", "a") as fh:
    fh.write(json.dumps([name, *args]) + "\n")


def host_env(host, slurm):
    env = {{k: v for k, v in os.environ.items() if k not in ("PATH", "SLURMD_NODENAME")}}
    env["PATH"] = f"{{ROOT / 'hosts' / host / 'bin'}}:{{ROOT / 'bin'}}"
    if slurm:
        env["SLURMD_NODENAME"] = host
    return env


lock = threading.Lock()


def run(host, argv, prefix, slurm):
    hdir = ROOT / "hosts" / host
    if not hdir.is_dir() or (hdir / "unreachable").exists():
        with lock:
            sys.stderr.write(f"{{prefix}}ssh: connect to host {{host}} port 22: No route to host\n")
        return 255
    if (hdir / "hang").exists():
        (hdir / "pid").write_text(str(os.getpid()))
        subprocess.run(["sleep", "600"])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=host_env(host, slurm),
                         stdin=subprocess.DEVNULL)
    out, err = p.communicate()
    with lock:
        for ln in out.splitlines():
            sys.stdout.write(f"{{prefix}}{{ln}}\n")
        for ln in err.splitlines():
            sys.stderr.write(f"{{prefix}}{{ln}}\n")
        sys.stdout.flush()
    return p.returncode


def fan(hosts, argv, prefix_of, slurm=False):
    codes = {{}}
    threads = [threading.Thread(target=lambda h=h, i=i: codes.__setitem__(h, run(h, argv, prefix_of(h, i), slurm)))
               for i, h in enumerate(hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def opts(args, with_value):
    """(options, the command after them)."""
    got, i = {{}}, 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if "=" in a:
            k, v = a.split("=", 1)
            got[k] = v
        elif a in with_value:
            got[a] = args[i + 1]
            i += 1
        else:
            got[a] = True
        i += 1
    return got, args[i:]


if name == "scontrol":
    job = args[-1]
    f = ROOT / "slurm" / job
    if not f.is_file():
        sys.stderr.write("slurm_load_jobs error: Invalid job id specified\n")
        sys.exit(1)
    print(f.read_text().strip())
elif name == "squeue":
    o, _ = opts(args, {{"-j", "-o"}})
    f = ROOT / "slurm" / o["-j"]
    if not f.is_file():
        sys.stderr.write("slurm_load_jobs error: Invalid job id specified\n")
        sys.exit(1)
    fields = dict(kv.split("=", 1) for kv in f.read_text().split() if "=" in kv)
    print(f"{{fields['JobState']}}|{{fields['NodeList']}}")
elif name == "srun":
    o, cmd = opts(args, {{"--jobid", "-w", "-N", "-n"}})
    if not (ROOT / "slurm" / o["--jobid"]).is_file():
        sys.stderr.write(f"srun: error: Unable to confirm allocation for job {{o['--jobid']}}: Invalid job id\n")
        sys.exit(1)
    hosts = o["--nodelist"].split(",")
    codes = fan(hosts, cmd, lambda h, i: f"{{i}}: ", slurm=True)
    for i, h in enumerate(hosts):
        if codes[h]:
            sys.stderr.write(f"srun: error: {{h}}: task {{i}}: Exited with exit code {{codes[h]}}\n")
    sys.exit(max(codes.values()))
elif name in ("pdsh", "clush"):
    o, cmd = opts(args, {{"-f", "-u", "-w"}})
    hosts = o["-w"].split(",")
    codes = fan(hosts, ["/bin/sh", "-c", " ".join(cmd)], lambda h, i: f"{{h}}: ")
    for h, c in codes.items():
        if c:
            sys.stderr.write(f"pdsh@launcher: {{h}}: ssh exited with exit code {{c}}\n" if name == "pdsh"
                             else f"clush: {{h}}: exited with exit code {{c}}\n")
    sys.exit(max(codes.values()) if name == "clush" else 0)
elif name == "ssh":
    o, rest = opts(args, {{"-o"}})
    host, cmd = rest[0], rest[1:]
    sys.exit(run(host, ["/bin/sh", "-c", " ".join(cmd)], "", False))
'''


class Cluster:
    """``root/bin`` (launchers, ``diagnose``, ``bash``) and ``root/hosts/<host>/bin`` (each host's tools)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        (root / "hosts").mkdir()
        (root / "slurm").mkdir()
        launcher = self.bin / "launcher"
        launcher.write_text(LAUNCHER.format(python=sys.executable, root=str(root)))
        launcher.chmod(0o755)
        for name in ("srun", "scontrol", "squeue", "ssh", "pdsh", "clush"):
            (self.bin / name).symlink_to(launcher)
        self._script(self.bin / "diagnose", f'exec {shlex.quote(sys.executable)} -m diagnose.interfaces.cli "$@"')
        for tool in ("bash", "sleep", "cat", "sh"):
            (self.bin / tool).symlink_to(f"/bin/{tool}")

    @staticmethod
    def _script(path: Path, body: str) -> None:
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def host(self, name: str, **tools: Path | str) -> Path:
        """A fake host whose ``tool`` prints the file given (a Path) or runs the shell text given (a str)."""
        hbin = self.root / "hosts" / name / "bin"
        hbin.mkdir(parents=True)
        for tool, what in tools.items():
            body = f"exec cat {shlex.quote(str(what))}" if isinstance(what, Path) else what
            self._script(hbin / tool.replace("_", "-"), body)
        return hbin.parent

    def unreachable(self, name: str) -> None:
        (self.root / "hosts" / name).mkdir(parents=True, exist_ok=True)
        (self.root / "hosts" / name / "unreachable").touch()

    def hanging(self, name: str) -> None:
        (self.root / "hosts" / name / "bin").mkdir(parents=True, exist_ok=True)
        (self.root / "hosts" / name / "hang").touch()

    def job(self, job: str, nodelist: str, state: str = "RUNNING") -> None:
        (self.root / "slurm" / job).write_text(
            f"JobId={job} JobName=train UserId=alice(1000) JobState={state} Reason=None ReqNodeList=(null) "
            f"ExcNodeList=(null) NodeList={nodelist} BatchHost={nodelist.split(',')[0]} NumNodes=2\n")

    def calls(self, name: str) -> list[list[str]]:
        log = self.root / "calls.log"
        rows = [json.loads(ln) for ln in log.read_text().splitlines()] if log.is_file() else []
        return [r[1:] for r in rows if r[0] == name]

    @property
    def path(self) -> str:
        return str(self.bin)


def port_down_hosts(c: Cluster, healthy: str = "kilo", sick: str = "lima") -> None:
    """Two hosts with the samples of a port that went down on one of them (its ibstat and dmesg), both reaching the
    SM; the healthy one also has the fabric tools."""
    sminfo = DATA / "sminfo" / "var_old_hex_lid_no_state.txt"
    c.host(healthy, ibstat=PORT_DOWN / "gpu-b111" / "ibstat.out", sminfo=sminfo,
           ibnetdiscover=DATA / "ibnetdiscover" / "ibnetdiscover_ports_test.out",
           ibqueryerrors=DATA / "ibqueryerrors" / "var_report_port_and_data_counters.txt",
           iblinkinfo=DATA / "iblinkinfo" / "legoos_README_iblinkinfo_snippet.txt",
           smpquery='echo "# SL2VL table: Lid $2"; echo "#                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|";'
                    ' echo "ports: in  0, out  $3: | 0| 1| 0| 1| 0| 1| 0| 1| 0| 1| 0| 1| 0| 1| 0| 1|"')
    c.host(sick, ibstat=PORT_DOWN / "gpu-b112" / "ibstat.out", sminfo=sminfo,
           dmesg=PORT_DOWN / "gpu-b112" / "dmesg.txt")
