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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

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

    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
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
    bundles = sorted(p.parent for p in root.rglob("expect.yaml")
                     if "root_cause" not in (yaml.safe_load(p.read_text()) or {}))  # field cases: bench_field
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


# ------------------------------------------------------------------------------------------------ field
@dataclass
class FieldCase:
    id: str
    expected: str
    acceptable: list[str]
    difficulty: str
    ranked: list[str]

    @property
    def fair(self) -> set[str]:
        return {self.expected, *self.acceptable}

    @property
    def top1(self) -> bool:
        return bool(self.ranked) and self.ranked[0] in self.fair

    @property
    def top3(self) -> bool:
        return bool(self.fair.intersection(self.ranked[:3]))


@dataclass
class FieldBench:
    """Real incidents (fixtures/field): the case's symptom and files, scored on the ranked cause ids as a user
    reads them (top-1 is the first cause named, confirmed or not)."""

    cases: list[FieldCase]

    def _n(self, pred: Callable[[FieldCase], bool], cases: list[FieldCase] | None = None) -> int:
        return sum(1 for c in (self.cases if cases is None else cases) if pred(c))

    def to_dict(self) -> dict[str, object]:
        n = len(self.cases)
        return {
            "cases": n, "top1": self._n(lambda c: c.top1), "top3": self._n(lambda c: c.top3),
            "no_cause": self._n(lambda c: not c.ranked),
            "per_cause": {k: {"cases": len(v), "top1": self._n(lambda c: c.top1, v), "top3": self._n(lambda c: c.top3, v)}
                          for k, v in self._by(lambda c: c.expected).items()},
            "per_difficulty": {k: {"cases": len(v), "top1": self._n(lambda c: c.top1, v)}
                               for k, v in self._by(lambda c: c.difficulty).items()},
            "confusion": self.confusion(),
            "misses": [{"id": c.id, "expected": c.expected, "ranked": c.ranked[:3]} for c in self.cases if not c.top1],
        }

    def _by(self, key: Callable[[FieldCase], str]) -> dict[str, list[FieldCase]]:
        out: dict[str, list[FieldCase]] = {}
        for c in self.cases:
            out.setdefault(key(c), []).append(c)
        return dict(sorted(out.items()))

    def confusion(self) -> dict[str, dict[str, int]]:
        """expected cause -> first-ranked cause (``none`` when nothing was named) -> cases, for the misses."""
        out: dict[str, dict[str, int]] = {}
        for c in self.cases:
            if c.top1:
                continue
            got = c.ranked[0] if c.ranked else "none"
            row = out.setdefault(c.expected, {})
            row[got] = row.get(got, 0) + 1
        return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}

    def table(self) -> str:
        def pct(a: int, b: int) -> str:
            return f"{100.0 * a / b:.0f}%" if b else "-"

        n = len(self.cases)
        t1, t3, none = self._n(lambda c: c.top1), self._n(lambda c: c.top3), self._n(lambda c: not c.ranked)
        lines = [
            f"field cases {n}: top-1 {pct(t1, n)} ({t1}/{n})   top-3 {pct(t3, n)} ({t3}/{n})   "
            f"no cause named {pct(none, n)} ({none}/{n})",
            "by difficulty: " + "   ".join(f"{k} {self._n(lambda c: c.top1, v)}/{len(v)}"
                                           for k, v in self._by(lambda c: c.difficulty).items()),
            "",
            f"{'cause':28} {'cases':>5} {'top1':>5} {'top3':>5} {'recall':>7}",
        ]
        for k, v in self._by(lambda c: c.expected).items():
            a = self._n(lambda c: c.top1, v)
            lines.append(f"{k:28} {len(v):>5} {a:>5} {self._n(lambda c: c.top3, v):>5} {pct(a, len(v)):>7}")
        conf = self.confusion()
        if conf:
            lines += ["", "misses: expected -> ranked first (cases)"]
            for exp, row in conf.items():
                lines.append(f"  {exp:28} -> " + ", ".join(f"{g} ({k})" for g, k in row.items()))
        return "\n".join(lines)


def is_field(root: Path) -> bool:
    """A folder of field cases: its expect.yaml files name a ``root_cause`` (constructed fixtures name ``top``)."""
    import yaml

    for p in sorted(root.rglob("expect.yaml"))[:5]:
        if "root_cause" in (yaml.safe_load(p.read_text()) or {}):
            return True
    return False


