"""config_diff parser (diff -u, git log -p, git show) against tests/data/config_diff (see its README), the run dating
added to nccl_tests, OpenSM's re-read options, and the change extractor's classification."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.bundle.session import prompt_of
from diagnose.evidence.extractors.changes import area_of
from diagnose.parsers import config_diff, nccl_tests, opensm_log
from diagnose.parsers._dates import name_date, order_key, parse_date
from diagnose.parsers.config_diff import ConfigChange

DATA = Path(__file__).resolve().parents[1] / "data"
HERE = DATA / "config_diff"


def read(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def changes(text: str, host: str | None = None) -> list[ConfigChange]:
    res = config_diff.parse(text, "c.txt", host=host)
    return [r for r in res.records if isinstance(r, ConfigChange)]


def test_git_show_of_opensm_scripts_commit() -> None:
    res = config_diff.parse(read("opensm_git_show_5b6d59d5.txt"), "c.txt", host="sm01")
    assert res.problems == []
    got = [r for r in res.records if isinstance(r, ConfigChange)]
    maxsmps = got[0]
    assert (maxsmps.file, maxsmps.key, maxsmps.old, maxsmps.new, maxsmps.style) == (
        "scripts/opensm.conf", "MAXSMPS", "0", "4", "env")
    assert (maxsmps.line, maxsmps.old_line, maxsmps.text, maxsmps.old_text) == (30, 28, "+MAXSMPS=4", "-MAXSMPS=0")
    assert maxsmps.when == "2008-01-16T16:01:50+02:00"
    assert (maxsmps.commit, maxsmps.author, maxsmps.host) == (
        "5b6d59d5f78615018d2e5d8d8c12242c027b442c", "Yevgeny Kliteynik", "sm01")
    assert maxsmps.subject == "opensm/scripts: fixing MAXSMPS values to the right default"
    # the changed comment lines are not settings; a shell script's `if` line is its own key: removed, then added
    assert [(r.file, r.style, r.old is None) for r in got[1:]] == [
        ("scripts/opensmd", "line", False), ("scripts/opensmd", "line", True),
        ("scripts/redhat-opensm.init", "line", False), ("scripts/redhat-opensm.init", "line", True)]
    assert got[1].old == 'if [[ -z $MAXSMPS || "$MAXSMPS" == "0" ]]; then'
    assert got[2].new == 'if [[ -z $MAXSMPS || "$MAXSMPS" == "4" ]]; then'


def test_git_log_p_two_commits_keep_their_own_dates() -> None:
    got = changes(read("opensm_git_log_p_sysconfig.txt"))
    assert [(r.key, r.old, r.new, r.commit[:8], r.when) for r in got] == [
        ("OPTIONS", "", None, "17d618f1", "2008-05-23T11:40:54+03:00"),
        ("OSM_HOSTS", None, "", "17d618f1", "2008-05-23T11:40:54+03:00"),
        ("OPTIONS", None, "", "6856fff9", "2007-04-03T15:01:19-04:00"),
    ]
    assert got[2].author == "Doug Ledford" and got[2].file == "scripts/opensm.sysconfig"


def test_gnu_unified_example_whole_lines_and_file_time() -> None:
    got = changes(read("gnu_diffutils_example_unified.diff"))
    assert [(r.line, r.old is not None, r.new is not None) for r in got] == [
        (4, True, False), (5, True, False), (7, True, False), (8, False, True), (17, False, True), (18, False, True),
        (19, False, True)]
    assert {r.file for r in got} == {"tzu"} and {r.style for r in got} == {"line"}
    assert {r.when for r in got} == {"2002-02-21T23:30:50-08:00"}  # the +++ (new) file's time stamp


def test_opensm_conf_key_value_and_modulefiles() -> None:
    (re_,) = changes(read("var_opensm_conf_routing_engine.diff"))
    assert (re_.file, re_.key, re_.old, re_.new, re_.style, re_.when) == (
        "/etc/opensm/opensm.conf", "routing_engine", "ar_updn", "minhop", "opensm", "2026-10-06T14:02:11+02:00")
    lua, tcl = changes(read("var_modulefile_nccl_sl_git_show.txt"))
    assert (lua.file, lua.key, lua.old, lua.new, lua.style) == ("modulefiles/nccl/2.21.5.lua", "NCCL_IB_SL", "0", "1",
                                                                  "modulefile")
    assert (tcl.file, tcl.key, tcl.old, tcl.new) == ("modulefiles/nccl/2.21.5", "NCCL_IB_SL", "0", "1")


def test_partitions_and_qos_policy_keys() -> None:
    text = ("--- a/partitions.conf\n+++ b/partitions.conf\n@@ -1,2 +1,2 @@\n Default=0x7fff, ipoib : ALL=full ;\n"
            "-train=0x8001, ipoib, mtu=5 : gpu-b201=full, gpu-b202=full ;\n+train=0x8001, ipoib, mtu=4 : gpu-b201=full ;\n"
            "--- a/qos-policy.conf\n+++ b/qos-policy.conf\n@@ -3 +3 @@\n-    default : 0\n+    default : 1\n")
    part, qos = changes(text)
    assert (part.key, part.style, part.file) == ("train", "partitions", "partitions.conf")
    assert part.new == "0x8001, ipoib, mtu=4 : gpu-b201=full"
    assert (qos.key, qos.old, qos.new, qos.style) == ("default", "0", "1", "qos_policy")


def test_cut_hunk_and_prompt() -> None:
    text = read("var_opensm_conf_routing_engine.diff")
    cut = text[: text.index("+routing_engine") + 8]
    res = config_diff.parse(cut, "c.txt")
    assert any("cut inside a hunk" in p for p in res.problems)
    # the cut last line is not read as a setting: what is left is the removed line
    assert [(r.key, r.old, r.new) for r in res.records] == [("routing_engine", "ar_updn", None)]
    assert prompt_of("[root@sm01 opensm]# git log -p opensm.conf") == ("git", "config_diff")
    assert prompt_of("admin@sm01:/etc/opensm$ diff -u opensm.conf.orig opensm.conf") == ("diff", "config_diff")
    assert prompt_of("admin@sm01:/etc/opensm$ git status") == ("git", None)


def test_comment_only_or_whitespace_changes_are_not_settings() -> None:
    text = "--- a/opensm.conf\n+++ b/opensm.conf\n@@ -1,2 +1,2 @@\n-# old comment\n+# new comment\n-lmc 0\n+lmc  0\n"
    assert changes(text) == []


@pytest.mark.parametrize("sample", sorted(p for p in DATA.glob("*/*") if p.is_file() and p.parent.name != "config_diff"
                                          and p.suffix != ".md"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_zero_on_other_formats(sample: Path) -> None:
    head = sample.read_text(encoding="utf-8", errors="replace")[:65536]
    assert config_diff.sniff(head) == 0


@pytest.mark.parametrize("name", sorted(p.name for p in HERE.iterdir() if p.suffix != ".md"))
def test_sniff_own_samples(name: str) -> None:
    assert config_diff.sniff(read(name)) >= 70


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("+-@ ,01239abc=:\t\n#\\()\"'setnvNCL_ISB/")), max_size=400))
def test_never_raises_on_garbage(text: str) -> None:
    res = config_diff.parse(text, "g.txt")
    for r in res.records:
        assert isinstance(r, ConfigChange) and r.line >= 1 and r.key


@settings(max_examples=60, deadline=None)
@given(key=st.from_regex(r"[a-z]{2,8}_[a-z]{2,8}", fullmatch=True), old=st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
       new=st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), ctx=st.integers(min_value=0, max_value=3))
def test_any_opensm_key_value_change_roundtrips(key: str, old: str, new: str, ctx: int) -> None:
    lines = [f" # context {i}" for i in range(ctx)] + [f"-{key} {old}", f"+{key} {new}"]
    n_old = ctx + 1
    text = f"--- a/opensm.conf\n+++ b/opensm.conf\n@@ -10,{n_old} +10,{n_old} @@\n" + "\n".join(lines) + "\n"
    got = changes(text)
    if old == new:
        assert got == []
    else:
        assert [(r.key, r.old, r.new, r.line, r.old_line) for r in got] == [(key, old, new, 5 + ctx, 4 + ctx)]


def test_dates() -> None:
    assert parse_date("Tue Oct  6 15:00:01 UTC 2026") == "2026-10-06T15:00:01+00:00"
    assert parse_date("Tue Oct 6 14:02:11 2026 +0200") == "2026-10-06T14:02:11+02:00"
    assert parse_date("Tue, 6 Oct 2026 14:02:11 +0200") == "2026-10-06T14:02:11+02:00"
    assert parse_date("Tue 06 Oct 2026 03:00:01 PM UTC") == "2026-10-06T15:00:01+00:00"
    assert parse_date("Wed Oct  7 09:15:44 CEST 2026") == "2026-10-07T09:15:44"  # ambiguous zone: naive
    assert parse_date("no date here") is None
    assert name_date("runs/allreduce_2026-10-01.log") == "2026-10-01T00:00:00"
    assert name_date("rank_12345.log") is None
    a, b = order_key("2026-10-06T14:02:11+02:00"), order_key("2026-10-06T13:00:00+00:00")
    assert a is not None and b is not None and a < b


_RUN = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1"
        " graph: 0\n#       size    count   type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong\n           8        2  float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00"
        "      0\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.0\n")


def test_nccl_tests_runs_dated_by_content_then_file_name() -> None:
    text = "Tue Oct  6 15:00:01 UTC 2026\n" + _RUN + "Start: Wed Oct  7 09:15:44 UTC 2026\n" + _RUN
    runs = [r for r in nccl_tests.parse(text, "x_2026-01-01.log").records if isinstance(r, nccl_tests.NcclTestsRun)]
    assert [r.when for r in runs] == ["2026-10-06T15:00:01+00:00", "2026-10-07T09:15:44+00:00"]
    runs = [r for r in nccl_tests.parse(_RUN, "allreduce_2026-10-01.log").records
            if isinstance(r, nccl_tests.NcclTestsRun)]
    assert [r.when for r in runs] == ["2026-10-01T00:00:00"]
    runs = [r for r in nccl_tests.parse(_RUN, "out.log").records if isinstance(r, nccl_tests.NcclTestsRun)]
    assert [r.when for r in runs] == [None]


def test_opensm_reread_option_is_its_own_category() -> None:
    text = ("Oct  6 14:05:01 sm01 OpenSM[4411]:  Loading Cached Option:routing_engine = minhop\n"
            "Oct  6 14:05:03 sm01 OpenSM[4411]: SUBNET UP\n")
    ev = opensm_log.parse(text, "m").records
    assert [(e.category, e.message) for e in ev] == [
        ("config_option", "Loading Cached Option:routing_engine = minhop"), ("subnet_up", "SUBNET UP")]


@pytest.mark.parametrize(("key", "file", "old", "new", "area"), [
    ("routing_engine", "opensm.conf", "ar_updn", "minhop", "ar"),
    ("ar_mode", "opensm.conf", "auto", "disable", "ar"),
    ("NCCL_IB_ADAPTIVE_ROUTING", "nccl.conf", "1", "0", "ar"),
    ("qos_sl2vl", "opensm.conf", None, "0,1", "qos"),
    ("NCCL_IB_SL", "modulefiles/nccl/2.21.5.lua", "0", "1", "qos"),
    ("default", "qos-policy.conf", "0", "1", "qos"),
    ("train", "partitions.conf", "0x8001, ipoib : a=full", "0x8001, ipoib : b=full", "partitions"),
    ("train", "partitions.conf", "0x8001, mtu=5 : a=full", "0x8001, mtu=4 : a=full", "mtu"),
    ("NCCL_IB_PKEY", "nccl.conf", None, "0x8001", "partitions"),
    ("lmc", "opensm.conf", "0", "2", "routing"),
    ("NCCL_ALGO", "nccl.conf", None, "Ring", "env"),
    ("sweep_interval", "opensm.conf", "10", "15", "other"),
])
def test_area_of(key: str, file: str, old: str | None, new: str | None, area: str) -> None:
    assert area_of(key, file, old, new) == area
