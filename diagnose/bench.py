"""Benchmarks. Speed goals are measured here, never asserted in tests.

``diagnose bench parse --mib 1024`` writes a synthetic mixed log bundle (NCCL INFO lines from many
ranks, 5% of them channel connection lines that the parser keeps, PyTorch watchdog lines, kernel lines) of the given size into a temporary folder and
measures the evidence stage on it: wall time, throughput, peak resident memory, and the *parse
floor*, the time Python alone needs to read the same bytes and split them into lines.
"""

from __future__ import annotations

import gzip
import resource
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_NCCL = (
    "gpu-a{h:03d}:{pid}:{pid} [{dev}] NCCL INFO Channel {ch:02d}/0 : {r}[{dev}] -> {p}[{dev}] [send] via NET/IB/{dev}/GDRDMA\n",
    "gpu-a{h:03d}:{pid}:{pid} [{dev}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f00{op:04x} recvbuff 0x7f10{op:04x} count 1048576 datatype 7 op 0 root 0 comm 0x55d0 [nranks=512] stream 0x5a\n",
    "gpu-a{h:03d}:{pid}:{pid} [{dev}] NCCL INFO comm 0x55d0 rank {r} nRanks 512 nNodes 64 localRanks 8 localRank {dev} MNNVL 0\n",
    "[2026-11-29 10:00:{s:02d}] gpu-a{h:03d}:{pid}:{pid} [{dev}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB ib0:10.0.{h}.1<0>\n",
)
_TORCH = "[rank{r}]:[E1129 10:00:{s:02d}.123456 {pid} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={op}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.\n"
_KERN = "[Sun Nov 29 10:00:{s:02d} 2026] mlx5_core 0000:{b:02x}:00.0: mlx5_cmd_out_err:838:(pid 1234): QUERY_VPORT_COUNTER(0x770) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x{op:x}), err(-22)\n"


@dataclass
class ParseBench:
    mib: float
    files: int
    records: int
    wall_s: float
    floor_s: float
    peak_rss_mib: float

    def table(self) -> str:
        rows = [
            ("input", f"{self.mib:.0f} MiB in {self.files} files"),
            ("evidence stage", f"{self.wall_s:.1f} s ({self.mib / self.wall_s:.0f} MiB/s)"),
            ("parse floor (read + split lines)", f"{self.floor_s:.1f} s ({self.mib / max(self.floor_s, 1e-9):.0f} MiB/s)"),
            ("ratio to floor", f"{self.wall_s / max(self.floor_s, 1e-9):.1f}x"),
            ("records kept", f"{self.records:,}"),
            ("peak RSS", f"{self.peak_rss_mib:.0f} MiB"),
        ]
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k.ljust(w)}  {v}" for k, v in rows)


def write_mixed_bundle(root: Path, mib: int, files: int = 4, gz: bool = False) -> int:
    """Write ``files`` logs totalling about ``mib`` MiB; returns the bytes written (uncompressed)."""
    root.mkdir(parents=True, exist_ok=True)
    per_file = mib * 1024 * 1024 // files
    total = 0
    for k in range(files):
        path = root / f"job-{k}.log{'.gz' if gz else ''}"
        opener = gzip.open if gz else open
        with opener(path, "wt") as fh:  # type: ignore[operator]
            n = 0
            i = k * 7919
            buf: list[str] = []
            while n < per_file:
                v = {"h": i % 64, "pid": 1000 + i % 8, "dev": i % 8, "ch": i % 32, "r": i % 512,
                     "p": (i + 8) % 512, "op": i, "s": i % 60, "b": i % 256}
                if i % 97 == 0:
                    line = _TORCH.format(**v)
                elif i % 89 == 0:
                    line = _KERN.format(**v)
                elif i % 20 == 0:  # connection setup: a few percent of a long job's log
                    line = _NCCL[0].format(**v)
                elif i % 1000 == 3:
                    line = _NCCL[3].format(**v)
                elif i % 1000 == 5:
                    line = _NCCL[2].format(**v)
                else:  # NCCL_DEBUG_SUBSYS=COLL chatter: one line per collective call
                    line = _NCCL[1].format(**v)
                buf.append(line)
                n += len(line)
                i += 1
                if len(buf) >= 4096:
                    fh.write("".join(buf))
                    buf.clear()
            fh.write("".join(buf))
        total += n
    return total