def bench_field(root: Path, progress: Callable[[int, int], None] | None = None) -> FieldBench:
    """Every field case under ``root``: ``triage <case folder> --symptom <its symptom>`` (the loader leaves a bundle's
    own expect.yaml and README.md out of the evidence), the ranked ids against ``root_cause`` and ``acceptable``."""
    import yaml

    from diagnose.catalog.loader import load_catalog
    from diagnose.pipeline import triage

    cat = load_catalog()
    paths = sorted(p for p in root.rglob("expect.yaml"))
    out: list[FieldCase] = []
    for i, p in enumerate(paths):
        exp = yaml.safe_load(p.read_text()) or {}
        if "root_cause" not in exp:
            continue
        d = triage([p.parent], exp.get("symptom"), catalog=cat)
        out.append(FieldCase(str(exp.get("id") or p.parent.name), str(exp["root_cause"]),
                             list(exp.get("acceptable") or []), str(exp.get("difficulty") or "-"),
                             [c.id for c in d.causes]))
        if progress:
            progress(i + 1, len(paths))
    return FieldBench(out)


# ------------------------------------------------------------------------------------------------ sweep
# Every cause id the simulator can inject (all of the taxonomy), plus the short kinds of its first version as
# aliases; the CLI's ``simulate --fault CAUSE[@location]`` looks causes up here.
def _cause_to_fault() -> dict[str, str]:
    from diagnose.simulate import ALIASES, CAUSES

    return {**{c: c for c in CAUSES}, **ALIASES}


CAUSE_TO_FAULT = _cause_to_fault()


def _truth_location(truth: dict[str, object]) -> tuple[set[str], set[str]]:
    """Names that count as the exact location of an injected cable/port fault: 'host/device' or 'switch/Pport'
    ends (and the hosts among them)."""
    ends: set[str] = set()
    hosts: set[str] = set()
    loc = truth.get("location") or {}
    peer = truth.get("peer") or {}
    # congestion, routing: the hot ports (a JSON value, iterated as it is: the simulator writes a list)
    extra = [p for p in (truth.get("ports") or []) if isinstance(p, dict)]  # type: ignore[attr-defined]
    for d in (loc, peer, *extra):
        if not isinstance(d, dict):
            continue
        if d.get("host"):
            hosts.add(str(d["host"]))
            if d.get("device"):
                ends.add(f"{d['host']}/{d['device']}")
        if d.get("port") is not None:
            for sw in (d.get("switch"), d.get("guid")):
                if sw and not d.get("host"):
                    ends.add(f"{sw}/P{d.get('port')}")
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


def exact_location(truth: dict, cause: object) -> bool:
    """Does the diagnosed location of ``cause`` name the place the fault was injected at, by the fault's scope?

    cable: either end of the cable (or the far end named as peer); ports/uplink: one of the hot switch ports;
    host: that host; hca: that host and the HCA by any of its names (mlx5_k, PCI function, netdev); gpu: that
    host and GPU (PCI address or index), or the rank on it; job: no narrower place, or one of the job's hosts;
    subnet: no place, or the host the stray subnet manager runs on."""
    loc = cause.location  # type: ignore[attr-defined]
    scope = truth.get("scope")
    where = truth.get("location") or {}
    if scope in ("cable", "ports", "uplink"):
        ends, hosts = _truth_location(truth)
        got = _cause_ends(cause)
        return bool(ends & got) or (not ends and loc.host in hosts)
    if scope == "job":
        return loc.host is None or loc.host in (where.get("hosts") or [])
    if scope == "subnet":
        return (loc.host is None and loc.device is None) or loc.host == where.get("host")
    if loc.host != where.get("host"):
        return scope == "gpu" and loc.rank is not None and loc.rank == where.get("rank")
    if scope == "host":
        return True
    if scope == "hca":
        names = {str(where.get(k)) for k in ("device", "pci", "netdev") if where.get(k)}
        return loc.device in names
    if scope == "gpu":
        pci = str(where.get("pci") or "")
        names = {pci, pci.rsplit(".", 1)[0], f"GPU{where.get('gpu')}"}
        return loc.gpu in names or (loc.rank is not None and loc.rank == where.get("rank"))
    return False


@dataclass
class SweepRow:
    cause: str
    runs: int = 0
    top1: int = 0
    top3: int = 0
    exact: int = 0
    pair_runs: int = 0
    pair_top3: int = 0
    misses: list[str] = field(default_factory=list)


