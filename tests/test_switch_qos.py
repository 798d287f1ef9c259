"""A RoCE switch's lossless queues against its PFC counters (extractors/switch_qos.py)."""

from __future__ import annotations

from pathlib import Path

from diagnose.pipeline import gather

DATA = Path(__file__).parent / "data" / "sonic_qos"
QHEAD = ("     Port    TxQ    Counter/pkts    Counter/bytes    Drop/pkts    Drop/bytes\n"
         "---------  -----  --------------  ---------------  -----------  ------------\n")
PHEAD = ("    Port {d}    PFC0    PFC1    PFC2    PFC3    PFC4    PFC5    PFC6    PFC7\n"
         "-----------  ------  ------  ------  ------  ------  ------  ------  ------\n")


def _found(tmp_path: Path, files: dict[str, str]) -> dict[str, object]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return {f.kind: f for f in gather([tmp_path]).findings}


def _pfc(prio3: int) -> str:
    row = f"  Ethernet4       0       0       0 {prio3:7d}       0       0       0       0\n"
    return PHEAD.format(d="Rx") + row + "\n" + PHEAD.format(d="Tx") + row


def test_real_triage_lossless_drops_with_no_pause_frame_is_pfc_not_enabled(tmp_path: Path) -> None:
    f = _found(tmp_path, {"sw/qos.txt": (DATA / "lolyu_aoi_buffer_triage_lossless_drops.txt").read_text()})
    d = f["switch_lossless_queue_drops"]
    assert (d.attrs["drops"], d.attrs["pfc_frames"], d.attrs["pfc_seen"], d.attrs["prio"]) == (91786, 0, False, 3)
    assert d.location.device == "Ethernet4" and "PFC is not enabled" in d.summary
    assert "SONiC's default" in d.summary  # nothing in the bundle says which priority is lossless


def test_pause_frames_counted_mean_pfc_fired_too_late(tmp_path: Path) -> None:
    q = "admin@leaf07:~$ show queue counters\n" + QHEAD + "Ethernet4    UC3            8193           852072          120         12480\n"
    f = _found(tmp_path, {"leaf07/qos.txt": q + "admin@leaf07:~$ show pfc counters\n" + _pfc(5000)})
    d = f["switch_lossless_queue_drops"]
    assert d.attrs["pfc_seen"] is True and d.attrs["port_pfc_frames"] == 10000
    assert d.location.device == "leaf07 Ethernet4"


def test_the_jobs_traffic_class_decides_which_queue_is_lossless(tmp_path: Path) -> None:
    q = QHEAD + "Ethernet4    UC4            8193           852072          900         93600\n"
    env = "export NCCL_IB_TC=106\n"  # DSCP 26 -> priority 3: queue 4's drops are not the job's lossless class
    f = _found(tmp_path, {"qos.txt": q + _pfc(0), "job.sh": env})
    assert "switch_lossless_queue_drops" not in f
    # without a traffic class, SONiC's default lossless priorities (3, 4) count queue 4
    g = _found(tmp_path / "b", {"qos.txt": q + _pfc(0)})
    assert g["switch_lossless_queue_drops"].attrs["prio"] == 4


def test_lossy_drops_only_leave_the_lossless_queues_clean(tmp_path: Path) -> None:
    q = QHEAD + ("Ethernet4    UC0            8193           852072         5000        520000\n"
                 "Ethernet4    UC3        99999999       9999999999            0             0\n")
    f = _found(tmp_path, {"qos.txt": q + _pfc(100)})
    assert "switch_lossless_queue_drops" not in f
    assert f["switch_lossless_queues_clean"].attrs["ports"] == 1
