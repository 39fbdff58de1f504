-- The integrity audit over time: per complete run, the anomalies (ERROR and WARNING rows of the integrity table) by
-- check, the records they affect and the partitions a check could not run on (NOT_CHECKED rows). Any anomaly > 0
-- means a read_committed consumer read aborted data or missed committed data, or a transaction's partitions
-- disagree: alert on it ('txnlog audit --as-of <as_of> -v' lists the rows).
WITH done AS (
    SELECT cluster, as_of FROM runs WHERE status = 'SUCCEEDED'
),
rows_of_run AS (
    SELECT d.cluster, d.as_of, i."check", i.severity, i.records_affected
    FROM done d
    LEFT JOIN integrity i ON i.cluster = d.cluster AND i.as_of = d.as_of
)
SELECT cluster, as_of,
       sum(CASE WHEN severity IN ('ERROR', 'WARNING') THEN 1 ELSE 0 END) AS anomalies,
       sum(CASE WHEN severity = 'ERROR' THEN 1 ELSE 0 END) AS errors,
       sum(CASE WHEN severity IN ('ERROR', 'WARNING') THEN coalesce(records_affected, 0) ELSE 0 END) AS records_affected,
       sum(CASE WHEN severity = 'NOT_CHECKED' THEN 1 ELSE 0 END) AS partitions_not_checked,
       sum(CASE WHEN "check" = 'ABORTED_DATA_VISIBLE' AND severity <> 'NOT_CHECKED' THEN 1 ELSE 0 END) AS aborted_data_visible,
       sum(CASE WHEN "check" = 'COMMITTED_DATA_HIDDEN' AND severity <> 'NOT_CHECKED' THEN 1 ELSE 0 END) AS committed_data_hidden,
       sum(CASE WHEN "check" = 'SPLIT_OUTCOME' AND severity <> 'NOT_CHECKED' THEN 1 ELSE 0 END) AS split_outcome,
       sum(CASE WHEN "check" = 'MARKER_MISSING' AND severity <> 'NOT_CHECKED' THEN 1 ELSE 0 END) AS marker_missing,
       sum(CASE WHEN "check" = 'EPOCH_REGRESSION' AND severity <> 'NOT_CHECKED' THEN 1 ELSE 0 END) AS epoch_regression,
       sum(CASE WHEN "check" = 'SEQUENCE_GAP' AND severity <> 'NOT_CHECKED' THEN 1 ELSE 0 END) AS sequence_gap
FROM rows_of_run
GROUP BY cluster, as_of
ORDER BY cluster, as_of
