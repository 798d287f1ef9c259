"""Same bundle, same bytes: at scale (well over 10k facts' worth of evidence) and across runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.bundle import LoadLimits, load_inputs
from diagnose.pipeline import ParallelExecutor, gather, triage
from diagnose.render import render_json
from diagnose.runtime.plan import offloadable

HOSTS = 448
HCAS = 8

_COUNTERS = (
    "PortXmitData:....................{xd}\nPortRcvData:.....................{rd}\n"
    "SymbolErrorCounter:..............{sym}\nLinkErrorRecoveryCounter:........{ler}\n"
    "LinkDownedCounter:...............0\nPortRcvErrors:...................{rcv}\n"
    "PortXmitDiscards:................{disc}\nLocalLinkIntegrityErrors:........0\n"
    "ExcessiveBufferOverrunErrors:....0\nPortXmitWait:....................{wait}\n"
)


def _bundle(root: Path) -> Path:
    """HOSTS hosts x HCAS ports, two perfquery snapshots each, errors on many ports, one cable rising fast."""
    for h in range(HOSTS):
        host = f"gpu-c{h:03d}"
        d = root / host
        d.mkdir(parents=True)
        ib = []
        pq = []
        for snap in range(2):
            pq.append(f"Sun Nov 29 10:{10 + snap * 5}:00 UTC 2026\n")
            for i in range(HCAS):
                lid = 100 + h * HCAS + i
                bad = h == 77 and i == 3
                # background counts sit at or above the history floor (links.HISTORY_FLOOR), so that each stays a
                # fact of its own instead of being folded into the history summary: the engine sees >10k facts
                sym = (15 + i) + (4000 * snap if bad else 0)
                pq.append(f"# Port extended counters: Lid {lid} port 1 (CapMask: 0x5A00 CapMask2: 0x0000000)\n")
                pq.append(_COUNTERS.format(xd=10**9 * (snap + 1), rd=10**9 * (snap + 1), sym=sym,
                                           ler=(1 + snap * 30) if bad else 10 + i % 2, rcv=10 + i % 3, disc=10 + i % 4,
                                           wait=1000 * (snap + 1)))
        for i in range(HCAS):
            ib.append(
                f"CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
                f"\tHardware version: 0\n\tNode GUID: 0x946dae0300{h:03x}{i:03x}\n\tSystem image GUID: 0x946dae0300{h:03x}{i:03x}\n"
                f"\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: {100 + h * HCAS + i}\n"
                f"\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0xa751e848\n\t\tPort GUID: 0x946dae0300{h:03x}{i:03x}\n"
                "\t\tLink layer: InfiniBand\n"
            )
        (d / "ibstat.txt").write_text("".join(ib))
        (d / "perfquery.txt").write_text("".join(pq))
    return root


@pytest.mark.slow
def test_large_bundle_is_byte_identical_and_localised(tmp_path: Path, catalog) -> None:
    b = _bundle(tmp_path / "bundle")
    ev = gather([b])
    assert len(ev.findings) > 10_000  # every erroring port counter over the floor becomes a fact in durable-rules
    first = render_json(triage([b], "AllReduce slow on 448 nodes", catalog=catalog))
    second = render_json(triage([b], "AllReduce slow on 448 nodes", catalog=catalog, executor=ParallelExecutor()))
    assert first == second
    d = triage([b], "AllReduce slow on 448 nodes", catalog=catalog)
    top = d.causes[0]
    assert top.id == "link.bad_cable" and top.verdict == "confirmed"
    assert (top.location.host, top.location.device, top.location.port) == ("gpu-c077", "mlx5_3", 1)


def test_bulk_dumps_parsed_on_the_second_core_give_the_same_diagnosis() -> None:
    """Large counter dumps go to a second process; the diagnosis must not depend on where they were parsed."""
    bundle = Path(__file__).resolve().parents[1] / "fixtures/link/bad_cable/positive-fattree64-hca-end"
    limits = LoadLimits(stream_bytes=1024, chunk_bytes=4096)  # treat the fixture's dumps as large files
    picked = offloadable(files := load_inputs([bundle], limits), limits, 1)
    assert sorted(files[i].path.split("/")[-1] for i in picked) == [  # both perfquery snapshots and the topology
        "ibnetdiscover.topo", "perfquery_1.txt.gz", "perfquery_2.txt.gz"]
    a = triage([bundle], limits=limits, executor=ParallelExecutor(min_bytes=1, fork=True)).model_dump_json()
    b = triage([bundle], limits=limits).model_dump_json()
    assert a == b
    assert '"link.bad_cable"' in a


def test_second_core_results_pass_through_files_that_are_removed_afterwards(tmp_path: Path, monkeypatch) -> None:
    """The second process leaves each dump's parse in a temporary file (not the pool's pipe); none may remain."""
    import tempfile

    bundle = Path(__file__).resolve().parents[1] / "fixtures/link/bad_cable/positive-fattree64-hca-end"
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    limits = LoadLimits(stream_bytes=1024, chunk_bytes=4096)
    ev = gather([bundle], limits=limits, executor=ParallelExecutor(min_bytes=1, fork=True))
    assert ev.second_core_peak_mib > 0  # the dumps really were parsed in the second process
    assert list(spill_root.iterdir()) == []
    assert any(f.kind == "port_counter_errors" for f in ev.findings)


def test_a_part_left_in_the_spill_folder_reads_back_as_the_same_evidence(tmp_path: Path) -> None:
    """How the forked child hands a file's Evidence back: pickled into the spill folder, read once, then gone."""
    from diagnose.runtime.spill import leave, take_back
    from diagnose.stages.parse import parse_here

    bundle = Path(__file__).resolve().parents[1] / "fixtures/link/bad_cable/positive-fattree64-hca-end"
    lim = LoadLimits()
    [bf] = [f for f in load_inputs([bundle], lim) if f.path.endswith("perfquery_1.txt.gz")]
    direct = parse_here(bf, lim)
    path = leave(direct, str(tmp_path))
    assert Path(path).parent == tmp_path
    back = take_back(path)
    assert not Path(path).exists()  # read once, then gone
    assert [fe.model_dump() for fe in back.files] == [fe.model_dump() for fe in direct.files]
    assert len(back.records) == len(direct.records) and back.formats == direct.formats and back.records