@dataclass
class SweepResult:
    """The accuracy sweep: per cause, ``runs`` single injections and the pairs it was part of."""

    hosts: int
    runs: int
    seed: int
    rows: list[SweepRow]
    pair_runs: int = 0
    pair_hits: int = 0
    pair_misses: list[str] = field(default_factory=list)
    healthy_runs: int = 0
    healthy_confirmed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @staticmethod
    def _pct(a: int, b: int) -> str:
        return f"{100.0 * a / b:.0f}%" if b else "-"

    def totals(self) -> SweepRow:
        tot = SweepRow("single faults")
        for r in self.rows:
            tot.runs += r.runs
            tot.top1 += r.top1
            tot.top3 += r.top3
            tot.exact += r.exact
        return tot

    def table(self) -> str:
        pct = self._pct
        lines = [f"{'cause':30} {'runs':>4} {'top1':>5} {'top3':>5} {'exact loc':>9} {'pairs top3':>10}"]
        for r in self.rows:
            pairs = f"{r.pair_top3}/{r.pair_runs}" if r.pair_runs else "-"
            lines.append(f"{r.cause:30} {r.runs:>4} {pct(r.top1, r.runs):>5} {pct(r.top3, r.runs):>5} "
                         f"{pct(r.exact, r.runs):>9} {pairs:>10}")
        tot = self.totals()
        lines.append(f"{tot.cause:30} {tot.runs:>4} {pct(tot.top1, tot.runs):>5} {pct(tot.top3, tot.runs):>5} "
                     f"{pct(tot.exact, tot.runs):>9}")
        lines.append(f"pairs: both in the top 3 in {self.pair_hits}/{self.pair_runs} "
                     f"({pct(self.pair_hits, self.pair_runs)})")
        lines.append(f"healthy bundles: {len(self.healthy_confirmed)} confirmed cause(s) in {self.healthy_runs} runs"
                     + (f" ({'; '.join(self.healthy_confirmed)})" if self.healthy_confirmed else ""))
        misses = [m for r in self.rows for m in r.misses] + self.pair_misses
        if misses:
            lines.append("misses:")
            lines += [f"  {m}" for m in misses]
        lines.append(f"{self.hosts} hosts, {self.runs} run(s) per cause, first seed {self.seed}, {self.seconds:.0f} s")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> dict:
        tot = self.totals()
        return {
            "hosts": self.hosts, "runs": self.runs, "seed": self.seed, "seconds": round(self.seconds, 1),
            "single": {"runs": tot.runs, "top1": tot.top1, "top3": tot.top3, "exact": tot.exact},
            "pairs": {"runs": self.pair_runs, "both_top3": self.pair_hits, "misses": self.pair_misses},
            "healthy": {"runs": self.healthy_runs, "confirmed": self.healthy_confirmed},
            "causes": [{"cause": r.cause, "runs": r.runs, "top1": r.top1, "top3": r.top3, "exact": r.exact,
                        "pair_runs": r.pair_runs, "pair_top3": r.pair_top3, "misses": r.misses} for r in self.rows],
        }

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), indent=2)


def sweep_pairs(causes: list[str], runs: int, seed: int) -> list[tuple[str, str]]:
    """``runs`` pairs per cause: each with a partner drawn (seeded) from the causes it can coexist with, every
    unordered pair at most once."""
    import random

    from diagnose.simulate import compatible

    rng = random.Random(f"{seed}:sweep-pairs")
    seen: set[frozenset[str]] = set()
    out: list[tuple[str, str]] = []
    for c in causes:
        partners = [p for p in causes if p != c and compatible(c, p)]
        rng.shuffle(partners)
        picked = 0
        for p in partners:
            if picked >= runs:
                break
            key = frozenset((c, p))
            if key in seen:
                continue
            seen.add(key)
            out.append((c, p))
            picked += 1
    return out


