"""The packed BPE pair table (tokjit.kernels.lookup.pair_slot): every rule found with its rank and
merged id, the first rule of a repeated pair winning, absent pairs absent, and ids past the packing's
21 bits refused with a typed error instead of being truncated into another pair."""

from __future__ import annotations

import numpy as np
import pytest

from tokjit.compile import PairTable
from tokjit.errors import UnsupportedComponentError
from tokjit.kernels.lookup import PAIR_FIELD_MASK, may_merge, pair_key, pair_value


@pytest.mark.parametrize("ranks_follow_ids", [False, True])
def test_rules_found_and_absent_pairs_absent(ranks_follow_ids):
    rng = np.random.default_rng(5)
    n = 50_000
    ids = rng.integers(0, PAIR_FIELD_MASK, size=(n, 3))
    ids[:100, :2] = ids[100:200, :2]  # repeated pairs: the first (lowest-rank) rule wins
    ranks = np.arange(n)
    if ranks_follow_ids:  # tiktoken's rules: merged ids rise with the ranks, so they stand for them
        ids[:, 2] = np.sort(rng.choice(PAIR_FIELD_MASK, size=n, replace=False))
        ranks = ranks * 3 + 7
    table = PairTable.build(ids[:, 0], ids[:, 1], ranks, ids[:, 2])
    assert (table.rows.shape[0] == 0) == ranks_follow_ids
    expected = {}
    for (left, right, merged), rank in zip(ids.tolist(), ranks.tolist()):
        expected.setdefault((left, right), (rank << 32) | merged)
    for (left, right), value in expected.items():
        found = pair_value(left, right, table.arrays)
        if ranks_follow_ids:  # the merged id stands for the rank: same order, same merged id
            assert found & 0xFFFFFFFF == value & 0xFFFFFFFF and found >> 32 == found & 0xFFFFFFFF
        else:
            assert found == value
    absent = 0
    for left, right in rng.integers(0, PAIR_FIELD_MASK, size=(20_000, 2)).tolist():
        if (left, right) not in expected:
            absent += 1
            assert pair_value(left, right, table.arrays) == -1
    assert absent > 19_000
    assert (table.slots >= 0).sum() == len(expected) <= 0.8 * table.slots.shape[0]
    # the merge bits let every rule through (they only rule pairs out) and stop most other pairs
    assert all(may_merge(pair_key(left, right), table.merge_bits) for left, right in expected)
    passed = sum(may_merge(pair_key(left, right), table.merge_bits)
                 for left, right in rng.integers(0, PAIR_FIELD_MASK, size=(20_000, 2)).tolist())
    assert passed < 20_000 * 0.2


@pytest.mark.parametrize("column", [0, 1, 2])
def test_ids_past_the_packing_refused(column):
    ids = np.zeros((2, 3), np.int64)  # left, right, merged (a merged id can be the rank's stand-in)
    ids[:, 2] = [3, 4]
    ids[1, column] = PAIR_FIELD_MASK
    with pytest.raises(UnsupportedComponentError, match="21 bits"):
        PairTable.build(ids[:, 0], ids[:, 1], [0, 1], ids[:, 2])
