"""A live cluster: its admin APIs and guarded abort (admin), raw record batches fetched from it (fetch), and
the live verification rows of the output tables (verify). No Spark here."""