def bench_sweep(hosts: int = 64, runs: int = 3, pairs: bool = True, seed: int = 0, causes: list[str] | None = None,
                *, host_tools: str = "auto", keep: Path | None = None) -> SweepResult:
    """For each cause id (all of them by default): ``runs`` seeded injections at random locations, alone and, with
    ``pairs``, together with ``runs`` random partners it can coexist with; top-1 (first and confirmed), top-3 and
    exact-location rates, pair accuracy (both in the top 3) and confirmations on healthy bundles (written with
    every host tool collected). Sequential: one bundle at a time, removed after its triage (``keep``: a folder
    to keep the bundles of the misses in)."""
    import yaml

    from diagnose.catalog.loader import load_catalog
    from diagnose.pipeline import triage
    from diagnose.simulate import CAUSES, cause_id, simulate

    if runs < 1 or hosts < 2:
        raise ValueError("runs must be at least 1 and hosts at least 2")
    log = structlog.get_logger("diagnose.bench")
    ids = [cause_id(c) for c in (causes or list(CAUSES))]
    cat = load_catalog()
    rows = {c: SweepRow(c) for c in ids}
    res = SweepResult(hosts, runs, seed, list(rows.values()))
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="diagnose-sweep-"))

    def done(out: Path, missed: bool) -> None:
        if missed and keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copytree(out, keep / out.name, dirs_exist_ok=True)
        shutil.rmtree(out, ignore_errors=True)

    try:
        for k in range(runs):
            out = simulate(tmp / f"healthy-{seed + k}", hosts=hosts, faults=[], seed=seed + k, host_tools="all",
                           link_layer="roce" if k % 2 else "ib")
            d = triage([out], catalog=cat)
            res.healthy_runs += 1
            conf = [c.id for c in d.causes if c.verdict == "confirmed"]
            if conf:
                res.healthy_confirmed.append(f"seed {seed + k}: {', '.join(conf)}")
            done(out, bool(conf))
        for ci, cause in enumerate(ids):
            row = rows[cause]
            for k in range(runs):
                s = seed + 1000 * (ci + 1) + k
                row.runs += 1
                try:
                    out = simulate(tmp / f"{cause}-{s}", hosts=hosts, faults=[cause], seed=s, host_tools=host_tools)
                except ValueError as exc:  # a placement the simulator refuses is a miss of the simulator, kept
                    row.misses.append(f"{cause} seed {s}: not simulated ({exc})")
                    continue
                truth = yaml.safe_load((out / "truth.yaml").read_text())["faults"][0]
                d = triage([out], catalog=cat)
                ranked = [c.id for c in d.causes]
                top1 = ranked[:1] == [cause] and d.causes[0].verdict == "confirmed"
                row.top1 += top1
                row.top3 += cause in ranked[:3]
                got = next((c for c in d.causes if c.id == cause), None)
                exact = got is not None and exact_location(truth, got)
                row.exact += exact
                log.info("sweep_single", cause=cause, seed=s, top1=bool(top1), exact=bool(exact),
                         ranked=ranked[:3])
                if not (top1 and exact):
                    row.misses.append(f"{cause} seed {s}: ranked {', '.join(ranked[:3]) or 'nothing'}"
                                      + ("" if exact else f"; located {got.location.label() if got else '-'}"))
                done(out, not (top1 and exact))
        if pairs:
            for pi, (a, b) in enumerate(sweep_pairs(ids, runs, seed)):
                s = seed + 500000 + pi
                res.pair_runs += 1
                try:
                    out = simulate(tmp / f"pair-{s}", hosts=hosts, faults=[a, b], seed=s, host_tools=host_tools)
                except ValueError as exc:
                    res.pair_misses.append(f"{a} + {b} seed {s}: not simulated ({exc})")
                    rows[a].pair_runs += 1
                    rows[b].pair_runs += 1
                    continue
                d = triage([out], catalog=cat)
                top3 = [c.id for c in d.causes[:3]]
                hit = a in top3 and b in top3
                res.pair_hits += hit
                for c in (a, b):
                    rows[c].pair_runs += 1
                    rows[c].pair_top3 += c in top3
                log.info("sweep_pair", causes=[a, b], seed=s, both_top3=bool(hit), top3=top3)
                if not hit:
                    res.pair_misses.append(f"{a} + {b} seed {s}: top 3 {', '.join(top3)}")
                done(out, not hit)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.seconds = time.perf_counter() - t0
    tot = res.totals()
    log.info("sweep_done", hosts=hosts, runs=runs, singles=tot.runs, top1=tot.top1, exact=tot.exact,
             pairs=res.pair_runs, pair_hits=res.pair_hits, healthy_confirmed=len(res.healthy_confirmed),
             seconds=round(res.seconds, 1))
    return res


