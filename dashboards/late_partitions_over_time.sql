-- Partitions with a late transaction (the broker's metric) per complete run; 0 for a run with none.
SELECT r.cluster, r.as_of, count(h.topic) AS late_partitions
FROM runs r
LEFT JOIN (
    SELECT cluster, as_of, topic, "partition"
    FROM partition_health
    WHERE has_late_transaction AND coalesce(source, '') <> 'live'
) h ON h.cluster = r.cluster AND h.as_of = r.as_of
WHERE r.status = 'SUCCEEDED'
GROUP BY r.cluster, r.as_of
ORDER BY r.cluster, r.as_of
