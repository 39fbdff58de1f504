"""The rules txnlog applies, each in one function over Arrow tables or NumPy arrays (no Spark here):
every engine that needs a rule, this process or Spark's tasks, calls the same function."""
