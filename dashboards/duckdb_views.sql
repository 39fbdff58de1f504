-- duckdb: the Delta tables under the job's --output (here ./out) as the views the dashboard queries read.
-- INSTALL delta; LOAD delta;   (offline: LOAD '<site-packages>/duckdb_extension_delta/extensions/v<duckdb version>/delta.duckdb_extension')
CREATE OR REPLACE VIEW runs AS SELECT * FROM delta_scan('./out/runs');
CREATE OR REPLACE VIEW findings AS SELECT * FROM delta_scan('./out/findings');
CREATE OR REPLACE VIEW partition_health AS SELECT * FROM delta_scan('./out/partition_health');
CREATE OR REPLACE VIEW integrity AS SELECT * FROM delta_scan('./out/integrity');
