from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st
from tests.kafka.strategies import apply_mutations, mutations, segments
from tests.kafka.test_properties import header_rows
from txnlog.kafka.record_batch import scan_segment

@settings(max_examples=20000, deadline=None, suppress_health_check=list(HealthCheck))
@given(segments(max_batches=12), st.data())
def test_strong(specs, data):
    raw = b""; spans = []
    for spec in specs:
        e = spec.encode(); spans.append((len(raw), len(raw)+len(e))); raw += e
    clean = header_rows(scan_segment(raw))
    ops = data.draw(mutations(len(raw)))
    mutated, moved, _ = apply_mutations(raw, spans, ops)
    got = header_rows(scan_segment(mutated))
    for (old, _), new in zip(spans, moved):
        if new is not None:
            assert new[0] in got, (ops,)
            assert got[new[0]] == clean[old]
