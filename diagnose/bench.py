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