@dataclass
class ScaleRow:
    hosts: int
    gpus: int
    files: int
    files_mib: float
    ports: int
    wall_s: float
    floor_s: float
    peak_mib: float  # the triage's processes together: their summed proportional set size at its highest
    rss_bound_mib: float  # the triage's own peak RSS plus its children's peak RSS (an upper bound)
    top_cause: str
    located: bool
    wall_runs: list[float] = field(default_factory=list)  # every timed triage (wall_s is their median)
    floor_runs: list[float] = field(default_factory=list)  # every floor measured (floor_s is their median)


_FLOOR_CHILD = """
import json, sys, pathlib
from diagnose.bench import parse_floor_tree
print(json.dumps({"floor": parse_floor_tree(pathlib.Path(sys.argv[1]))}))
"""

_TRIAGE_CHILD = """
import json, resource, sys, time, pathlib
from diagnose.catalog.loader import load_catalog
from diagnose.engine import infer
from diagnose.pipeline import ParallelExecutor, gather
d = pathlib.Path(sys.argv[1])
floor = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
t = time.perf_counter()
ev = gather([d], keep_records=False, executor=ParallelExecutor())  # what the CLI's triage does, keeping the evidence for the second process's peak memory
r = infer(load_catalog(), ev.findings, ev.symptoms, ev.formats, ev.files)
wall = time.perf_counter() - t
top = r.causes[0] if r.causes else None
# the triage's own peak plus the peak RSS of the children it forked (an upper bound of them together)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 + ev.second_core_peak_mib
print(json.dumps({"wall": wall, "floor": floor, "rss": rss,
                  "top": top.id if top else "", "where": top.location.label() if top else ""}))
"""

SAMPLE_S = 0.025  # how often the memory run reads the processes' PSS


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc; just ``pid`` where /proc does not list children)."""
    import os

    out, i = [pid], 0
    while i < len(out):
        p, i = out[i], i + 1
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    out += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def _pss_kib(pid: int) -> int:
    """A process's proportional set size: its private pages plus its share of the pages it shares (a forked
    child's copy-on-write pages count once across the processes, not once per process as RSS does)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def peak_tree_pss(cmd: list[str], every: float = SAMPLE_S) -> tuple[float, str]:
    """Run ``cmd``; the highest sum of its processes' PSS (MiB) seen every ``every`` seconds, and its stdout.
    0 where /proc gives no PSS. A peak shorter than the interval can be missed."""
    import subprocess

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, sum(_pss_kib(p) for p in _tree(proc.pid)))
        time.sleep(every)
    out, err = proc.communicate()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd, out, err)
    return peak / 1024, out


def bench_scale(sizes: tuple[int, ...] = (512, 1024, 2048, 4096), seed: int = 0,
                workdir: Path | None = None, repeat: int = 1) -> list[ScaleRow]:
    """Triage wall time, peak memory and the ratio to the parse floor on simulated fabrics.

    Each bundle is the issue's scale case: a rail-optimized fat tree with 8 GPUs and 8 HCAs per host, two
    perfquery snapshots of every port (switch ports included), the topology, ibstat and dmesg of every host,
    the NCCL debug log of every rank (channel and transport lines) and nccl-tests, with one bad cable injected.
    The simulator runs in its own process and the triage in another, so the peak memory is the triage's own;
    the parse floor (Python reading and splitting every line of the bundle) is measured in a process of its own
    just before it (which also leaves the bundle in the page cache for the triage, as the simulator did). The peak memory comes from a second run of the same triage, whose processes' PSS is read
    every ``SAMPLE_S`` seconds (the triage forks children that share most of its pages; their summed RSS would
    count those pages twice); the timed run is not sampled.

    ``repeat``: the floor and the timed triage are measured that many times, alternately (a virtual machine's
    speed drifts from one run to the next); the row gives their medians and keeps every run.
    """
    import json
    import shutil
    import statistics
    import subprocess
    import sys
    import tempfile

    rows: list[ScaleRow] = []
    for n in sizes:
        if workdir is not None:
            workdir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=workdir))
        try:
            d = tmp / "bundle"
            subprocess.run([sys.executable, "-c",
                            "import sys, pathlib; from diagnose.simulate import simulate; "
                            f"simulate(pathlib.Path(sys.argv[1]), hosts={n}, faults=['link.bad_cable'], seed={seed}, "
                            f"job_hosts={n}, host_files='all')", str(d)], check=True, capture_output=True)
            files = [p for p in d.rglob("*") if p.is_file()]
            truth = (d / "truth.yaml").read_text()
            ports = 0
            for p in d.glob("fabric/perfquery_1.txt*"):
                import gzip
                with (gzip.open(p, "rb") if p.suffix == ".gz" else p.open("rb")) as fh:
                    ports = sum(chunk.count(b"\n# Port") for chunk in iter(lambda: fh.read(1 << 24), b""))  # noqa: B023
            floors: list[float] = []
            walls: list[float] = []
            for _ in range(max(1, repeat)):
                floors.append(json.loads(subprocess.run(
                    [sys.executable, "-c", _FLOOR_CHILD, str(d)], check=True, capture_output=True,
                    text=True).stdout.strip().splitlines()[-1])["floor"])
                child = [sys.executable, "-c", _TRIAGE_CHILD, str(d), repr(floors[-1])]
                out = subprocess.run(child, check=True, capture_output=True, text=True)  # timed without the sampler
                m = json.loads(out.stdout.strip().splitlines()[-1])
                walls.append(m["wall"])
            pss, _ = peak_tree_pss(child)  # the same triage again, for its memory
            where = str(m["where"])
            host_dev = where.split(" ")[0]  # e.g. gpu-a003/mlx5_2
            located = bool(host_dev) and all(part in truth for part in host_dev.split("/"))
            rows.append(ScaleRow(n, n * 8, len(files), sum(p.stat().st_size for p in files) / 1048576, ports,
                                 statistics.median(walls), statistics.median(floors), pss or m["rss"], m["rss"],
                                 str(m["top"]), located, walls, floors))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


