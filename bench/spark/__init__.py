"""Spark writing tasks: batch inserts (``python -m bench.spark.insert``) and a stream
(``python -m bench.spark.stream``)."""