def parse_floor(root: Path) -> float:
    t = time.perf_counter()
    for p in sorted(root.iterdir()):
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rb") as fh:  # type: ignore[operator]
            while True:
                block = fh.read(8 * 1024 * 1024)
                if not block:
                    break
                block.decode("utf-8", errors="replace").split("\n")
    return time.perf_counter() - t


def bench_parse(mib: int = 1024, files: int = 4, gz: bool = False, workdir: Path | None = None) -> ParseBench:
    from diagnose.pipeline import gather

    tmp = Path(tempfile.mkdtemp(dir=workdir))
    try:
        written = write_mixed_bundle(tmp / "bundle", mib, files, gz)
        floor = parse_floor(tmp / "bundle")
        t = time.perf_counter()
        ev = gather([tmp / "bundle"])
        wall = time.perf_counter() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return ParseBench(written / 1048576, files, len(ev.records), wall, floor, rss)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class AccuracyRow:
    cause: str
    positives: int
    top1: int
    top3: int
    confirmed_elsewhere: int  # confirmed on a bundle whose expected cause is another (false positives)


@dataclass
class AccuracyBench:
    bundles: int
    positives: int
    top1: int
    top3: int
    healthy: int
    healthy_confirmed: list[str]
    negatives: int
    negatives_wrong: list[str]
    rows: list[AccuracyRow]

    def table(self) -> str:
        def pct(a: int, b: int) -> str:
            return f"{100.0 * a / b:.0f}%" if b else "-"

        lines = [
            f"bundles {self.bundles}: {self.positives} positive, {self.negatives} negative, {self.healthy} healthy",
            f"top-1 {pct(self.top1, self.positives)} ({self.top1}/{self.positives})   "
            f"top-3 {pct(self.top3, self.positives)} ({self.top3}/{self.positives})",
            f"negatives with their cause confirmed: {len(self.negatives_wrong)}"
            + (f" ({', '.join(self.negatives_wrong)})" if self.negatives_wrong else ""),
            f"healthy bundles with a confirmed cause: {len(self.healthy_confirmed)}"
            + (f" ({', '.join(self.healthy_confirmed)})" if self.healthy_confirmed else ""),
            "",
            f"{'cause':28} {'pos':>3} {'top1':>5} {'top3':>5} {'recall':>7} {'precision':>9}",
        ]
        for r in self.rows:
            tp = r.top1
            fp = r.confirmed_elsewhere
            prec = pct(tp, tp + fp)
            lines.append(f"{r.cause:28} {r.positives:>3} {r.top1:>5} {r.top3:>5} {pct(r.top1, r.positives):>7} {prec:>9}")
        return "\n".join(lines)


def bench_accuracy(root: Path) -> AccuracyBench:
    """Run every fixture bundle under ``root`` (folders holding an expect.yaml) and score the ranking."""
    import yaml

    from diagnose.catalog.loader import load_catalog
    from diagnose.pipeline import triage

    cat = load_catalog()
    bundles = sorted(p.parent for p in root.rglob("expect.yaml"))
    rows: dict[str, AccuracyRow] = {rid: AccuracyRow(rid, 0, 0, 0, 0) for rid in cat.rules}
    res = AccuracyBench(len(bundles), 0, 0, 0, 0, [], 0, [], [])
    for b in bundles:
        exp = yaml.safe_load((b / "expect.yaml").read_text()) or {}
        d = triage([b], exp.get("symptom"), catalog=cat)
        ranked = [c.id for c in d.causes]
        confirmed = [c.id for c in d.causes if c.verdict == "confirmed"]
        rel = b.relative_to(root).as_posix()
        top = exp.get("top")
        if top:
            res.positives += 1
            row = rows.setdefault(top, AccuracyRow(top, 0, 0, 0, 0))
            row.positives += 1
            if ranked[:1] == [top] and top in confirmed:
                res.top1 += 1
                row.top1 += 1
            if top in ranked[:3]:
                res.top3 += 1
                row.top3 += 1
        expected_too = set(exp.get("top_any") or []) | set(exp.get("confirmed") or [])
        for cid in confirmed:
            if cid != top and cid not in expected_too:
                rows.setdefault(cid, AccuracyRow(cid, 0, 0, 0, 0)).confirmed_elsewhere += 1
        nc = exp.get("not_confirmed")
        if nc == "all":
            res.healthy += 1
            if confirmed:
                res.healthy_confirmed.append(f"{rel}: {', '.join(confirmed)}")
        elif nc:
            res.negatives += 1
            wrong = [c for c in nc if c in confirmed]
            if wrong:
                res.negatives_wrong.append(f"{rel}: {', '.join(wrong)}")
    res.rows = [rows[k] for k in sorted(rows)]
    return res


