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
