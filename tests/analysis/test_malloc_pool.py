"""_common.malloc_pool: the malloc settings a block runs with, given back as the enclosing block
had them, and a kept pool's freed memory given back at its end only."""

import pyarrow as pa

from amqpcap.analysis import _common
from amqpcap.analysis._common import KEEP_TRIM_THRESHOLD, TRIM_THRESHOLD, malloc_pool, release_memory

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def _recorded(monkeypatch):
    calls, given = [], []
    monkeypatch.setattr(_common, "_mallopt", lambda option, value: calls.append((option, value)))
    monkeypatch.setattr(_common, "_give_back", lambda: given.append(len(calls)))
    return calls, given


def _settings(calls) -> dict:
    """The last value set of each option."""
    return dict(calls)


def test_release_memory_gives_back_unless_a_kept_pool_runs_which_gives_back_at_its_end(monkeypatch):
    calls, given = _recorded(monkeypatch)
    release_memory(collect=False)
    assert len(given) == 1
    with malloc_pool(4 << 20, keep=True):
        assert _settings(calls) == {M_MMAP_THRESHOLD: 4 << 20, M_TRIM_THRESHOLD: KEEP_TRIM_THRESHOLD}
        release_memory(collect=False)
        with malloc_pool(4 << 20, keep=True):  # (a pass inside the report's block)
            release_memory(collect=False)
        assert len(given) == 1  # nothing given back inside, nor at the inner block's end
        assert _settings(calls)[M_TRIM_THRESHOLD] == KEEP_TRIM_THRESHOLD
    assert len(given) == 2  # at the outer block's end
    assert _settings(calls) == {M_MMAP_THRESHOLD: 128 << 10, M_TRIM_THRESHOLD: TRIM_THRESHOLD}
    with malloc_pool():
        release_memory(collect=False)
    assert len(given) == 3  # a block that does not keep gives back between computations


def test_an_inner_block_leaves_the_enclosing_blocks_settings_and_pool(monkeypatch):
    calls, _ = _recorded(monkeypatch)
    with malloc_pool(4 << 20, keep=True):
        with malloc_pool(256 << 10):
            assert _settings(calls) == {M_MMAP_THRESHOLD: 256 << 10, M_TRIM_THRESHOLD: TRIM_THRESHOLD}
        # (was glibc's default threshold from here on: the enclosing block's again now)
        assert _settings(calls) == {M_MMAP_THRESHOLD: 4 << 20, M_TRIM_THRESHOLD: KEEP_TRIM_THRESHOLD}
        assert pa.default_memory_pool().backend_name == pa.system_memory_pool().backend_name
