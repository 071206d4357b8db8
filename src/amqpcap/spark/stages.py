"""What every Spark stage of amqpcap is built from (``job``, ``session.warm``, ``stats_tasks``):
the session's kind and cores, and the schema of a stage's result rows."""

from __future__ import annotations


def is_connect(spark) -> bool:
    """A Spark Connect session (no SparkContext: DataFrame API only)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def parallelism(spark) -> int:
    """The tasks a stage of ``spark`` runs at once (Spark Connect: ``spark.default.parallelism``
    if the server's session says, else 8)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    try:
        return max(1, int(spark.conf.get("spark.default.parallelism", "0"))) or 8
    except (ValueError, TypeError):
        return 8


def result_schema():
    """``id long, result binary`` as a StructType: a DDL string is parsed by the JVM's SQL parser,
    whose first use in a session costs about 0.3 CPU s."""
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    return StructType([StructField("id", LongType()), StructField("result", BinaryType())])


def no_rows(batches):
    """A ``mapInArrow`` function that returns nothing (``session.warm``)."""
    return iter(())
