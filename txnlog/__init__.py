"""txnlog: find late and hanging Kafka transactions in broker logs with Spark."""

__version__ = "0.1.0"
