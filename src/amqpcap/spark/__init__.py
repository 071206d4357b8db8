"""amqpcap on Spark: the dissect job (``run``) and the stats report (``stats``).

    from amqpcap.spark import run, session
    spark = session.build("local[*]")          # or your own SparkSession
    summary = run(spark, ["captures/"], "out/")

Needs the ``spark`` extra (``pip install 'amqpcap[spark]'``) and Java 17+.
How work is split: docs/design.md, "Spark".  Imports are lazy so that the
command line can register ``amqpcap spark`` without loading pyarrow or pyspark.
"""

__all__ = ["run", "stats", "SparkSummary", "DEFAULT_SPLIT_SIZE"]


def __getattr__(name):
    if name in ("run", "SparkSummary", "DEFAULT_SPLIT_SIZE"):
        from amqpcap.spark import job

        return getattr(job, name)
    if name == "stats":
        from amqpcap.spark.stats_tasks import stats

        return stats
    raise AttributeError(name)
