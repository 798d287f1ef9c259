"""Random bundle trees (files of random bytes, text and mutated snippets of every known format, folders, symlinks
inside, outside and in loops, FIFOs, gzip and archives with odd members, permission bits) never make the loader or
triage fail: the result is a diagnosis (exit 0) or a one-line BundleError (exit 2), and it renders.

Deterministic (``derandomize``, no example database). ``HOSTILE_EXAMPLES`` sets how many examples run (default
40; run it with 1000 now and then)."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.bundle import BundleError, LoadLimits
from diagnose.catalog.loader import load_catalog
from diagnose.pipeline import triage
from diagnose.render import render_json, render_markdown, render_text

DATA = Path(__file__).resolve().parents[1] / "data"
# the head of one sample per format: what the parsers see, to be cut, flipped and filled with absurd numbers
SNIPPETS = sorted(p.read_bytes()[:3000] for d in sorted(DATA.iterdir()) if d.is_dir()
                  for p in sorted(f for f in d.iterdir() if f.is_file())[:1])
LIMITS = LoadLimits(max_file_bytes=1 << 20, stream_bytes=256 << 10, chunk_bytes=64 << 10, head_bytes=16 << 10,
                    max_archive_bytes=4 << 20, ratio_floor_bytes=256 << 10, max_total_bytes=8 << 20,
                    max_file_seconds=30)
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "40"))

names = st.text(st.sampled_from("ab-_. 0é日\n\t\r\x1b"), min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")) | st.sampled_from(["x\udcff", "manifest.json", "expect.yaml", "ibstat.txt",
                                                        "nccl.log", "a.tar.gz", "b.zip", "c.gz"])
member_names = names.filter(lambda s: s.isprintable() or "\udcff" not in s)  # (a zip cannot hold a lone surrogate)
absurd = st.sampled_from([b"inf", b"-inf", b"nan", b"1e309", b"99999999999999999999999", b"-1", b"0x", b"",
                          b"18446744073709551616", b"9" * 5000])


@st.composite
def contents(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["snippet", "snippet", "snippet", "bytes", "text"]))
    if kind == "bytes":
        return draw(st.binary(max_size=2048))
    if kind == "text":
        return draw(st.text(max_size=600)).encode("utf-8", "surrogatepass")
    data = bytearray(draw(st.sampled_from(SNIPPETS)))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["cut", "flip", "nul", "number", "repeat"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "cut":
            del data[at:]
        elif op == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif op == "nul":
            data[at:at] = b"\0" * draw(st.integers(1, 40))
        elif op == "number":  # the next number becomes an absurd one
            j = next((k for k in range(at, len(data)) if 48 <= data[k] <= 57), None)
            if j is not None:
                end = j
                while end < len(data) and 48 <= data[end] <= 57:
                    end += 1
                data[j:end] = draw(absurd)
        else:
            data = data * draw(st.integers(2, 40))
    return bytes(data)


def _gz(data: bytes, how: str) -> bytes:
    g = gzip.compress(data)
    if how == "truncated":
        return g[: max(10, len(g) // 2)]
    if how == "flipped":
        b = bytearray(g)
        b[len(b) // 2] ^= 0x5A
        return bytes(b)
    return g


@st.composite
def archives(draw: st.DrawFn) -> tuple[str, bytes]:
    members = draw(st.lists(st.tuples(member_names | st.sampled_from(["../up.log", "/abs.log", "d/e.log", "d/"]),
                                      contents()), max_size=4))
    if draw(st.booleans()):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in members:
                zf.writestr(name, data)
        return "zip", buf.getvalue()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            kind = draw(st.sampled_from([tarfile.REGTYPE] * 4 + [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE,
                                                                  tarfile.CHRTYPE, tarfile.DIRTYPE]))
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                info.linkname = draw(st.sampled_from(["/etc/passwd", "../x", "a", ""]))
                tf.addfile(info)
    return "tar.gz", buf.getvalue()


entry = st.one_of(
    st.tuples(st.just("file"), contents()),
    st.tuples(st.just("gzip"), st.tuples(contents(), st.sampled_from(["whole", "truncated", "flipped"]))),
    st.tuples(st.just("archive"), archives()),
    st.tuples(st.just("link"), st.sampled_from(["inside", "outside", "self", "loop", "up", "dangling", "folder"])),
    st.tuples(st.just("fifo"), st.none()),
)
trees = st.recursive(st.lists(st.tuples(names, entry), max_size=5),
                     lambda sub: st.lists(st.tuples(names, st.tuples(st.just("folder"), sub) | entry), max_size=4),
                     max_leaves=12)
modes = st.lists(st.sampled_from([0o000, 0o200, 0o500, 0o644, 0o755]), max_size=4)


def _write(folder: Path, tree: list, made: list[Path]) -> None:  # type: ignore[type-arg]
    for name, (kind, arg) in tree:
        p = folder / name
        if os.path.lexists(p):
            continue
        made.append(p)
        if kind == "folder":
            p.mkdir()
            _write(p, arg, made)
        elif kind == "file":
            p.write_bytes(arg)
        elif kind == "gzip":
            p.write_bytes(_gz(*arg))
        elif kind == "archive":
            made[-1] = p = folder / f"{name}.{arg[0]}"
            if not os.path.lexists(p):
                p.write_bytes(arg[1])
        elif kind == "fifo":
            os.mkfifo(p)
        else:
            target = {"inside": made[0] if len(made) > 1 else name, "outside": "/etc/hostname", "self": name,
                      "loop": f"{name}.2", "up": "..", "dangling": "no-such-file", "folder": "."}[arg]
            p.symlink_to(target)
            if arg == "loop" and not os.path.lexists(folder / f"{name}.2"):
                (folder / f"{name}.2").symlink_to(name)


def _rmtree(path: Path) -> None:
    def unlock(fn, p, _exc):  # type: ignore[no-untyped-def]
        os.chmod(os.path.dirname(p), stat.S_IRWXU)
        fn(p)

    for dirpath, dirs, _ in os.walk(path):
        for d in dirs:
            full = os.path.join(dirpath, d)
            if not os.path.islink(full):
                os.chmod(full, stat.S_IRWXU)
    shutil.rmtree(path, onerror=unlock)


CATALOG = None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(tree=trees, chmods=modes, as_files=st.booleans())
def test_a_random_bundle_tree_never_makes_an_internal_error(tree: list, chmods: list[int],  # type: ignore[type-arg]
                                                            as_files: bool) -> None:
    global CATALOG
    CATALOG = CATALOG or load_catalog()
    top = Path(tempfile.mkdtemp(prefix="diagnose-hostile-"))
    try:
        root = top / "bundle"
        root.mkdir()
        made: list[Path] = []
        _write(root, tree, made)
        for p, mode in zip(made, chmods, strict=False):
            if not p.is_symlink():
                p.chmod(mode)
        # the bundle as a folder, or its top entries given one by one (as `diagnose triage a b c` would)
        paths = sorted(str(p) for p in root.iterdir()) if as_files and any(root.iterdir()) else [str(root)]
        try:
            d = triage(paths, catalog=CATALOG, limits=LIMITS)
        except BundleError as exc:  # exit 2: one line
            assert "\n" not in str(exc) and 0 < len(str(exc)) < 2000
            return
        for out in (render_json(d), render_markdown(d), render_text(d, width=100, color=False, verbose=True)):
            out.encode("utf-8")  # what the CLI writes to stdout: never a name it cannot encode
        for f in d.files:
            assert f.problem is None or "\n" not in f.problem, f
            assert "\n" not in f.path and f.path.isprintable(), f.path
    finally:
        _rmtree(top)
