-- Current HANGING and LATE findings: those of each cluster's newest complete run.
WITH newest AS (
    SELECT cluster, max(as_of) AS as_of FROM runs WHERE status = 'SUCCEEDED' GROUP BY cluster
)
SELECT f.cluster, f.as_of, f.verdict, f.reason, f.topic, f."partition", f.producer_id, f.producer_epoch,
       f.start_offset, f.transactional_id, f.idle_ms, f.lso_lag
FROM findings f
JOIN newest n ON f.cluster = n.cluster AND f.as_of = n.as_of
ORDER BY f.cluster, f.verdict, f.reason, f.topic, f."partition", f.start_offset
