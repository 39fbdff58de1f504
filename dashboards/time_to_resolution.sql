-- Time to resolution of every finding over the complete runs (README, "A finding across runs"): a finding's
-- identity is (cluster, topic, partition, producer_id, start_offset), or (cluster, transactional_id,
-- producer_id, producer_epoch) when it has no topic (coordinator-only); it is resolved at the first complete
-- run after the last run that shows it (NULL while the newest run still shows it).
WITH done AS (
    SELECT cluster, as_of FROM runs WHERE status = 'SUCCEEDED'
),
seen AS (
    SELECT f.cluster, f.as_of, f.verdict, f.reason,
           CASE WHEN f.topic IS NULL
                THEN f.transactional_id || '/pid ' || CAST(f.producer_id AS VARCHAR)
                     || '/epoch ' || CAST(f.producer_epoch AS VARCHAR)
                ELSE f.topic || '-' || CAST(f."partition" AS VARCHAR) || '/pid ' || CAST(f.producer_id AS VARCHAR)
                     || '/offset ' || CAST(f.start_offset AS VARCHAR)
           END AS finding
    FROM findings f
    JOIN done d ON f.cluster = d.cluster AND f.as_of = d.as_of
),
spans AS (
    SELECT cluster, finding, min(as_of) AS first_seen, max(as_of) AS last_seen, count(*) AS runs_seen
    FROM seen
    GROUP BY cluster, finding
),
later AS (
    SELECT s.cluster, s.finding, min(d.as_of) AS resolved_at
    FROM spans s
    JOIN done d ON s.cluster = d.cluster
    WHERE d.as_of > s.last_seen
    GROUP BY s.cluster, s.finding
)
SELECT s.cluster, s.finding, s.first_seen, s.last_seen, l.resolved_at, s.runs_seen,
       EXTRACT(EPOCH FROM l.resolved_at) - EXTRACT(EPOCH FROM s.first_seen) AS seconds_to_resolution
FROM spans s
LEFT JOIN later l ON s.cluster = l.cluster AND s.finding = l.finding
ORDER BY s.cluster, s.first_seen, s.finding
