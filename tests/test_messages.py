"""The message catalog (rules/_messages) and the scan of every line against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.catalog.messages import MessageEntry, default_messages, load_messages
from diagnose.evidence import scan as scan_mod
from diagnose.evidence.scan import Scanner
from diagnose.pipeline import gather, triage

CATALOG = default_messages()


def test_the_shipped_catalog_loads_clean_with_unique_ids_and_a_source_each() -> None:
    cat = load_messages()
    assert cat.errors == []
    ids = [e.id for e in cat.entries]
    assert len(ids) == len(set(ids)) and len(ids) >= 30
    assert all(len(e.source) >= 8 and e.examples for e in cat.entries)


@pytest.mark.parametrize("entry", CATALOG.entries, ids=[e.id for e in CATALOG.entries])
def test_every_example_line_is_a_hit_of_its_own_entry_through_the_scanner(entry: MessageEntry) -> None:
    sc = Scanner(CATALOG)
    context = f"{entry.within[0]}\n" if entry.within else ""  # a guarded entry's context, on a line of its own
    for ex in entry.examples:
        hits = sc.scan(context + ex + "\n", "x.log")
        assert entry.id in {h.msg_id for h in hits}, ex
        assert {h.kind for h in hits if h.msg_id == entry.id} == {entry.finding}
    for ex in entry.not_examples:
        assert entry.id not in {h.msg_id for h in sc.scan(context + ex, "x.log")}, ex


def test_a_bad_entry_is_reported_and_the_others_still_load(tmp_path: Path) -> None:
    d = tmp_path / "rules" / "_messages"
    d.mkdir(parents=True)
    (d / "a.yaml").write_text(
        "messages:\n"
        "  - {id: t.ok, literal: [boom], pattern: 'boom (?P<n>\\d+)', finding: x_y, says: it went boom,"
        " source: a source file, examples: ['boom 3']}\n"
        "  - {id: t.bad, literal: [bang], pattern: 'bang', finding: x_y, says: it went bang,"
        " source: a source file, examples: ['no such line']}\n")
    (d / "b.yaml").write_text("messages: [\n")
    cat = load_messages(tmp_path)
    assert [e.id for e in cat.entries] == ["t.ok"]
    assert any("t.bad" in e and "example holds none" in e for e in cat.errors)
    assert any(e.startswith("rules/_messages/b.yaml") for e in cat.errors)


def _scanner(tmp_path: Path) -> Scanner:
    d = tmp_path / "rules" / "_messages"
    d.mkdir(parents=True, exist_ok=True)
    (d / "a.yaml").write_text(
        "messages:\n"
        "  - {id: t.warn, literal: [NCCL WARN], pattern: 'NCCL WARN (?P<what>\\w+)', finding: w_w, says: a warning here,"
        " source: a source file, examples: ['NCCL WARN x']}\n"
        "  - {id: t.size, literal: [--shm-size], pattern: '--shm-size[= ](?P<size>\\d+)(?P<unit>[kmg])', finding: s_s,"
        " says: a size given here, source: a source file, examples: ['docker run --shm-size=64m']}\n")
    return Scanner(load_messages(tmp_path))


def test_glued_lines_give_one_hit_per_message_with_the_file_line(tmp_path: Path) -> None:
    sc = _scanner(tmp_path)
    text = "a\nb\n[0] NCCL WARN first [1] NCCL WARN second\nc\nNCCL WARN third\n"
    hits = sc.scan(text, "f.log", first_line=10)
    assert [(h.line, json.loads(h.attrs)["what"]) for h in hits] == [(12, "first"), (12, "second"), (14, "third")]


def test_without_the_automaton_the_hits_are_the_same(tmp_path: Path) -> None:
    sc = _scanner(tmp_path)
    text = "x NCCL WARN a\nzz\ndocker run --shm-size=64m img\n"
    fast = sc.scan(text, "f")
    sc._auto = None  # the pure-Python sweep
    assert sc.scan(text, "f") == fast and len(fast) == 2


def test_a_prefixless_nccl_fragment_is_read_and_diagnosed(tmp_path: Path) -> None:
    (tmp_path / "paste.txt").write_text(
        "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n")
    ev = gather([tmp_path], None)
    assert [f.format for f in ev.files] != ["unknown"]
    assert "shm_error" in {f.kind for f in ev.findings}
    d = triage([tmp_path], "4-GPU job in a container fails at NCCL init")
    assert d.causes[0].id == "host.shm_too_small"
    assert d.causes[0].evidence[0].file.endswith("paste.txt") and d.causes[0].evidence[0].line == 1


def test_a_stated_setting_anywhere_becomes_the_jobs_setting_once(tmp_path: Path) -> None:
    (tmp_path / "quote.txt").write_text("as the log said:\nNCCL_P2P_LEVEL set by environment to LOC\n")
    (tmp_path / "nccl.log").write_text("h1:1:1 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n")
    ev = gather([tmp_path], None, keep_records=True)
    env = [(r.source, r.line, r.name, r.value) for r in ev.records if type(r).__name__ == "EnvSetting"]
    assert sorted(env) == [("nccl.log", 1, "NCCL_P2P_LEVEL", "LOC"), ("quote.txt", 2, "NCCL_P2P_LEVEL", "LOC")]


def test_the_symptom_text_is_scanned_too() -> None:
    d = triage([], "all ranks fail with CUDA error: system not yet initialized on the 8-GPU node")
    assert "cuda_system_not_ready" in {e.finding for c in d.causes for e in c.evidence}
    assert d.causes[0].id == "gpu.fabric_manager"


def test_a_failing_scanner_costs_no_parsed_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ibstat.txt").write_text("CA 'mlx5_0'\n\tCA type: MT4123\n\tPort 1:\n\t\tState: Down\n"
                                         "\t\tPhysical state: Polling\n\t\tRate: 10\n\t\tLink layer: InfiniBand\n")

    class Boom:
        def scan(self, *a: object, **k: object) -> list[object]:
            raise RuntimeError("boom")

    monkeypatch.setattr(scan_mod, "scanner", lambda: Boom())
    ev = gather([tmp_path], None)
    assert "port_not_active" in {f.kind for f in ev.findings}


def test_a_guarded_entry_counts_only_in_its_context() -> None:
    sc = Scanner(CATALOG)
    other = "● openibd.service - openibd\n     Active: inactive (dead)\n"
    fm = "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n     Active: inactive (dead)\n"
    assert "fm_not_running" not in {h.kind for h in sc.scan(other, "s.txt")}
    assert "fm_not_running" in {h.kind for h in sc.scan(fm, "s.txt")}