# ------------------------------------------------------------------------------------------------
# issue: simulator sweep and scale (the simulator supports a subset of the cause ids)
CAUSE_TO_FAULT = {
    "link.bad_cable": "bad_cable",
    "link.port_down": "port_down",
    "link.degraded": "degraded",
    "link.flapping": "flapping",
    "fabric.congestion": "congestion",
    "gpu.xid_error": "gpu_xid",
}


def _truth_location(truth: dict[str, object]) -> tuple[set[str], set[str]]:
    """Names that count as the exact location of an injected fault: 'host/device' or 'switch/Pport' ends."""
    ends: set[str] = set()
    hosts: set[str] = set()
    loc = truth.get("location") or {}
    peer = truth.get("peer") or {}
    extra = [p for p in (truth.get("ports") or []) if isinstance(p, dict)]  # congestion: the hot ports
    for d in (loc, peer, *extra):
        if not isinstance(d, dict):
            continue
        if d.get("host"):
            hosts.add(str(d["host"]))
            if d.get("device"):
                ends.add(f"{d['host']}/{d['device']}")
        if d.get("switch") and d.get("port") is not None:
            ends.add(f"{d['switch']}/P{d.get('port')}")
    return ends, hosts


def _cause_ends(c: object) -> set[str]:
    loc = c.location  # type: ignore[attr-defined]
    ends = set()
    if loc.host and loc.device:
        ends.add(f"{loc.host}/{loc.device}")
    if loc.device and loc.port is not None and not loc.host:
        ends.add(f"{loc.device}/P{loc.port}")
    if loc.peer:
        p = loc.peer
        ends.add(p.rsplit("/P", 1)[0] if p.count("/") == 2 else p)
    return ends


@dataclass
class SweepRow:
    cause: str
    runs: int = 0
    top1: int = 0
    top3: int = 0
    exact: int = 0


