# The build's stamp of a compiled part's sources (setup.py defines it; compiled.py compares it
# with the sources next to the module).  Cimported by each part.
cdef extern from *:
    """
    #ifndef AMQPCAP_SOURCE_STAMP
    #define AMQPCAP_SOURCE_STAMP ""
    #endif
    """
    const char *AMQPCAP_SOURCE_STAMP
