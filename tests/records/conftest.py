"""Every test here runs twice: with the pure-Python row builders (rows.py, the reference) and
with the compiled ones (fastrows, amqp/accel.py), whichever is the process default.

Without a built (and current) compiled row builder the "compiled" runs are skipped, and fail
when AMQPCAP_REQUIRE_TOOLS is set: CI builds it (scripts/test.sh), and a CI run that silently
tested the reference twice would prove nothing about the compiled code.
"""

import pytest
from fixtures.compiled import built_or_skip

from amqpcap.records import rows


@pytest.fixture(params=["reference", "compiled"], autouse=True)
def row_builder(request):
    """Which method / message row builders the test runs with."""
    before = rows.compiled_in_use()
    if request.param == "compiled":
        built_or_skip("fastrows")
    rows.use_compiled(request.param == "compiled")
    yield request.param
    rows.use_compiled(before)