def bench_sweep(hosts: int = 64, runs: int = 5, pairs: bool = True, seed: int = 0) -> str:
    """For each injectable cause: ``runs`` seeded injections at random locations, alone and (optionally)
    in pairs; top-1, top-3 and exact-location rates, and confirmations on healthy bundles."""
    import yaml

    from diagnose.catalog.loader import load_catalog
    from diagnose.pipeline import triage
    from diagnose.simulate import simulate

    cat = load_catalog()
    rows = {c: SweepRow(c) for c in CAUSE_TO_FAULT}
    pair_hits = pair_runs = healthy_conf = 0
    tmp = Path(tempfile.mkdtemp())
    try:
        for k in range(runs):
            out = simulate(tmp / f"healthy{k}", hosts=hosts, faults=[], seed=seed + k)
            d = triage([out], catalog=cat)
            healthy_conf += sum(c.verdict == "confirmed" for c in d.causes)
            shutil.rmtree(out)
        for cause, kind in CAUSE_TO_FAULT.items():
            row = rows[cause]
            for k in range(runs):
                out = simulate(tmp / f"{kind}{k}", hosts=hosts, faults=[kind], seed=seed + 100 + k)
                truth = yaml.safe_load((out / "truth.yaml").read_text())["faults"][0]
                d = triage([out], catalog=cat)
                ranked = [c.id for c in d.causes]
                row.runs += 1
                row.top1 += ranked[:1] == [cause] and d.causes[0].verdict == "confirmed"
                row.top3 += cause in ranked[:3]
                ends, thosts = _truth_location(truth)
                got = next((c for c in d.causes if c.id == cause), None)
                if got is not None and ((ends & _cause_ends(got)) or (not ends and got.location.host in thosts)):
                    row.exact += 1
                shutil.rmtree(out)
        if pairs:
            kinds = list(CAUSE_TO_FAULT.items())
            for k in range(runs):
                (c1, f1), (c2, f2) = kinds[k % len(kinds)], kinds[(k + 1 + k // len(kinds)) % len(kinds)]
                if c1 == c2:
                    continue
                out = simulate(tmp / f"pair{k}", hosts=hosts, faults=[f1, f2], seed=seed + 500 + k)
                d = triage([out], catalog=cat)
                top3 = [c.id for c in d.causes[:3]]
                pair_runs += 1
                pair_hits += c1 in top3 and c2 in top3
                shutil.rmtree(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def pct(a: int, b: int) -> str:
        return f"{100.0 * a / b:.0f}%" if b else "-"

    lines = [f"{'cause':22} {'runs':>4} {'top1':>6} {'top3':>6} {'exact loc':>9}"]
    tot = SweepRow("all")
    for r in rows.values():
        lines.append(f"{r.cause:22} {r.runs:>4} {pct(r.top1, r.runs):>6} {pct(r.top3, r.runs):>6} {pct(r.exact, r.runs):>9}")
        tot.runs += r.runs
        tot.top1 += r.top1
        tot.top3 += r.top3
        tot.exact += r.exact
    lines.append(f"{'single faults':22} {tot.runs:>4} {pct(tot.top1, tot.runs):>6} {pct(tot.top3, tot.runs):>6} "
                 f"{pct(tot.exact, tot.runs):>9}")
    lines.append(f"pairs: both in top 3 in {pair_hits}/{pair_runs} ({pct(pair_hits, pair_runs)})")
    lines.append(f"healthy bundles: {healthy_conf} confirmed cause(s) in {runs} runs")
    return "\n".join(lines)


@dataclass
class ScaleRow:
    hosts: int
    files_mib: float
    wall_s: float
    floor_s: float
    peak_rss_mib: float
    ports: int


def bench_scale(sizes: tuple[int, ...] = (512, 1024, 2048, 4096), seed: int = 0) -> str:
    """Triage wall time, peak memory and the ratio to the parse floor on simulated fabrics.

    Each size runs in a fresh process so peak memory is its own.
    """
    import json
    import subprocess
    import sys

    rows: list[ScaleRow] = []
    for n in sizes:
        code = (
            "import json,resource,time,tempfile,pathlib\n"
            "from diagnose.simulate import simulate\n"
            "from diagnose.bench import parse_floor_tree\n"
            "from diagnose.pipeline import triage\n"
            f"d=pathlib.Path(tempfile.mkdtemp())/'b'; simulate(d, hosts={n}, faults=['bad_cable'], seed={seed})\n"
            "size=sum(p.stat().st_size for p in d.rglob('*') if p.is_file())\n"
            "floor=parse_floor_tree(d)\n"
            "t=time.perf_counter(); r=triage([d]); wall=time.perf_counter()-t\n"
            "import shutil; shutil.rmtree(d.parent)\n"
            "print(json.dumps({'size':size,'wall':wall,'floor':floor,"
            "'rss':resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024}))\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        m = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(ScaleRow(n, m["size"] / 1048576, m["wall"], m["floor"], m["rss"], n * 8))
    lines = [f"{'hosts':>6} {'GPUs':>6} {'bundle MiB':>10} {'triage s':>9} {'floor s':>8} {'x floor':>8} {'peak MiB':>9}"]
    for r in rows:
        lines.append(f"{r.hosts:>6} {r.hosts * 8:>6} {r.files_mib:>10.0f} {r.wall_s:>9.1f} {r.floor_s:>8.1f} "
                     f"{r.wall_s / max(r.floor_s, 1e-9):>8.1f} {r.peak_rss_mib:>9.0f}")
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        lines.append(f"growth {a.hosts}->{b.hosts} hosts: x{b.wall_s / max(a.wall_s, 1e-9):.2f} time "
                     f"for x{b.hosts / a.hosts:.0f} hosts")
    return "\n".join(lines)


def parse_floor_tree(root: Path) -> float:
    """Time to read and split every line of every file under ``root`` (the parse floor)."""
    t = time.perf_counter()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with open(p, "rb") as fh:
                while True:
                    block = fh.read(8 * 1024 * 1024)
                    if not block:
                        break
                    block.decode("utf-8", errors="replace").split("\n")
    return time.perf_counter() - t
