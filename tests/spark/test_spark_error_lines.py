"""Spark failures that reach the driver become one line and the Spark exit code (no JVM needed)."""

import pytest

from amqpcap.exitcodes import Exit
from amqpcap.spark import errors, job


def _raised_in(module: str, code: str) -> BaseException:
    """The exception ``code`` raises when run as module ``module``'s code."""
    try:
        exec(compile(code, f"/site-packages/{module.replace('.', '/')}.py", "exec"), {"__name__": module})
    except BaseException as e:
        return e
    raise AssertionError("nothing raised")


def test_a_bare_key_error_from_py4j_protocol_is_a_spark_failure():
    e = _raised_in("py4j.protocol", "OUTPUT_CONVERTER = {}\nOUTPUT_CONVERTER['p']")
    assert type(e) is KeyError
    line, code = errors.explain(e)
    assert code == Exit.SPARK
    assert "KeyError: 'p'" in line and "\n" not in line


def test_a_key_error_of_our_own_code_is_not_a_spark_failure():
    assert errors.explain(_raised_in("amqpcap.analysis.x", "{}['p']")) is None


def test_an_exception_whose_text_fails_is_still_explained():
    class Gone(Exception):
        def __str__(self):
            raise ConnectionError("the JVM is gone")

    Gone.__module__ = "pyspark.errors.exceptions.captured"
    line, code = errors.explain(Gone())
    assert code == Exit.SPARK and "Gone" in line
    assert errors.task_failure(Gone(), 3, "a.pcap") == "a.pcap, task 3: Gone"


class _BrokenContext:
    """A SparkContext whose JVM died: every call fails."""

    def setJobGroup(self, *a, **k):
        pass

    def statusTracker(self):
        raise ConnectionError("py4j: answer from Java side is empty")

    def setLocalProperty(self, *a):
        raise ConnectionError("py4j: answer from Java side is empty")


def test_a_stage_keeps_the_error_of_its_work_when_the_progress_line_fails():
    prog = object.__new__(job.Progress)
    prog.sc, prog.enabled, prog.prefix = _BrokenContext(), True, "amqpcap test: "

    def work():
        raise ValueError("the stage's own failure")

    with pytest.raises(ValueError, match="the stage's own failure"):
        prog.stage("parts", work)
