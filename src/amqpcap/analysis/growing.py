"""State of a streamed pass that grows batch by batch: numpy columns kept in preallocated arrays
whose capacity doubles when full (amortised: each value is copied a bounded number of times),
values kept in fixed-size chunks (never copied until joined once), and 64-bit hashes of string
ids, so that a pass holds 8 bytes an id, not the string.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

__all__ = ["Chunks", "Columns", "HashSet", "Strings", "id_hashes", "HASH_MASK"]

# the bits of an id hash kept (all 64; tests narrow it to force collisions)
HASH_MASK = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


class Columns:
    """Named numpy columns of the same length appended to batch by batch: one array per column,
    its capacity doubled when full (no list of pieces joined at the end)."""

    def __init__(self, dtypes: dict, capacity: int = 1024):
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}
        self.data = {k: np.empty(capacity, dtype=d) for k, d in self.dtypes.items()}
        self.size = 0

    def append(self, values: dict) -> None:
        n = len(next(iter(values.values())))
        need = self.size + n
        cap = len(next(iter(self.data.values())))
        if need > cap:
            cap = max(need, 2 * cap)
            for k, a in self.data.items():
                grown = np.empty(cap, dtype=a.dtype)
                grown[: self.size] = a[: self.size]
                self.data[k] = grown
        for k, a in self.data.items():
            a[self.size : need] = values[k]
        self.size = need

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name][: self.size]


class Chunks:
    """Values of one type appended batch by batch into chunks of a fixed size: a full chunk is
    never copied or grown, so what is held is the values and one chunk partly filled (a doubling
    array holds up to twice the values, and three times them while it grows).  :meth:`take`
    joins them once, each chunk dropped as it is copied."""

    def __init__(self, dtype, chunk: int = 1 << 18):
        self.dtype, self.chunk = np.dtype(dtype), chunk
        self.full: list = []
        self.last = np.empty(0, dtype=self.dtype)
        self.used = 0

    def append(self, values) -> None:
        values = np.asarray(values, dtype=self.dtype)
        while len(values):
            if self.used == len(self.last):
                if len(self.last):
                    self.full.append(self.last)
                self.last, self.used = np.empty(self.chunk, dtype=self.dtype), 0
            n = min(len(self.last) - self.used, len(values))
            self.last[self.used : self.used + n] = values[:n]
            self.used += n
            values = values[n:]

    def __len__(self) -> int:
        return len(self.full) * self.chunk + self.used

    def take(self) -> np.ndarray:
        """Every value appended, in order, as one array; the chunks are emptied."""
        out = np.empty(len(self), dtype=self.dtype)
        full, self.full = self.full, []
        full.reverse()  # (popped from the end: each chunk freed once copied)
        at = 0
        while full:
            c = full.pop()
            out[at : at + len(c)] = c
            at += len(c)
            del c
        out[at:] = self.last[: self.used]
        self.last, self.used = np.empty(0, dtype=self.dtype), 0
        return out


class HashSet:
    """Distinct uint64 values added batch by batch, for membership tests of whole arrays.  The
    batches are kept as they come and made one sorted, unique array when asked (or when they
    outgrow it: duplicates stay bounded), so adding costs no sort of the whole set."""

    def __init__(self):
        self.values = np.zeros(0, dtype=np.uint64)
        self.added: list = []
        self.added_size = 0

    def add(self, values: np.ndarray) -> None:
        if len(values):
            self.added.append(values.astype(np.uint64, copy=False))
            self.added_size += len(values)
            if self.added_size > max(len(self.values), 1 << 20):
                self._merge()

    def _merge(self) -> None:
        if self.added:
            self.values = np.unique(np.concatenate([self.values, *self.added]))
            self.added, self.added_size = [], 0

    def contains(self, values: np.ndarray) -> np.ndarray:
        self._merge()
        if not len(self.values):
            return np.zeros(len(values), dtype=bool)
        at = np.minimum(np.searchsorted(self.values, values), len(self.values) - 1)
        return self.values[at] == values

    def __len__(self) -> int:
        self._merge()
        return len(self.values)


def id_hashes(col: pa.Array) -> np.ndarray:
    """A 64-bit hash (SipHash, pandas') of each string of ``col`` (plain or dictionary: then once per
    distinct value; nulls hash like a fixed value: callers mask them).  Equal strings have equal
    hashes; unequal ones may collide, so a hash only narrows what is compared exactly."""
    if not pa.types.is_dictionary(col.type):  # (ids mostly distinct: hashed as they come)
        values = pd.util.hash_array(
            np.asarray(col.to_numpy(zero_copy_only=False), dtype=object), categorize=False
        )
        return values & HASH_MASK
    uniq = col.dictionary.to_numpy(zero_copy_only=False)
    values = pd.util.hash_array(np.asarray(uniq, dtype=object), categorize=False)
    table = np.r_[values & HASH_MASK, np.uint64(0)]
    return table[col.indices.fill_null(len(uniq)).to_numpy(zero_copy_only=False)]


class Strings:
    """Non-null strings appended batch by batch, their bytes and offsets in growing buffers,
    returned as one Arrow array (no list of per-batch arrays joined at the end)."""

    def __init__(self):
        self.offsets = Columns({"end": np.int64})
        self.data = np.empty(1 << 16, dtype=np.uint8)
        self.size = 0

    def append(self, col: pa.Array) -> None:
        col = col.cast(pa.large_string())
        n = len(col)
        if not n:
            return
        if col.null_count:
            raise ValueError("null strings are not kept")
        offs = np.frombuffer(col.buffers()[1], dtype=np.int64)[col.offset : col.offset + n + 1]
        raw = np.frombuffer(col.buffers()[2], dtype=np.uint8)[offs[0] : offs[-1]]
        need = self.size + len(raw)
        if need > len(self.data):
            grown = np.empty(max(need, 2 * len(self.data)), dtype=np.uint8)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = raw
        self.offsets.append({"end": offs[1:] - offs[0] + self.size})
        self.size = need

    def __len__(self) -> int:
        return len(self.offsets)

    def array(self) -> pa.Array:
        ends = self.offsets["end"]
        offsets = np.r_[np.int64(0), ends]
        return pa.LargeStringArray.from_buffers(
            len(ends), pa.py_buffer(offsets), pa.py_buffer(self.data[: self.size].copy())
        )
