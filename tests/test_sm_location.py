"""Two MASTER subnet managers: the finding names the one that should step down (IBTA arbitration: higher
priority wins, then lower GUID) and, when its LID is in the bundle, the host and HCA port it runs on."""

from __future__ import annotations

from pathlib import Path

import yaml

from diagnose.pipeline import gather, triage
from diagnose.simulate import simulate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/fabric/sm_problem/positive-stray-opensm-second-master"


def test_the_lower_priority_master_is_named_even_when_its_host_is_not_in_the_bundle() -> None:
    [f] = [x for x in gather([FIXTURE]).findings if x.kind == "sm_multiple_masters"]
    # sminfo.txt: 0x1070... priority 14 (the designated SM) and 0xa088...e41 priority 0 at lid 9 (gpu-s409, whose
    # files are not in the bundle: no host can be named, the LID and GUID still can)
    assert f.attrs["stray_guid"] == "0xa088c20300d77e41" and f.attrs["stray_lid"] == 9
    assert f.location.host is None


def test_the_stray_master_is_located_on_its_host_and_port(tmp_path: Path) -> None:
    simulate(tmp_path, hosts=64, faults=["fabric.sm_problem"], seed=3, job_hosts=16, host_files="all")
    truth = yaml.safe_load((tmp_path / "truth.yaml").read_text())
    [stray_host] = [f["location"]["host"] for f in truth["faults"] if f["cause"] == "fabric.sm_problem"]
    top = triage([tmp_path]).causes[0]
    assert top.id == "fabric.sm_problem"
    assert (top.location.host, top.location.device) == (stray_host, "mlx5_0")  # the simulator's stray runs there


CONFIG_REPO = Path(__file__).resolve().parents[1] / "fixtures/fabric/adaptive_routing_off/positive-config-commit-between-good-and-bad-run"


def _config_repo_at_top(tmp_path: Path) -> Path:
    """The fixture with the opensm config repository's `git log -p` moved out of the SM's folder."""
    import shutil

    shutil.copytree(CONFIG_REPO, tmp_path / "b", ignore=shutil.ignore_patterns("sm01"))
    shutil.copy(CONFIG_REPO / "sm01" / "opensm-etc.git-log-p.txt", tmp_path / "b" / "opensm-etc.git-log-p.txt")
    return tmp_path / "b"


def test_a_config_change_kept_outside_any_host_folder_is_placed_at_the_sm_node(tmp_path: Path) -> None:
    root = _config_repo_at_top(tmp_path)
    changed = [f for f in gather([root]).findings if f.kind == "fabric_config_changed"]
    assert changed and all(f.location.is_empty() for f in changed)  # nothing names the SM node yet
    # the hosts' ports report SM lid 1; sminfo names its GUID and ibhosts the host of that GUID
    (root / "sminfo.txt").write_text("sminfo: sm lid 1 sm guid 0x0002c903000e5a11, activity count 88012 priority 15 "
                                     "state 3 SMINFO_MASTER\n")
    (root / "ibhosts.txt").write_text('Ca\t: 0x0002c903000e5a11 ports 1 "sm01 mlx5_0"\n')
    changed = [f for f in gather([root]).findings if f.kind == "fabric_config_changed"]
    assert {(f.location.host, f.location.device) for f in changed} == {("sm01", "mlx5_0")}
    top = triage([root]).causes[0]
    assert (top.id, top.location.host) == ("fabric.adaptive_routing_off", "sm01")
