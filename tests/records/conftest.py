"""Every test here runs twice: with the pure-Python row builders (rows.py, the reference) and
with the compiled ones (fastrows, compiled.py), whichever is the process default.

Without a built (and current) compiled row builder the "compiled" runs are skipped, and fail
when AMQPCAP_REQUIRE_TOOLS is set: CI builds it (scripts/test.sh), and a CI run that silently
tested the reference twice would prove nothing about the compiled code.
"""

from fixtures.compiled import both_ways

from amqpcap.records import rows

row_builder = both_ways(rows, "fastrows", "row_builder")  # which row builders the test runs with