def scale_table(rows: list[ScaleRow]) -> str:
    lines = [f"{'hosts':>6} {'GPUs':>6} {'files':>6} {'MiB':>5} {'ports':>7} {'triage s':>9} {'floor s':>8} "
             f"{'x floor':>8} {'peak MiB':>9}  top cause (at the injected place?)"]  # peak: PSS of all processes
    for r in rows:
        lines.append(f"{r.hosts:>6} {r.gpus:>6} {r.files:>6} {r.files_mib:>5.0f} {r.ports:>7} {r.wall_s:>9.1f} "
                     f"{r.floor_s:>8.1f} {r.wall_s / max(r.floor_s, 1e-9):>8.1f} {r.peak_mib:>9.0f}  "
                     f"{r.top_cause} ({'yes' if r.located else 'no'})")
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        lines.append(f"growth {a.hosts}->{b.hosts} hosts: x{b.wall_s / max(a.wall_s, 1e-9):.2f} time "
                     f"for x{b.hosts / a.hosts:.0f} hosts")
    for r in rows:
        if len(r.wall_runs) > 1:
            lines.append(f"{r.hosts} hosts, medians of {len(r.wall_runs)} runs: triage "
                         f"{min(r.wall_runs):.1f}-{max(r.wall_runs):.1f} s, floor {min(r.floor_runs):.1f}-"
                         f"{max(r.floor_runs):.1f} s")
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


@dataclass
class HostileRow:
    case: str
    command: str
    code: int  # the exit code (negative: the signal that ended it)
    wall_s: float
    peak_rss_mib: float  # the largest resident set of the command or a child it waited for (wait4's ru_maxrss)
    peak_pss_mib: float  # its processes' summed proportional set size at its highest, sampled (0: no /proc)
    stderr_lines: int
    clean: bool  # no traceback, no internal error

    def within(self, mib: float, seconds: float) -> bool:
        return self.code in (0, 2) and self.clean and max(self.peak_rss_mib, self.peak_pss_mib) < mib and \
            self.wall_s < seconds


HOSTILE_MIB = 1536.0  # the bound the hostile corpus is measured against: 1.5 GB of memory...
HOSTILE_S = 60.0  # ...and 60 s per case


def run_measured(cmd: list[str], timeout: float, cap_mib: float = 0.0) -> tuple[int, float, float, float, str]:
    """Run ``cmd``: its exit code, wall seconds, peak RSS (MiB, from ``wait4``), peak summed PSS of its process
    tree (MiB, sampled every ``SAMPLE_S``) and its stderr. Killed past ``timeout`` or once its processes hold more
    than ``cap_mib`` (0: no cap; so that a case that does not hold its bound cannot take the machine down): the
    code is then -9."""
    import os
    import signal
    import subprocess

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errs:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=errs, stdin=subprocess.DEVNULL, start_new_session=True)
        peak = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = sum(_pss_kib(p) for p in _tree(proc.pid))
            peak = max(peak, now)
            if time.perf_counter() - t > timeout or 0 < cap_mib < now / 1024:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(SAMPLE_S)
        wall = time.perf_counter() - t
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # a child it left behind
        except OSError:
            pass
        errs.seek(0)
        return code, wall, usage.ru_maxrss / 1024, peak / 1024, errs.read().decode("utf-8", "replace")


