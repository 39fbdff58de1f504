"""What a run writes: the Delta tables, their history's retention, the output lock and scratch directory."""
