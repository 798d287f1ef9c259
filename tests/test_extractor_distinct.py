"""The per-distinct-value helpers of the extractors give exactly what the pandas string methods give.

Extractors test big columns (messages, settings, interface names) once per distinct value and broadcast the
answer back; these tests hold that to ``Series.str.contains`` / ``Series.str.extract`` on the messages of
fixture bundles that hit the patterns, and on a hand-made frame with missing values.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diagnose.bundle import LoadLimits, load_inputs
from diagnose.evidence.context import Context
from diagnose.evidence.extractors import host, host_pcie, nccl, stack
from diagnose.evidence.frames import build_frames
from diagnose.stages import parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# (pattern, flags) as the extractors ask for them
PATTERNS: list[tuple[str | re.Pattern[str], int]] = [
    (nccl._QP_FAIL, 0), (nccl._SOCK_FAIL, 0), (r"no socket interface found|Bootstrap : no socket", re.I),
    (host._SHM_ERR, re.I), (host._MEMLOCK_ERR, re.I), (r"fail|error|Cannot|unable", re.I),
    (host_pcie._IOMMU_FAULT, 0), (host_pcie._OPEN_FAIL, 0), (host_pcie._ASYNC_FATAL, 0),
    (stack._DRIVER_TOO_OLD, 0), ("Mismatched NCCL version detected", 0), ("Message truncated : received", 0),
]
EXTRACTS = [nccl.COMPLETION, stack._MISMATCH, stack._TRUNCATED]
# bundles whose messages hit most of the patterns above
BUNDLES = [
    "fabric/pkey_mismatch", "gpu/xid_error", "host/container_rdma_access", "host/memlock_limit",
    "host/nic_driver_firmware", "host/pcie_acs_iommu", "host/shm_too_small", "nccl/interface_selection",
    "nccl/version_mismatch",
]


def _contexts() -> list[Context]:
    out = []
    limits = LoadLimits()
    for name in BUNDLES:
        ev = parse.Evidence()
        for bf in load_inputs([FIXTURES / name], limits):
            parse.parse_file(bf, ev, limits)
        out.append(Context(frames=build_frames(ev.records), formats=set(ev.formats)))
    return out


def _hand_made() -> Context:
    """Messages with repeats and a missing one (a PgError without text)."""
    rows = {
        "source": ["a.log"] * 5, "line": [1, 2, 3, 4, 5], "text": ["t"] * 5, "host": ["h1", None, "h1", "h2", "h2"],
        "message": ["NET/IB : Got completion from peer 10.0.0.2<1> with status=12 opcode=0 hca mlx5_3",
                    None, "ibv_reg_mr failed: Cannot allocate memory", "ibv_reg_mr failed: Cannot allocate memory",
                    "NET/IB : Got completion from peer 10.0.0.2<1> with status=12 opcode=0 hca mlx5_3"],
    }
    return Context(frames={"PgError": pd.DataFrame(rows)}, formats=set())


@pytest.fixture(scope="module")
def contexts() -> list[Context]:
    return [*_contexts(), _hand_made()]


def test_message_mask_is_str_contains(contexts: list[Context]) -> None:
    hits = 0
    for ctx in contexts:
        text = ctx.messages["message"]
        for pattern, flags in PATTERNS:
            want = text.str.contains(pattern, flags=flags, na=False).to_numpy(bool)
            got = nccl.message_mask(ctx, pattern, flags)
            assert np.array_equal(got, want), pattern
            assert nccl.message_mask(ctx, pattern, flags) is got  # once per run
            hits += int(want.sum())
    assert hits


def test_message_extract_is_str_extract(contexts: list[Context]) -> None:
    hits = 0
    for ctx in contexts:
        for rx in EXTRACTS:
            want = ctx.messages["message"].str.extract(rx)
            got = nccl.message_extract(ctx, rx)
            pd.testing.assert_frame_equal(got, want)
            hits += int(want.notna().any(axis=1).sum())
    assert hits  # the fixtures do hold completion errors / mismatch lines


def test_distinct_helpers_on_missing_values() -> None:
    s = pd.Series(["docker0", None, "bond0", "docker0", np.nan, "lo"], dtype=object)
    got = nccl.distinct_mask(s, lambda v: nccl._VIRTUAL_IF.match(str(v)) is not None)
    assert got.tolist() == [True, False, False, True, False, True]
    s = pd.Series(["2.21.5+cuda12.4", None, "2.18.1", "2.21.5+cuda12.4"], dtype="str")
    pd.testing.assert_frame_equal(nccl.distinct_extract(s, stack._VER), s.str.extract(stack._VER))