def bench_hostile(workdir: Path | None = None, full: bool = True, commands: tuple[str, ...] = ("triage", "evidence"),
                  timeout: float = 300.0, cap_mib: float = 4096.0, progress: Callable[[str], None] | None = None
                  ) -> list[HostileRow]:
    """Build the hostile corpus (:mod:`diagnose.bundle.hostile`, full size: bombs that expand to GBs) in a temporary
    folder and run each case with each of ``commands`` in a process of its own, at the default limits: exit code,
    wall time, peak memory (a run is stopped past ``timeout`` seconds or ``cap_mib``, see :func:`run_measured`).
    ``full=False``: the scaled-down corpus (seconds, for a check of the bench itself)."""
    import sys

    from diagnose.bundle import hostile

    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="diagnose-hostile-", dir=workdir))
    rows: list[HostileRow] = []
    try:
        if progress:
            progress("building the corpus")
        cases = hostile.build(tmp / "corpus", hostile.FULL if full else hostile.SMALL)
        for case in cases:
            for command in commands:
                if progress:
                    progress(f"{case.name}: {command}")
                code, wall, rss, pss, err = run_measured(
                    [sys.executable, "-m", "diagnose.interfaces.cli", command, *case.paths, "--format", "json"],
                    timeout, cap_mib)
                rows.append(HostileRow(case.name, command, code, wall, rss, pss, len(err.splitlines()),
                                       "Traceback" not in err and "internal error" not in err))
    finally:
        remove_tree(tmp)
    return rows


def remove_tree(root: Path) -> None:
    """Remove ``root`` and all under it, folders made unreadable and 2,500 levels of nesting included. No path is
    ever longer than a name under ``root`` and no recursion is used (``shutil.rmtree`` recurses past Python's limit
    there, and a full path passes PATH_MAX): each round moves the contents of ``root``'s folders up into ``root`` and
    removes the emptied folders, so a chain N deep goes in N rounds with two folders open at a time."""
    import os
    import stat

    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    moved = 0
    try:
        while True:
            entries = list(os.scandir(top))
            progress = False
            for e in entries:
                try:
                    if not e.is_dir(follow_symlinks=False):
                        os.unlink(e.name, dir_fd=top)
                        progress = True
                        continue
                    os.chmod(e.name, stat.S_IRWXU, dir_fd=top)
                    sub = os.open(e.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
                    try:
                        for c in list(os.scandir(sub)):
                            moved += 1
                            os.rename(c.name, f".removed-{moved}", src_dir_fd=sub, dst_dir_fd=top)
                    finally:
                        os.close(sub)
                    os.rmdir(e.name, dir_fd=top)
                    progress = True
                except OSError:
                    continue
            if not entries or not progress:
                break
    finally:
        os.close(top)
    try:
        os.rmdir(root)
    except OSError:
        pass


def hostile_table(rows: list[HostileRow]) -> str:
    lines = [f"{'case':<24} {'command':<9} {'exit':>4} {'wall s':>7} {'RSS MiB':>8} {'PSS MiB':>8} {'stderr':>6}  "
             f"under {HOSTILE_MIB / 1024:.1f} GB and {HOSTILE_S:.0f} s"]
    for r in rows:
        lines.append(f"{r.case:<24} {r.command:<9} {r.code:>4} {r.wall_s:>7.1f} {r.peak_rss_mib:>8.0f} "
                     f"{r.peak_pss_mib:>8.0f} {r.stderr_lines:>6}  "
                     f"{'yes' if r.within(HOSTILE_MIB, HOSTILE_S) else 'NO' + ('' if r.clean else ' (traceback)')}")
    bad = [r for r in rows if not r.within(HOSTILE_MIB, HOSTILE_S)]
    lines.append(f"{len(rows) - len(bad)} of {len(rows)} runs within bounds; worst: "
                 f"{max(max(r.peak_rss_mib, r.peak_pss_mib) for r in rows):.0f} MiB, "
                 f"{max(r.wall_s for r in rows):.1f} s" if rows else "no runs")
    return "\n".join(lines)
