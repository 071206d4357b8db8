"""amqpcap on Spark: the dissect job (``run``) and the stats report (``stats``).

    from amqpcap.spark import run, session
    spark = session.build("local[*]")          # or your own SparkSession
    summary = run(spark, ["captures/"], "out/")

Needs the ``spark`` extra (``pip install 'amqpcap[spark]'``) and Java 17+.
How work is split: docs/design.md, "Spark".
"""
from amqpcap.spark.job import DEFAULT_SPLIT_SIZE, SparkSummary, run

__all__ = ["run", "SparkSummary", "DEFAULT_SPLIT_SIZE"]
