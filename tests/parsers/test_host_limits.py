"""df and ulimit parsers against the real samples in tests/data/{df,ulimit} (see each folder's README)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.models.records import ParseResult
from diagnose.parsers import df, ulimit
from diagnose.parsers._ib import ToolError
from diagnose.parsers.df import Filesystem
from diagnose.parsers.ulimit import Limit

DATA = Path(__file__).resolve().parents[1] / "data"
GiB, MiB, KiB = 1024**3, 1024**2, 1024


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_text(encoding="utf-8")


def rows(res: ParseResult) -> list[Filesystem]:
    return [r for r in res.records if isinstance(r, Filesystem)]


def limits(res: ParseResult) -> dict[str, Limit]:
    return {r.name: r for r in res.records if isinstance(r, Limit)}


def sample_files(fmt: str) -> list[Path]:
    return sorted(p for p in (DATA / fmt).iterdir() if p.is_file() and p.suffix != ".md")


def test_schemas_are_exact() -> None:
    assert [f.name for f in dataclasses.fields(Filesystem)][4:] == [
        "filesystem",
        "size_bytes",
        "used_bytes",
        "avail_bytes",
        "use_pct",
        "mount",
    ]
    assert [f.name for f in dataclasses.fields(Limit)][4:] == ["name", "flag", "unit", "value", "unlimited"]


# ----------------------------------------------------------------------------------------------- df


def test_df_h_on_h100_node() -> None:
    res = df.parse(read("df", "slurmv4_3-13.sh_lines428-445_df-h_h100.txt"), "df.txt", host="ignored")
    assert res.format == "df" and res.problems == []
    assert len(rows(res)) == 16
    shm = next(r for r in rows(res) if r.mount == "/dev/shm")
    assert shm == Filesystem(
        source="df.txt",
        line=4,
        text="tmpfs                         1008G  253M 1008G   1% /dev/shm",
        host="tpgds-aihub0008",
        filesystem="tmpfs",
        size_bytes=1008 * GiB,
        used_bytes=253 * MiB,
        avail_bytes=1008 * GiB,
        use_pct=1,
        mount="/dev/shm",
    )
    app = next(r for r in rows(res) if r.mount == "/app")
    assert (app.filesystem, app.size_bytes, app.use_pct) == ("/dev/md0", 28 * 1024**4, 10)
    efi = next(r for r in rows(res) if r.mount == "/sys/firmware/efi/efivars")
    assert (efi.size_bytes, efi.used_bytes, efi.avail_bytes, efi.use_pct) == (
        512 * KiB,
        209 * KiB,
        299 * KiB,
        42,
    )


def test_df_h_fractional_sizes() -> None:
    res = df.parse(read("df", "alenegrini_sebc_1_preinstall_md_lines86-93_df-h.txt"), "s")
    assert res.problems == [] and len(rows(res)) == 6
    shm = next(r for r in rows(res) if r.mount == "/dev/shm")
    assert (shm.host, shm.size_bytes, shm.used_bytes, shm.use_pct, shm.line) == (
        "amsterdam",
        round(6.3 * GiB),
        0,
        0,
        5,
    )


def test_df_al_1k_blocks_pseudo_filesystems() -> None:
    res = df.parse(read("df", "insights-core_test_df_py_lines279-299_df-al.txt"), "s")
    assert res.problems == [] and len(rows(res)) == 20
    by_mount = {r.mount: r for r in rows(res)}
    shm = by_mount["/dev/shm"]
    assert (shm.size_bytes, shm.used_bytes, shm.avail_bytes, shm.use_pct, shm.line) == (
        984112 * 1024,
        0,
        984112 * 1024,
        0,
        6,
    )
    sysfs = by_mount["/sys"]
    assert (sysfs.size_bytes, sysfs.use_pct) == (0, None)
    binfmt = by_mount["/proc/sys/fs/binfmt_misc"]
    assert (binfmt.filesystem, binfmt.size_bytes, binfmt.used_bytes, binfmt.avail_bytes, binfmt.use_pct) == (
        "systemd-1",
        None,
        None,
        None,
        None,
    )
    assert by_mount["/V M T o o l s"].filesystem == "/dev/sdb1"  # a mount point with spaces
    assert by_mount["/"].used_bytes == 2127172 * 1024


def test_df_alP_with_error_lines() -> None:
    res = df.parse(read("df", "insights-core_test_df_py_lines84-96_df-alP_with_errors.txt"), "s")
    assert res.problems == []
    errs = [r for r in res.records if isinstance(r, ToolError)]
    assert [(e.line, e.tool, e.message) for e in errs] == [
        (1, "df", "/bin/df: '/vobs/GEMS': No such file or directory"),
        (2, "df", "/bin/df: '/vobs/NT/TFax': No such file or directory"),
    ]
    assert len(rows(res)) == 9
    shm = next(r for r in rows(res) if r.mount == "/dev/shm")
    assert (shm.size_bytes, shm.used_bytes, shm.use_pct) == (5998736 * 1024, 491660 * 1024, 9)
    assert rows(res)[-1].mount == "/sys/fs/cgroup"  # after the blank line


def test_df_wrapped_long_names_match_the_unwrapped_capture() -> None:
    wrapped = df.parse(read("df", "var_wrapped_long_names_old_coreutils.txt"), "s")
    plain = df.parse(read("df", "slurmv4_3-13.sh_lines428-445_df-h_h100.txt"), "s")
    assert wrapped.problems == []
    key = [(r.filesystem, r.size_bytes, r.used_bytes, r.avail_bytes, r.use_pct, r.mount) for r in rows(plain)]
    assert key == [
        (r.filesystem, r.size_bytes, r.used_bytes, r.avail_bytes, r.use_pct, r.mount) for r in rows(wrapped)
    ]
    root = next(r for r in rows(wrapped) if r.mount == "/")
    assert (root.line, root.host) == (7, "gpu-node-07")
    assert root.text == "/dev/mapper/rootvg-lvroot 102G  803M  102G   1% /"


def test_df_dev_shm_single_row_and_truncation() -> None:
    res = df.parse(read("df", "var_df_dev_shm_1k_blocks.txt"), "s")
    assert [(r.filesystem, r.mount, r.size_bytes, r.line) for r in rows(res)] == [
        ("tmpfs", "/dev/shm", 984112 * 1024, 3)
    ]
    trunc = df.parse(read("df", "var_truncated_row.txt"), "s")
    assert len(rows(trunc)) == 5
    assert trunc.problems == ["truncated: row for /dev/mapper/rootvg-lvusr ends early (line 8)"]


def test_df_type_column_crlf_and_inodes() -> None:
    text = read("df", "slurmv4_3-13.sh_lines428-445_df-h_h100.txt")
    typed = (
        "Filesystem                     Type   Size  Used Avail Use% Mounted on\n"
        "tmpfs                          tmpfs 1008G  253M 1008G   1% /dev/shm\n"
    )
    res = df.parse(typed, "s")
    assert res.problems == []
    (shm,) = rows(res)
    assert (shm.filesystem, shm.size_bytes, shm.mount) == ("tmpfs", 1008 * GiB, "/dev/shm")  # Type skipped
    crlf = df.parse(text.replace("\n", "\r\n"), "s")
    assert [(r.line, r.mount, r.size_bytes) for r in rows(crlf)] == [
        (r.line, r.mount, r.size_bytes) for r in rows(df.parse(text, "s"))
    ]
    inodes = "Filesystem      Inodes  IUsed   IFree IUse% Mounted on\n/dev/nvme0n1p2 8786256 866379 7919877   10% /\n"
    assert df.sniff(inodes) == 0 and df.parse(inodes, "s").records == []


def test_df_block_size_headers() -> None:
    assert (
        df.parse("Filesystem 512-blocks Used Available Capacity Mounted on\n/dev/a 10 4 6 40% /\n", "s")
        .records[0]
        .size_bytes
        == 5120
    )
    assert (
        df.parse(
            "Filesystem     2MB-blocks  Used Available Use% Mounted on\n/dev/vda3 62031 49197 9680 84% /\n",
            "s",
        )
        .records[0]
        .size_bytes
        == 62031 * 2_000_000
    )
    assert (
        df.parse("Filesystem Size Used Avail Use% Mounted on\ntmpfs 4.1k 0 4.1k 0% /x\n", "s")
        .records[0]
        .size_bytes
        == 4100
    )


# ----------------------------------------------------------------------------------------------- ulimit


def test_ulimit_memlock_64() -> None:
    res = ulimit.parse(
        read("ulimit", "alenegrini_sebc_1_preinstall_md_lines53-69_ulimit-a_memlock64.txt"), "u.txt"
    )
    assert res.format == "ulimit" and res.problems == []
    lim = limits(res)
    assert len(lim) == 16
    assert lim["max locked memory"] == Limit(
        source="u.txt",
        line=7,
        text="max locked memory       (kbytes, -l) 64",
        host="amsterdam",
        name="max locked memory",
        flag="-l",
        unit="kbytes",
        value=64,
        unlimited=False,
    )
    assert (lim["open files"].flag, lim["open files"].unit, lim["open files"].value) == ("-n", None, 1024)
    assert (lim["pipe size"].unit, lim["pipe size"].value) == ("512 bytes", 8)
    assert (lim["max user processes"].value, lim["virtual memory"].unlimited) == (4096, True)


def test_ulimit_unlimited_memlock() -> None:
    res = ulimit.parse(
        read("ulimit", "ompi-www_users_2015_02_26307_ulimit-a_unlimited.txt"), "s", host="node-b"
    )
    assert res.problems == []
    ml = limits(res)["max locked memory"]
    assert (ml.value, ml.unlimited, ml.line, ml.host) == (None, True, 7, "node-b")
    assert limits(res)["stack size"].value == 10240
    assert limits(res)["pending signals"].value == 386359


def test_ulimit_single_space_padding_parses_the_same() -> None:
    a = ulimit.parse(read("ulimit", "ompi-www_users_2015_02_26307_ulimit-a_unlimited.txt"), "s")
    b = ulimit.parse(read("ulimit", "var_single_space_padding.txt"), "s")
    assert b.problems == []
    key = [(r.line, r.name, r.flag, r.unit, r.value, r.unlimited) for r in a.records]
    assert key == [(r.line, r.name, r.flag, r.unit, r.value, r.unlimited) for r in b.records]


def test_ulimit_truncated_and_crlf() -> None:
    res = ulimit.parse(read("ulimit", "var_truncated_memlock_line.txt"), "s")
    assert len(res.records) == 5 and "max locked memory" not in limits(res)
    assert res.problems == ["truncated: line 7 ends early: 'max locked memory       (kbytes'"]
    text = read("ulimit", "alenegrini_sebc_1_preinstall_md_lines53-69_ulimit-a_memlock64.txt")
    crlf = ulimit.parse(text.replace("\n", "\r\n"), "s")
    assert limits(crlf)["max locked memory"].value == 64 and crlf.problems == []


def test_ulimit_bare_number_is_not_claimed() -> None:
    assert ulimit.sniff("64\n") == 0 and ulimit.sniff("unlimited\n") == 0
    assert ulimit.parse("$ ulimit -l\n64\n", "s").records == []


# ----------------------------------------------------------------------------------------------- sniffing


@pytest.mark.parametrize("mod", (df, ulimit), ids=lambda m: m.FORMAT)
def test_sniff_claims_own_samples(mod) -> None:
    for path in sample_files(mod.FORMAT):
        assert mod.sniff(path.read_text(encoding="utf-8")) >= 40, path.name


@pytest.mark.parametrize("mod", (df, ulimit), ids=lambda m: m.FORMAT)
def test_sniff_rejects_every_other_sample_folder(mod) -> None:
    for folder in (d for d in sorted(DATA.iterdir()) if d.is_dir() and d.name != mod.FORMAT):
        for path in sample_files(folder.name):
            head = path.read_text(encoding="utf-8", errors="replace")[:65536]
            assert mod.sniff(head) < 40, f"{mod.FORMAT} claims {folder.name}/{path.name}"


_SAMPLE_LINES = sorted(
    {
        line
        for fmt in ("df", "ulimit")
        for p in sample_files(fmt)
        for line in p.read_text(encoding="utf-8").split("\n")
    }
)
_mixed_text = st.lists(st.one_of(st.sampled_from(_SAMPLE_LINES), st.text(max_size=40)), max_size=40).map(
    "\n".join
)


@pytest.mark.parametrize("mod", (df, ulimit), ids=lambda m: m.FORMAT)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), _mixed_text))
def test_parse_never_raises_and_sniff_is_bounded(mod, text: str) -> None:
    score = mod.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100
    res = mod.parse(text, "f.txt", host="h")
    assert isinstance(res, ParseResult) and res.format == mod.FORMAT
    assert not any(p.startswith("parser error") for p in res.problems), res.problems
    nlines = text.count("\n") + 1
    assert all(r.source == "f.txt" and 1 <= r.line <= nlines for r in res.records)
