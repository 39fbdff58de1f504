"""Fuzzing the decoders with mutated writer-made inputs: the CI part.

The corpus, mutators and invariants live in :mod:`tests.kafka.fuzzing`; ``benchmarks/fuzz.py``
runs the same with >= 100,000 inputs. Here: a seeded run of a few hundred inputs per input kind
(every mutation kind, round-robin), then hypothesis choosing seeds, mutation kinds and stacked
mutation ops. A failure names its reproducer: ``(seed, input kind, index)`` for the seeded run,
hypothesis's own for the rest.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kafka import fuzzing as F
from tests.kafka.strategies import mutations

#: TXNLOG_FUZZ_INPUTS raises the seeded run's inputs per kind for a long local run.
PER_KIND = int(os.environ.get("TXNLOG_FUZZ_INPUTS", "400"))
FUZZ = settings(
    max_examples=int(os.environ.get("TXNLOG_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[F.Seed]:
    return F.corpus(tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def oracle(seeds: list[F.Seed]) -> F.Oracle:
    return F.Oracle(seeds, crosscheck_every=10)


def test_corpus_has_every_input_kind(seeds: list[F.Seed]) -> None:
    kinds = {s.kind for s in seeds}
    assert kinds == {"segment", "txn_state", "snapshot"}
    names = " ".join(s.name for s in seeds)
    for codec in (1, 2, 3, 4):  # compressed markers and __transaction_state batches are in it
        assert f"+codec{codec}-markers" in names and f"log+codec{codec}" in names
    # legacy entries and compressed data batches come from the writer's sample scenario
    assert any(s.data[a + 16] in (0, 1) for s in seeds if s.kind == "segment" for a, _ in s.spans)
    assert any(s.data[a + 16] == 2 and s.data[a + 22] & 7 for s in seeds if s.kind == "segment" for a, _ in s.spans)


def test_seeded_mutations_keep_every_invariant(seeds: list[F.Seed], oracle: F.Oracle) -> None:
    tally = F.run(seeds, {"segment": PER_KIND, "txn_state": PER_KIND, "snapshot": PER_KIND}, seed=14, oracle=oracle)
    assert tally.exceptions == []
    assert tally.violations == [], "\n".join(tally.violations[:20])
    # not vacuous: every mutation kind ran on every input kind, and damage was found and quarantined
    for kind in F.SEGMENT_KINDS:
        assert tally.inputs[("segment", kind)] and tally.inputs[("txn_state", kind)], kind
    for kind in F.SNAPSHOT_KINDS:
        assert tally.inputs[("snapshot", kind)], kind
    bombs = tally.inputs[("segment", "bomb")] + tally.inputs[("txn_state", "bomb")]
    assert tally.entries["decompressed_too_large"] >= bombs > 0
    assert tally.quarantined[("segment", "bit_flip")] == tally.inputs[("segment", "bit_flip")]
    assert tally.quarantined[("snapshot", "bit_flip")] == tally.inputs[("snapshot", "bit_flip")]
    for reason in ("crc_mismatch", "bad_length", "bad_magic", "truncated_tail", "bad_record", "bad_txn_log_key"):
        assert tally.entries[reason], reason
    assert tally.crosschecked > 0


@FUZZ
@given(data=st.data())
def test_hypothesis_chooses_seed_and_mutation(seeds: list[F.Seed], oracle: F.Oracle, data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(seeds), label="seed")
    donors = [s for s in seeds if s.kind != "snapshot" and s.spans]
    rng = random.Random(data.draw(st.integers(0, 2**32), label="rng"))
    if seed.kind == "snapshot":
        m = F.mutate_snapshot(seed, data.draw(st.sampled_from(F.SNAPSHOT_KINDS)), rng, donors)
    elif seed.spans:
        m = F.mutate_log(seed, data.draw(st.sampled_from(F.SEGMENT_KINDS)), rng, donors)
    else:
        return
    oracle.check(m)


@FUZZ
@given(data=st.data())
def test_hypothesis_stacks_mutation_ops(seeds: list[F.Seed], oracle: F.Oracle, data: st.DataObject) -> None:
    """Up to four flips / overwrites / zeroed, inserted, deleted ranges / truncations at once."""
    seed = data.draw(st.sampled_from([s for s in seeds if s.kind != "snapshot" and s.spans]), label="seed")
    ops = data.draw(mutations(len(seed.data)), label="ops")
    m = F._ops_mutant(seed, "stacked", ops)
    oracle.check(m)


def test_a_reproducer_is_one_seed_and_index(seeds: list[F.Seed]) -> None:
    """The same (seed, kind, index) gives the same bytes: a reported failure can be replayed alone."""
    first = [m.data for _, m in F.mutants(seeds, 30, 99, "segment")]
    again = [m.data for _, m in F.mutants(seeds, 30, 99, "segment")]
    assert first == again
    assert len(set(first)) > 25


def test_memory_check_is_not_vacuous() -> None:
    """The oracle's measure catches an allocation driven by an untrusted length (here: 100 MiB from 12 bytes)."""
    import tracemalloc

    import numpy as np

    def greedy(buf: bytes) -> np.ndarray:
        return np.ones(int.from_bytes(buf[8:12], "big", signed=True), np.uint8)

    tracemalloc.start()
    try:
        _, err, peak = F._traced(greedy, b"\x00" * 8 + (100 << 20).to_bytes(4, "big"))
    finally:
        tracemalloc.stop()
    assert err is None and peak >= 100 << 20 > F._memory_bound(12, decompresses=True)
