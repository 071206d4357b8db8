"""Every test here runs twice: with the pure-Python frame walker (the reference) and with the
compiled one (fast09, accel.py), whichever is the process default.

Without a built (and current) compiled decoder the "compiled" runs are skipped, and fail when
AMQPCAP_REQUIRE_TOOLS is set: CI builds it (scripts/test.sh), and a CI run that silently tested
the reference twice would prove nothing about the compiled code.
"""

import os

import pytest

from amqpcap.amqp import accel, codec_0_9


@pytest.fixture(params=["reference", "compiled"], autouse=True)
def walker(request):
    """Which 0-9 frame walker the test runs with."""
    before = codec_0_9.compiled_in_use()
    if request.param == "compiled":
        module, why = accel.current_build()
        if module is None:
            (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)(why)
    codec_0_9.use_compiled(request.param == "compiled")
    yield request.param
    codec_0_9.use_compiled(before)
