"""Every test here runs twice: with the reference ``reassembly.Stream`` and with its compiled
twin (tcp/fastreassembly.pyx, compiled.py), through ``reassembly.new_stream``."""

from fixtures.compiled import both_ways

from amqpcap.tcp import reassembly

stream_impl = both_ways(reassembly, "fastreassembly", "stream_impl")
