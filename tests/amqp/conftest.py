"""Every test here runs twice: with the pure-Python frame walker (the reference) and with the
compiled one (fast09, compiled.py), whichever is the process default.

Without a built (and current) compiled decoder the "compiled" runs are skipped, and fail when
AMQPCAP_REQUIRE_TOOLS is set: CI builds it (scripts/test.sh), and a CI run that silently tested
the reference twice would prove nothing about the compiled code.
"""

from fixtures.compiled import both_ways

from amqpcap.amqp import codec_0_9

walker = both_ways(codec_0_9, "fast09", "walker")  # which 0-9 frame walker the test runs with
