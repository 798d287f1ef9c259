from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import fabric_manager as fm

DATA = Path(__file__).resolve().parent.parent / "data"


def test_errors_and_startup_sample() -> None:
    text = (DATA / "fabric_manager_log" / "gpud_fabric-manager.0.lines185-340_errors_and_startup.log").read_text()
    assert fm.sniff(text) >= 90
    res = fm.parse(text, "fm.log", host="hgx-01")
    cats = Counter(r.category for r in res.records)
    assert cats["nvswitch_error"] >= 10 and cats["started"] >= 1
    first = next(r for r in res.records if r.category == "nvswitch_error")
    assert first.level == "ERROR" and first.timestamp == "Dec 19 2024 19:17:49" and first.host == "hgx-01"
    assert "12028" in first.message


def test_version_mismatch_and_journal() -> None:
    log = ("[Mar 04 2025 08:58:02] [INFO] [tid 4187] Fabric Manager version 550.90.07 is running with the following configuration options\n"
           "[Mar 04 2025 08:58:02] [ERROR] [tid 4187] fabric manager NVIDIA GPU driver interface version 550.90.07 don't match"
           " with driver version 550.127.05. Please update with matching NVIDIA driver package.\n")
    res = fm.parse(log, "fabricmanager.log")
    assert [r.category for r in res.records] == ["started", "version_mismatch"]
    journal = ("Mar 04 08:58:01 hgx-h100-031 systemd[1]: Starting NVIDIA fabric manager service...\n"
               "Mar 04 08:58:02 hgx-h100-031 systemd[1]: nvidia-fabricmanager.service: Failed with result 'exit-code'.\n")
    assert fm.sniff(journal) >= 55
    res = fm.parse(journal, "journal.txt")
    assert res.records[-1].category == "service_failed" and res.records[-1].host == "hgx-h100-031"


def test_does_not_claim_other_formats() -> None:
    for d in DATA.iterdir():
        if d.is_dir() and d.name != "fabric_manager_log":
            for f in d.iterdir():
                if f.is_file() and f.name != "README.md":
                    assert fm.sniff(f.read_text(errors="replace")[:65536]) < 40, f


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises(text: str) -> None:
    fm.parse(text, "x")
    assert 0 <= fm.sniff(text) <= 100
