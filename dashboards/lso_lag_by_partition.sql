-- LSO lag by partition over the complete runs (offline rows; partitions pinned in that run only).
SELECT h.cluster, h.as_of, h.topic, h."partition", h.lso_lag, h.last_stable_offset, h.log_end_offset,
       h.open_transactions, h.has_late_transaction
FROM partition_health h
JOIN runs r ON h.cluster = r.cluster AND h.as_of = r.as_of
WHERE r.status = 'SUCCEEDED' AND coalesce(h.source, '') <> 'live' AND h.lso_lag > 0
ORDER BY h.cluster, h.as_of, h.lso_lag DESC, h.topic, h."partition"
