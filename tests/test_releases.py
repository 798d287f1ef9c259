"""The known-bad release table (rules/_releases) and what the known_releases extractor makes of the versions a
bundle and its report state."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.catalog.releases import KnownRelease, load_releases
from diagnose.pipeline import gather, triage

SLOW_OK_LOG = ("gpu-a1:201:201 [0] NCCL INFO NCCL version 2.18.6+cuda12.2\n")


def _entry(**kw: object) -> KnownRelease:
    base: dict[str, object] = {"id": "nccl.test_defect", "component": "nccl", "from": "2.19.0", "before": "2.20.0",
                               "fails_as": ["collective_timeout"], "says": "a defect that hangs collectives",
                               "source": "https://example.org/release-notes"}
    base.update(kw)
    return KnownRelease.model_validate(base)


def test_the_shipped_table_loads_clean_and_every_entry_cites_a_source() -> None:
    table = load_releases()
    assert table.errors == []
    assert table.entries, "no known-bad releases shipped"
    for e in table.entries:
        assert e.source.startswith("https://"), e.id


@pytest.mark.parametrize(("version", "covered"), [
    ("2.19.0", True), ("2.19.3", True), ("2.19.3+cuda12.2", True), ("2.19.3-1", True), ("2.19.x", True),
    ("2.19", True), ("2.18.6", False), ("2.20.0", False), ("2.20.3", False), ("garbage", False)])
def test_a_range_covers_its_releases_and_a_series_only_when_whole(version: str, covered: bool) -> None:
    assert _entry().covers(version) is covered


def test_a_series_stated_without_patch_is_not_covered_by_a_range_inside_it() -> None:
    one = _entry(**{"from": "2.18.1", "before": "2.18.3"})
    assert one.covers("2.18.1") and one.covers("2.18.2")
    assert not one.covers("2.18") and not one.covers("2.18.x") and not one.covers("2.18.3")


def test_a_bad_entry_is_reported_and_the_others_still_load(tmp_path: Path) -> None:
    d = tmp_path / "rules" / "_releases"
    d.mkdir(parents=True)
    (d / "x.yaml").write_text(
        "releases:\n"
        "  - {id: nccl.good, component: nccl, from: '2.8.3', before: '2.8.4', fails_as: [collective_timeout],"
        " says: 'hangs in alltoall forever', source: 'https://example.org/a'}\n"
        "  - {id: nccl.empty, component: nccl, from: '2.9.0', before: '2.9.0', fails_as: [collective_timeout],"
        " says: 'an empty range of releases', source: 'https://example.org/b'}\n"
        "  - {id: nccl.kind, component: nccl, from: '2.9.0', before: '2.10.0', fails_as: [slowish],"
        " says: 'an unknown symptom kind', source: 'https://example.org/c'}\n")
    table = load_releases(tmp_path)
    assert [e.id for e in table.entries] == ["nccl.good"]
    assert any("nccl.empty" in e and "empty range" in e for e in table.errors), table.errors
    assert any("nccl.kind" in e and "slowish" in e for e in table.errors), table.errors


def _known(tmp_path: Path, symptom: str) -> list[dict[str, object]]:
    ev = gather([tmp_path], symptom)
    return [f.attrs for f in ev.findings if f.kind == "known_bad_release"]


def test_a_hang_on_a_release_known_to_hang_is_a_matching_known_bad_release(tmp_path: Path) -> None:
    (tmp_path / "report.txt").write_text("I have tested alltoall_perf with nccl version 2.19.1 2.19.3 and it hangs.\n")
    (tmp_path / "cmd.txt").write_text("mpirun -np 16 -x NCCL_DEBUG=INFO -x NCCL_CUMEM_ENABLE=1 ./alltoall_perf -g 1\n")
    hits = _known(tmp_path, "alltoall across 16 nodes hangs at communicator init")
    assert [(h["release"], h["fails_match"], h["version"]) for h in hits] == [
        ("nccl.2_19_cumem_connect_deadlock", True, "2.19.1")]
    d = triage([tmp_path], "alltoall across 16 nodes hangs at communicator init")
    assert d.causes[0].id == "nccl.version_mismatch"
    assert any(e.file == "report.txt" and e.line == 1 for e in d.causes[0].evidence)


def test_the_setting_that_avoids_the_defect_clears_it(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text("gpu-a1:201:201 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\n"
                                       "gpu-a1:201:201 [0] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0.\n")
    assert _known(tmp_path, "alltoall hangs at init on 16 nodes") == []


def test_a_release_outside_every_range_is_no_finding(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text(SLOW_OK_LOG)
    assert _known(tmp_path, "alltoall hangs at init on 16 nodes") == []


def test_a_failure_the_defect_does_not_show_as_is_weighed_apart(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text("gpu-a1:201:201 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\n")
    hits = _known(tmp_path, "all_reduce busbw is 40 GB/s on 2 nodes")
    assert [(h["release"], h["fails_match"]) for h in hits] == [("nccl.2_19_cumem_connect_deadlock", False)]


def test_nccl_tests_versions_are_not_nccl_versions(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("# nccl-tests 2.19.1 built from source\nran nccl_tests 2.19.3 as well\n")
    assert _known(tmp_path, "alltoall hangs at init on 16 nodes") == []


def test_an_open_range_covers_every_later_release() -> None:
    e = _entry(**{"from": "2.20.0", "before": None})
    assert e.covers("2.20.3") and e.covers("2.30.1") and e.covers("3.0")
    assert not e.covers("2.19.3")


def _exposing(tmp_path: Path, symptom: str) -> list[dict[str, object]]:
    ev = gather([tmp_path], symptom)
    return [f.attrs for f in ev.findings if f.kind == "release_exposes_fault"]


MTU_EVENT = ("srv-2:94639:94647 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : "
             "local access violation work queue error\n")


def test_a_release_that_exposes_a_misconfiguration_points_at_that_cause_when_its_messages_show(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text("srv-2:94639:94639 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + MTU_EVENT)
    hits = _exposing(tmp_path, "nccl-tests between two RoCE servers hang")
    assert [(h["cause"], h["fails_match"]) for h in hits] == [("mtu.mismatch", True)]
    # it is not a known-bad release: the fix is the configuration, not the version
    assert _known(tmp_path, "nccl-tests between two RoCE servers hang") == []
    d = triage([tmp_path], "nccl-tests between two RoCE servers hang")
    assert d.causes[0].id == "mtu.mismatch"


def test_the_same_release_without_the_defects_messages_is_no_match(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text("srv-2:94639:94639 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    hits = _exposing(tmp_path, "nccl-tests between two RoCE servers hang")
    assert [(h["cause"], h["fails_match"]) for h in hits] == [("mtu.mismatch", False)]
    d = triage([tmp_path], "nccl-tests between two RoCE servers hang")
    assert all(c.id != "mtu.mismatch" for c in d.causes[:1])


def test_lint_rejects_an_entry_that_exposes_no_known_cause(tmp_path: Path) -> None:
    from diagnose.catalog.lint import lint

    root = Path(__file__).resolve().parents[1]
    import shutil

    shutil.copytree(root / "rules", tmp_path / "rules")
    with (tmp_path / "rules" / "_releases" / "nccl.yaml").open("a") as fh:
        fh.write("  - {id: nccl.ghost, component: nccl, from: '2.9.0', fails_as: [collective_timeout],"
                 " exposes: mtu.ghost, says: 'exposes a cause nobody defined', source: 'https://example.org/g'}\n")
    problems = [str(p) for p in lint(tmp_path)]
    assert any("nccl.ghost" in p and "mtu.ghost" in p for p in problems), problems


def _compared(tmp_path: Path, symptom: str) -> list[dict[str, object]]:
    return [f.attrs for f in gather([], symptom).findings if f.kind == "release_compared"]


def test_two_releases_with_two_outcomes_point_at_the_release(tmp_path: Path) -> None:
    sym = ("sendrecv_perf 512M on 8 nodes drops from 24.2 GB/s with NCCL 2.19.4 to 18.3 GB/s with NCCL 2.20.5;"
           " up to 4 nodes the two versions perform the same.")
    assert [(h["component"], h["versions"]) for h in _compared(tmp_path, sym)] == [("nccl", 2)]
    assert triage([], sym).causes[0].id == "nccl.version_mismatch"
    assert _compared(tmp_path, "works with torch 1.13 but hangs at init with PyTorch 2.0.1") == [
        {"component": "torch", "versions": 2}]


def test_releases_that_fail_alike_or_one_release_are_no_comparison(tmp_path: Path) -> None:
    assert _compared(tmp_path, "tried NCCL 2.18.3 and 2.19.3: both versions hang at init") == []
    assert _compared(tmp_path, "all_reduce hangs with NCCL 2.19.3 on 16 nodes") == []
    assert _compared(tmp_path, "hangs with NCCL 2.19.3, and 2.19.3+cuda12.2 is what the image ships") == []
