"""Pure decoders for Kafka's on-disk formats: bytes in, numpy columns and values out.

Nothing here imports Spark or Arrow (stdlib, numpy, numba, google-crc32c, cramjam).
Layers, bottom up (imports flow one way):

* ``wire``: constants from Kafka's sources (docs/formats.md);
* ``errors``: DecodeError and QuarantineEntry — bad bytes are data (docs/design.md §4a);
* ``jit``, ``crc``, ``binary``, ``compression``: compiled primitives;
* ``records``: the record frame inside a v2 batch, read by every per-record loop;
* ``record_batch`` (segment walk, batch headers, control records), ``control``,
  ``txn_state`` (``__transaction_state``), ``producer_snapshot``, ``indexes``.

The entry points are ``record_batch.scan_segment``, ``txn_state.scan_transaction_log``,
``producer_snapshot.decode_producer_snapshot`` and the ``indexes.decode_*`` functions.
Submodules are not imported here, so that ``txnlog.kafka.wire`` stays cheap to import.
"""
