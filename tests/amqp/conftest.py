"""Every test here runs twice: with the pure-Python frame walker (the reference) and with the
compiled one (fast09, accel.py), whichever is the process default.

Without a built (and current) compiled decoder the "compiled" runs are skipped, and fail when
AMQPCAP_REQUIRE_TOOLS is set: CI builds it (scripts/test.sh), and a CI run that silently tested
the reference twice would prove nothing about the compiled code.
"""

import pytest
from fixtures.compiled import built_or_skip

from amqpcap.amqp import codec_0_9


@pytest.fixture(params=["reference", "compiled"], autouse=True)
def walker(request):
    """Which 0-9 frame walker the test runs with."""
    before = codec_0_9.compiled_in_use()
    if request.param == "compiled":
        built_or_skip("fast09")
    codec_0_9.use_compiled(request.param == "compiled")
    yield request.param
    codec_0_9.use_compiled(before)
