"""The compiled table buffer (records/fastwriter.pyx) against the reference
(writer.TableBufferReference), and how compiled.py chooses it.

Whole datasets first (every shipped capture dissected with both, tables and schemas equal),
then rows of every schema with odd values: the compiled buffer must take what ``pa.array``
takes, convert it the same way, and refuse what it refuses with the same exception class,
leaving nothing of a refused row behind.
"""

from __future__ import annotations

import datetime
import enum
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures.compiled import CAPTURES, FUZZ, built_or_skip, on_the_other_side
from hypothesis import given
from hypothesis import strategies as st

from amqpcap import pipeline
from amqpcap.records import times, writer
from amqpcap.records.schema import SCHEMAS, STORED_SCHEMAS


@pytest.fixture(scope="module")
def fastwriter():
    return built_or_skip("fastwriter")


def dissect_here(captures, out, row_group: int | None = None, group_rows: int | None = None, **kw) -> dict:
    """{table: Arrow table} of ``captures`` dissected by this process (``row_group``: rows a batch,
    ``group_rows``: rows a Parquet row group at most)."""
    if row_group is not None:
        writer.ROW_GROUP = row_group
    if group_rows is not None:
        writer.GROUP_ROWS = group_rows
    pipeline.dissect(captures, str(out), frames=True, **kw)
    return {t: pq.read_table(os.path.join(out, t)) for t in sorted(os.listdir(out))}


def dissect_both(captures, tmp_path, **kw) -> tuple:
    """(compiled, reference) tables: one side here, the other in a process of the other
    implementations."""
    here = dissect_here(captures, tmp_path / "here", **kw)
    there = on_the_other_side(dissect_here, captures, tmp_path / "there", **kw)
    return (here, there) if writer.compiled_in_use() else (there, here)


def assert_same_tables(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].schema.equals(b[name].schema, check_metadata=True), name
        assert a[name].schema.equals(STORED_SCHEMAS[name], check_metadata=True), name
        assert a[name].num_rows == b[name].num_rows, name
        assert a[name].equals(b[name]), name


# --- whole datasets ----------------------------------------------------------------------------


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_every_shipped_capture_gives_the_reference_tables(capture, tmp_path):
    assert_same_tables(*dissect_both(capture, tmp_path))


def test_many_row_groups_and_several_captures_give_the_reference_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "ROW_GROUP", writer.ROW_GROUP)  # restored: set below, several flushes a table
    monkeypatch.setattr(writer, "GROUP_ROWS", writer.GROUP_ROWS)
    compiled, reference = dissect_both(
        CAPTURES, tmp_path, row_group=1000, group_rows=3000, body_bytes=1 << 20
    )
    assert_same_tables(compiled, reference)
    methods = compiled["methods"]
    assert compiled["frames"].num_rows > 5000 and methods.column("id_ranges").null_count < methods.num_rows
    meta = pq.ParquetFile(tmp_path / "here" / "frames" / "part-00000.parquet").metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert groups[:-1] == [3000] * (len(groups) - 1) and 0 < groups[-1] <= 3000  # three batches a group


def _run_dissect(env: dict, tmp_path) -> str:
    argv = ["dissect", CAPTURES[0], CAPTURES[1], "-o", str(tmp_path / "out"), "--frames"]
    code = (
        "import sys; from amqpcap.cli import main; from amqpcap.records import writer; "
        f"rc = main({argv!r}); "
        "print(rc, writer.compiled_in_use(), 'pandas' in sys.modules, 'pyarrow.parquet' in sys.modules, "
        "'concurrent.futures' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "AMQPCAP_PURE"} | env
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return r.stdout.splitlines()[-1]


def test_a_compiled_dissect_never_imports_pandas_nor_pyarrow_parquet(fastwriter, tmp_path):
    # pyarrow imports pandas at the first pa.array call (~0.2 s, ~56 MB): the compiled path
    # makes none.  The reference path does import it (the check can see it).  Neither imports
    # pyarrow.parquet (~25 ms with the filesystem layer): writer.open_parquet uses its engine;
    # nor, compiled, concurrent.futures (~10 ms with logging): the Parquet thread is writer.Job's
    # (pandas, on the reference path, imports it itself).
    assert _run_dissect({}, tmp_path) == "0 True False False False"
    assert _run_dissect({"AMQPCAP_PURE": "1"}, tmp_path / "pure").startswith("0 False True False ")


# --- rows with odd values ----------------------------------------------------------------------


class Small(enum.IntEnum):
    ONE = 1


def values(t: pa.DataType):
    """Values for a column of type ``t``: its own and others that pa.array takes or refuses."""
    odd = st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True),
        st.text(max_size=3),
        st.binary(max_size=3),
        st.sampled_from([Small.ONE, "\ud800", b"\xff\xfe", bytearray(b"ab"), [], {}, (1, 2), 2**64]),
    )
    if pa.types.is_integer(t) or pa.types.is_timestamp(t):
        hi = (1 << (t.bit_width - 1)) - 1
        own = st.one_of(
            st.integers(-hi - 1, hi),
            st.sampled_from([hi, hi + 1, -hi - 1, -hi - 2, 0, -1, 1]),
            # one 30-bit digit or two (IntCol reads a one-digit int directly)
            st.sampled_from([2**30 - 1, 2**30, -(2**30) + 1, -(2**30), 2**31 - 1, -(2**31)]),
            st.integers(),
            st.datetimes(timezones=st.just(datetime.UTC)) if pa.types.is_timestamp(t) else st.nothing(),
        )
    elif pa.types.is_boolean(t):
        own = st.one_of(st.booleans(), st.sampled_from([0, 1]))
    elif pa.types.is_string(t):
        own = st.one_of(st.text(), st.text().map(str.encode))
    elif pa.types.is_binary(t):
        own = st.one_of(st.binary(), st.text(), st.binary().map(bytearray))
    elif pa.types.is_list(t):
        ranges = st.fixed_dictionaries(
            {}, optional={"lower": values(pa.int64()), "upper": values(pa.int64()), "extra": st.integers()}
        )
        item = st.one_of(ranges, st.none(), st.tuples(st.integers(), st.integers()), st.integers())
        own = st.one_of(st.lists(item, max_size=4), st.lists(ranges, max_size=4).map(tuple))
    else:
        raise AssertionError(f"no strategy for {t}")
    return st.one_of(own, own, own, odd)


def rows_of(name: str):
    schema = SCHEMAS[name]
    row = st.tuples(*[values(f.type) for f in schema])
    odd_row = st.one_of(
        st.none(),
        st.tuples(st.integers()),
        row.map(list),
        row.map(lambda r: dict(zip(schema.names, r))),
        row.map(lambda r: dict(zip(schema.names[::2], r[::2]))),
    )
    return st.lists(st.one_of(row, row, row, row, odd_row), max_size=12)


def reference_outcome(struct: pa.StructType, row):
    try:
        pa.array([row], type=struct)
        return None
    except Exception as e:
        return type(e)


@FUZZ
@given(name=st.sampled_from(sorted(SCHEMAS)), data=st.data())
def test_odd_values_are_taken_refused_and_converted_as_the_reference_does(fastwriter, name, data):
    schema = SCHEMAS[name]
    struct = pa.struct(list(schema))
    rows = data.draw(rows_of(name))
    columns = fastwriter.Columns(schema, 1 << 20)
    taken = []
    for row in rows:
        want = reference_outcome(struct, row)
        try:
            columns.append(row)
            got = None
        except Exception as e:
            got = type(e)
        assert got is want, (row, got, want)
        if want is None:
            taken.append(row)
        assert columns.pending == len(taken)  # a refused row leaves nothing behind
    batch = columns.take()
    batch.validate(full=True)
    # row by row: one pa.array call over rows mixing tuples and dicts refuses the mix itself
    each = [pa.array([row], type=struct) for row in taken]
    expect_rows = pa.concat_arrays(each) if each else pa.array([], type=struct)
    expect = pa.RecordBatch.from_arrays(expect_rows.flatten(), schema=schema)
    assert batch.schema.equals(schema, check_metadata=True)
    assert batch.equals(expect)
    assert columns.pending == 0 and columns.take().num_rows == 0


def test_a_refused_row_leaves_the_rows_before_it_intact(fastwriter):
    schema = SCHEMAS["methods"]
    row = [None] * len(schema)
    row[schema.names.index("id_ranges")] = [{"lower": 1, "upper": 2}]
    row[schema.names.index("capture")] = "x"
    good = tuple(row)
    row[schema.names.index("id_ranges")] = [{"lower": 3, "upper": 4}, {"lower": "no", "upper": 5}]
    bad = tuple(row)
    columns = fastwriter.Columns(schema, 100)
    columns.append(good)
    with pytest.raises(pa.ArrowInvalid):  # as pa.array: "Could not convert 'no' ... to int64"
        columns.append(bad)
    with pytest.raises(pa.ArrowInvalid):  # as pa.array: a tuple of the wrong size
        columns.append(good[:-1])
    with pytest.raises(OverflowError):  # as pa.array
        columns.append((None, None, 1 << 64) + good[3:])
    columns.append(good)
    batch = columns.take()
    assert batch.num_rows == 2 and batch.column("id_ranges").to_pylist() == [[{"lower": 1, "upper": 2}]] * 2
    assert batch.column("capture").to_pylist() == ["x", "x"]


def append_sparse(fastwriter):
    """fastwriter's APPEND_SPARSE (a C function for the row builders) callable from here:
    (columns, [(column index, value), ...]) -> None."""
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    fn = ctypes.PYFUNCTYPE(
        ctypes.c_int,
        ctypes.py_object,
        ctypes.POINTER(ctypes.c_ssize_t),
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_ssize_t,
    )(get(fastwriter.APPEND_SPARSE, b"amqpcap.records.fastwriter.append_sparse"))

    def call(columns, pairs: list) -> None:
        k = len(pairs)
        cols = (ctypes.c_ssize_t * max(k, 1))(*[c for c, _ in pairs])
        ptrs = (ctypes.c_void_p * max(k, 1))(*[id(v) for _, v in pairs])  # (kept alive by ``pairs``)
        fn(columns, cols, ptrs, k)

    return call


@pytest.mark.compiled("fastwriter")
def test_a_row_given_as_the_columns_it_fills_is_the_row_given_whole(fastwriter):
    # the row builders hand a row as its columns and values, in any order: the batch is the one
    # of the whole rows, nulls where a row names no column or gives None
    schema = SCHEMAS["messages"]
    put = append_sparse(fastwriter)
    whole = fastwriter.Columns(schema, 100)
    sparse = fastwriter.Columns(schema, 100)
    names = schema.names
    for i in range(40):
        values = {names.index("capture"): "c", names.index("frame_number"): i, names.index("body"): b"x" * i}
        if i % 3:
            values[names.index("settled")] = i % 2 == 0
            values[names.index("link_name")] = None if i % 5 == 0 else f"link{i}"
        if i % 4 == 0:
            values[names.index("ts")] = 1_764_460_800_000_000_000 + i
        row = [None] * len(names)
        for at, v in values.items():
            row[at] = v
        whole.append(tuple(row))
        put(sparse, list(reversed(values.items())))
    assert sparse.take().equals(whole.take())


@pytest.mark.compiled("fastwriter")
def test_a_sparse_row_naming_a_column_twice_or_a_refused_value_leaves_nothing_behind(fastwriter):
    schema = SCHEMAS["messages"]
    put = append_sparse(fastwriter)
    names = schema.names
    columns = fastwriter.Columns(schema, 100)
    capture, channel = names.index("capture"), names.index("channel")
    put(columns, [(capture, "a"), (names.index("frame_number"), 1)])
    for bad in ([(capture, "b"), (channel, 2), (capture, "c")], [(channel, 2), (len(names), 3)]):
        with pytest.raises(ValueError):
            put(columns, bad)
    with pytest.raises(OverflowError):  # as pa.array
        put(columns, [(capture, "b"), (names.index("frame_number"), 1 << 64)])
    batch = columns.take()
    assert batch.num_rows == 1
    assert batch.column("capture").to_pylist() == ["a"] and batch.column("channel").to_pylist() == [None]


def test_thousands_of_rows_of_every_width_and_text_are_the_reference_batch(fastwriter):
    # most values are written without a call while their buffers have room; the value that
    # meets a full buffer, and the edges of each integer width, go the general way: the batch
    # must not show where one path gave way to the other
    schema = pa.schema(
        [("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("i64", pa.int64()), ("b", pa.bool_())]
        + [("ts", pa.timestamp("ns")), ("s", pa.string()), ("raw", pa.binary())]
    )
    edges = {
        w: [0, 1, -1, (1 << (8 * w - 1)) - 1, -(1 << (8 * w - 1)), (1 << 30) - 1, -(1 << 30) + 1, 1 << 30]
        for w in (1, 2, 4, 8)
    }
    # ints of two and three 30-bit digits (ns timestamps are three), on either side of each
    edges[8] += [(1 << 60) - 1, 1 << 60, -(1 << 60), (1 << 62) + 12345, -(1 << 63) + 1]
    edges[8].append(1_764_460_800_123_456_789)
    rows = []
    for i in range(6003):  # not a multiple of 8: the bitmaps' last byte is partly filled
        ints = [e[i % len(e)] if i % 3 else (i % 100) - 50 for e in edges.values()]
        ints = [v if -(1 << (8 * w - 1)) <= v < 1 << (8 * w - 1) else None for v, w in zip(ints, edges)]
        text = None if i % 7 == 0 else ("x" * (i % 300) + ("é" if i % 5 == 0 else ""))
        raw = None if i % 11 == 0 else bytes([i % 256]) * (i % 500)
        flag = None if i % 13 == 0 else i % 4 == 0
        rows.append((*ints, flag, i * 1_000_003 * (1 if i % 2 else 1_000_000_000), text, raw))
    columns = fastwriter.Columns(schema, 1 << 20)
    for row in rows:
        columns.append(row)
    batch = columns.take()
    batch.validate(full=True)
    arrays = [pa.array(c, type=f.type) for c, f in zip(zip(*rows), schema)]
    expect = pa.RecordBatch.from_arrays(arrays, schema=schema)
    assert batch.equals(expect)


def test_validity_and_bool_bitmaps_of_every_length_and_null_pattern_are_arrows(fastwriter):
    # the flags are counted and packed eight at a time: every length's last partial byte and
    # every null pattern within a byte must come out as pa.array makes them
    schema = pa.schema([("b", pa.bool_()), ("i", pa.int32()), ("s", pa.string())])
    for n in range(1, 41):
        for pattern in (0, 1, 0b10110010, 0xFF, 0b01111111):
            rows = []
            for i in range(n):
                null = (pattern >> (i % 8)) & 1
                text = None if (i + n) % 5 == 0 else "v"
                rows.append((None if null else i % 3 == 0, None if null else i, text))
            columns = fastwriter.Columns(schema, 1 << 10)
            for row in rows:
                columns.append(row)
            batch = columns.take()
            batch.validate(full=True)
            arrays = [pa.array(list(c), type=f.type) for c, f in zip(zip(*rows), schema)]
            assert batch.equals(pa.RecordBatch.from_arrays(arrays, schema=schema)), (n, pattern)
            assert [c.null_count for c in batch.columns] == [a.null_count for a in arrays], (n, pattern)


def test_a_taken_batch_keeps_its_values_while_the_columns_fill_again(fastwriter):
    # take() hands the column memory itself to Arrow (no copy) and the columns go on in fresh
    # memory: the rows appended after it must not show through the batch taken before
    schema = SCHEMAS["methods"]
    names = schema.names

    def row(i):
        r = [None] * len(schema)
        r[names.index("capture")] = f"capture-{i}" * (i % 3 + 1)
        r[names.index("channel")] = i
        r[names.index("id_ranges")] = [{"lower": i, "upper": i + 1}]
        return tuple(r)

    columns = fastwriter.Columns(schema, 1000)
    for i in range(50):
        columns.append(row(i))
    first = columns.take()
    expected = first.to_pylist()
    for i in range(50, 200):
        columns.append(row(i))
    second = columns.take()
    del columns
    assert first.to_pylist() == expected and first.column("channel").to_pylist() == list(range(50))
    assert second.column("capture").to_pylist() == [f"capture-{i}" * (i % 3 + 1) for i in range(50, 200)]
    first.validate(full=True)
    second.validate(full=True)


def test_memory_arrow_lets_go_of_is_reused_by_the_next_batches_and_only_then(fastwriter):
    # hand_over's blocks go back to a pool when their batch is freed, and a column's next block
    # comes from it: a batch still alive keeps its memory, a reused block holds the new values
    schema = SCHEMAS["methods"]
    names = schema.names

    def row(i):
        r = [None] * len(schema)
        r[names.index("capture")] = f"c{i}"
        r[names.index("channel")] = i
        return tuple(r)

    fastwriter.release_pool()
    assert fastwriter.pooled_blocks() == 0
    columns = fastwriter.Columns(schema, 100_000)
    for i in range(300):
        columns.append(row(i))
    alive = columns.take()  # its blocks are Arrow's while it lives
    before = fastwriter.pooled_blocks()
    for i in range(300, 600):
        columns.append(row(i))
    dropped = columns.take()
    assert fastwriter.pooled_blocks() == before  # nothing was let go of yet
    del dropped
    pooled = fastwriter.pooled_blocks()
    assert pooled > before  # the dropped batch's blocks (capture, channel, ...) are back
    for i in range(600, 900):
        columns.append(row(i))
    third = columns.take()  # the columns go on in pooled blocks
    assert fastwriter.pooled_blocks() < pooled
    assert alive.column("channel").to_pylist() == list(range(300))
    assert alive.column("capture").to_pylist() == [f"c{i}" for i in range(300)]
    assert third.column("channel").to_pylist() == list(range(600, 900))
    assert third.column("capture").to_pylist() == [f"c{i}" for i in range(600, 900)]
    alive.validate(full=True)
    third.validate(full=True)
    del columns, alive, third
    assert fastwriter.pooled_blocks() > 0
    fastwriter.release_pool()
    assert fastwriter.pooled_blocks() == 0


@pytest.mark.compiled("fastwriter")
def test_a_written_dataset_leaves_no_pooled_memory_behind(fastwriter, tmp_path):
    from amqpcap.pipeline import dissect

    assert writer.compiled_in_use()
    dissect(CAPTURES[:3], str(tmp_path / "out"), frames=True)
    assert fastwriter.pooled_blocks() == 0


def test_every_column_type_of_the_schema_is_built_natively(fastwriter):
    # so no pa.array call happens on the common path (the pandas import, the per-value conversion)
    for name, schema in SCHEMAS.items():
        for f in schema:
            assert fastwriter.native(f.type), (name, f.name, f.type)
    assert not fastwriter.native(pa.float64())  # others take the generic path


def test_a_table_by_name_gives_the_batches_its_arrow_schema_gives(fastwriter, tmp_path):
    """``Columns(name)`` builds its columns from records/schema.py's declared types, without
    pyarrow (the dissect's tables); the batches it takes equal ``Columns(SCHEMAS[name])``'s."""
    from amqpcap.records.schema import TABLES

    tables = dissect_here(CAPTURES, tmp_path / "ref")  # 0-8 to 0-10: id_ranges too
    for name in TABLES:
        assert [str(c.type) for c in [fastwriter.column(t) for _, t, _ in TABLES[name]]] == [
            str(f.type) for f in SCHEMAS[name]
        ]
        t = times.to_exact(tables[name])
        ints = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in t.columns]
        rows = [tuple(r.values()) for r in pa.table(ints, names=t.column_names).to_pylist()]
        named, typed = fastwriter.Columns(name, 1 << 20), fastwriter.Columns(SCHEMAS[name], 1 << 20)
        for r in rows:
            named.append(r)
            typed.append(r)
        a, b = named.take(), typed.take()
        assert a.num_rows == len(rows) == t.num_rows, name
        assert a.schema.equals(SCHEMAS[name], check_metadata=True) and a.equals(b), name
        assert pa.Table.from_batches([a]).equals(t), name


def test_a_column_of_another_type_takes_the_generic_path(fastwriter):
    schema = pa.schema([("x", pa.float64()), ("y", pa.int32())])
    columns = fastwriter.Columns(schema, 10)
    columns.append((1.5, 2))
    columns.append((None, 3))
    with pytest.raises(pa.ArrowInvalid):
        columns.append((2.5, "bad"))
    assert columns.take().to_pylist() == [{"x": 1.5, "y": 2}, {"x": None, "y": 3}]


def test_a_batch_is_full_at_capacity_rows_or_when_a_binary_column_holds_max_bytes(fastwriter):
    class Batches(fastwriter.Columns):
        def __init__(self, *args):
            super().__init__(*args)
            self.batches = []

        def flush(self):
            self.batches.append(self.take().column("x").to_pylist())

    schema = pa.schema([("x", pa.binary()), ("n", pa.int32())])
    by_rows = Batches(schema, 3, 1 << 20)
    by_bytes = Batches(schema, 100, 100)  # 30 bytes a row: full at the 4th row (120 bytes)
    for i in range(10):
        for b in (by_rows, by_bytes):
            b.append((bytes([i]) * 30, i))
    assert [len(x) for x in by_rows.batches] == [3, 3, 3] and by_rows.pending == 1
    assert [len(x) for x in by_bytes.batches] == [4, 4] and by_bytes.pending == 2
    assert sum(by_bytes.batches, []) == [bytes([i]) * 30 for i in range(8)]


# --- the writer around it ----------------------------------------------------------------------


def test_a_table_buffer_writes_a_row_group_every_row_group_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "ROW_GROUP", 3)
    monkeypatch.setattr(writer, "GROUP_ROWS", 3)  # a batch a row group
    schema = STORED_SCHEMAS["anomalies"]
    t = writer.TableBuffer("anomalies", str(tmp_path / "anomalies"))
    rows = [("c", i, i, i * 10, "c2s", None, None, "amqp", "kind", f"detail {i}", i) for i in range(7)]
    for row in rows:
        t.append(row)
    assert t.rows == 6  # two full row groups written, one row pending
    t.close()
    assert t.rows == 7
    f = pq.ParquetFile(tmp_path / "anomalies" / "part-00000.parquet")
    assert [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)] == [3, 3, 1]
    table = f.read()
    assert table.schema.equals(schema, check_metadata=True)
    assert [tuple(r.values()) for r in table.to_pylist()][1][:3] == ("c", 1, 1)


def test_an_empty_table_still_gets_a_file_with_its_schema(tmp_path):
    t = writer.TableBuffer("frames", str(tmp_path / "frames"))
    t.close()
    table = pq.read_table(tmp_path / "frames")
    assert table.num_rows == 0 and table.schema.equals(STORED_SCHEMAS["frames"], check_metadata=True)


# --- the choice --------------------------------------------------------------------------------


# --- the Parquet thread ------------------------------------------------------------------------


def batch_of(values: list) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"x": v} for v in values], schema=pa.schema([("x", pa.int64())]))


def test_batches_written_in_the_background_arrive_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "GROUP_ROWS", 10)  # a batch a row group: every batch a job of the thread
    files = [writer.ParquetFile(str(tmp_path / n), True) for n in "ab"]
    for i in range(20):  # more batches than QUEUED: the writer waits for the thread, in turn
        files[i % 2].write(batch_of(list(range(i * 10, i * 10 + 10))))
    for f in files:
        f.close()
        assert not f.pending
    a = pq.read_table(tmp_path / "a").column("x").to_pylist()
    assert a == [v for i in range(0, 20, 2) for v in range(i * 10, i * 10 + 10)]
    assert pq.ParquetFile(tmp_path / "b" / "part-00000.parquet").metadata.num_row_groups == 10


def test_batches_are_held_and_written_together_as_row_groups_of_group_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "GROUP_ROWS", 25)
    f = writer.ParquetFile(str(tmp_path / "t"), True)
    for i in range(7):
        f.write(batch_of(list(range(i * 10, i * 10 + 10))))
    assert f.held_rows == 10  # two groups of three batches handed over, the seventh batch held
    f.close()
    assert not f.held and not f.pending
    meta = pq.ParquetFile(tmp_path / "t" / "part-00000.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [30, 30, 10]
    assert pq.read_table(tmp_path / "t").column("x").to_pylist() == list(range(70))


def test_the_first_two_row_groups_are_small_and_the_next_double_up_to_group_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "FIRST_GROUP_ROWS", 10)
    monkeypatch.setattr(writer, "GROUP_ROWS", 40)
    f = writer.ParquetFile(str(tmp_path / "t"), True)
    for i in range(15):
        f.write(batch_of(list(range(i * 10, i * 10 + 10))))
    f.close()
    meta = pq.ParquetFile(tmp_path / "t" / "part-00000.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [10, 10, 20, 40, 40, 30]
    assert pq.read_table(tmp_path / "t").column("x").to_pylist() == list(range(150))


def test_a_row_group_ends_early_once_its_batches_hold_group_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "GROUP_BYTES", 2 * batch_of(list(range(10))).nbytes + 1)
    f = writer.ParquetFile(str(tmp_path / "t"), False)
    for i in range(7):
        f.write(batch_of(list(range(i * 10, i * 10 + 10))))
    f.close()
    meta = pq.ParquetFile(tmp_path / "t" / "part-00000.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [30, 30, 10]
    assert pq.read_table(tmp_path / "t").column("x").to_pylist() == list(range(70))


def test_a_parquet_job_reports_its_write_and_lets_go_of_its_batch():
    import threading
    import weakref

    class Batch:  # a stand-in the job can be seen to drop
        pass

    seen = []
    ok, failing = Batch(), Batch()
    jobs = [writer.Job(seen.append, ok), writer.Job(lambda b: 1 / 0, failing)]
    refs = [weakref.ref(ok)]
    del ok, failing
    assert not any(j.done() for j in jobs)
    threads = [threading.Thread(target=j.run) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(j.done() for j in jobs)
    assert jobs[0].exception() is None and jobs[0].result() is None and len(seen) == 1
    assert isinstance(jobs[1].exception(), ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        jobs[1].result()
    seen.clear()
    assert refs[0]() is None  # written: the batch is gone (a failed one lives on in its traceback)


def test_an_error_in_the_parquet_thread_is_raised_in_the_caller_and_the_file_still_closed(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(writer, "GROUP_ROWS", 1)  # a batch a row group: the good one is written
    f = writer.ParquetFile(str(tmp_path / "t"), True)
    f.write(batch_of([1, 2]))
    wrong = pa.RecordBatch.from_pylist([{"y": "z"}])  # another schema: write_batch raises (in the thread)
    f.write(wrong)
    with pytest.raises(ValueError, match="(?i)schema"):
        for _ in range(100):  # raised by a later write or, at the latest, by close
            f.write(batch_of([3]))
        f.close()
    f.abort()  # after the error: nothing left to raise, the file is closed
    assert pq.read_table(tmp_path / "t").column("x").to_pylist()[:2] == [1, 2]


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
def test_the_dataset_is_the_same_with_or_without_the_parquet_thread(background, tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "BACKGROUND", background)
    monkeypatch.setattr(writer, "ROW_GROUP", 500)
    capture = [c for c in CAPTURES if "throughput" in c]
    first = dissect_here(capture, tmp_path / "first")
    monkeypatch.setattr(writer, "BACKGROUND", not background)
    assert_same_tables(first, dissect_here(capture, tmp_path / "second"))
    assert first["frames"].num_rows > 5 * 500


def test_at_close_the_parquet_thread_takes_the_largest_table_and_the_closer_the_others(tmp_path, monkeypatch):
    import threading
    import time

    monkeypatch.setattr(writer, "BACKGROUND", True)
    monkeypatch.setattr(writer, "ROW_GROUP", 4)
    monkeypatch.setattr(writer, "GROUP_ROWS", 4)
    seen = []  # (table, rows, written by the closing thread) in the order written
    slow = threading.Event()
    engine_write = writer.EngineWriter.write_table

    def write_table(self, table, rows):
        if not slow.is_set():  # the first batch (frames) still in the thread when close begins
            slow.set()
            time.sleep(0.2)
        name = table.schema.metadata[b"amqpcap.table"].decode()
        seen.append((name, table.num_rows, threading.current_thread() is threading.main_thread()))
        engine_write(self, table, rows)

    monkeypatch.setattr(writer.EngineWriter, "write_table", write_table)
    out = tmp_path / "out"
    w = writer.DatasetWriter(str(out), ["anomalies", "frames", "connections"])
    anomaly = ("c", 1, 1, 10, "c2s", None, None, "amqp", "kind", "detail", 1)
    frame = ("c", 1, 1, 10, "c2s", 1, 0, 1, "method", 12, 20)
    for _ in range(6):  # frames: one row group handed over (slow), 2 rows pending
        w["frames"].append(frame)
    for _ in range(3):  # anomalies: the largest pending
        w["anomalies"].append(anomaly)
    w.close()
    assert seen[0] == ("frames", 4, False)  # in the thread while close began
    assert ("anomalies", 3, False) in seen  # the largest: the thread's
    assert ("frames", 2, True) in seen[1:]  # the others: the closer's, after the batch in flight
    assert pq.read_table(out / "frames").num_rows == 6
    assert pq.read_table(out / "anomalies").column("detail").to_pylist() == ["detail"] * 3
    assert pq.read_table(out / "connections").num_rows == 0


def test_at_close_the_largest_tables_held_rows_go_to_the_parquet_thread_before_the_closer_writes(
    tmp_path, monkeypatch
):
    import threading

    monkeypatch.setattr(writer, "BACKGROUND", True)
    monkeypatch.setattr(writer, "ROW_GROUP", 4)
    monkeypatch.setattr(writer, "FIRST_GROUP_ROWS", 8)  # a batch of 4 rows is held for its row group
    monkeypatch.setattr(writer, "GROUP_ROWS", 8)
    out = tmp_path / "out"
    w = writer.DatasetWriter(str(out), ["frames", "connections", "anomalies"])  # the largest closed last
    held_then = []  # the anomalies' rows still held when the closer wrote a table of its own
    writers = {}  # table -> written by the closing thread
    engine_write = writer.EngineWriter.write_table

    def write_table(self, table, rows):
        name = table.schema.metadata[b"amqpcap.table"].decode()
        writers[name] = threading.current_thread() is threading.main_thread()
        if writers[name]:
            held_then.append(w["anomalies"].file.held_rows)
        engine_write(self, table, rows)

    monkeypatch.setattr(writer.EngineWriter, "write_table", write_table)
    for _ in range(3):  # frames: 3 rows pending, more than the anomalies' pending
        w["frames"].append(("c", 1, 1, 10, "c2s", 1, 0, 1, "method", 12, 20))
    for _ in range(6):  # anomalies: a batch of 4 held and 2 pending, the most rows left
        w["anomalies"].append(("c", 1, 1, 10, "c2s", None, None, "amqp", "kind", "detail", 1))
    assert w["anomalies"].file.held_rows == 4
    w.close()
    assert writers == {"frames": True, "anomalies": False}  # (connections: no rows, no row group)
    assert held_then == [0]  # handed on before the closer wrote the frames
    assert pq.read_table(out / "anomalies").num_rows == 6
    assert pq.ParquetFile(next((out / "anomalies").iterdir())).metadata.num_row_groups == 1


def test_at_close_the_closer_writes_its_tables_before_it_waits_for_the_largest(tmp_path, monkeypatch):
    import threading
    import time

    monkeypatch.setattr(writer, "BACKGROUND", True)
    monkeypatch.setattr(writer, "ROW_GROUP", 4)
    monkeypatch.setattr(writer, "FIRST_GROUP_ROWS", 8)  # the frames' 2 rows are held until close
    monkeypatch.setattr(writer, "GROUP_ROWS", 8)
    written = []  # (table, written by the closing thread), in the order the writes ended
    engine_write = writer.EngineWriter.write_table

    def write_table(self, table, rows):
        name = table.schema.metadata[b"amqpcap.table"].decode()
        mine = threading.current_thread() is threading.main_thread()
        if not mine:
            time.sleep(0.2)  # the largest table's last row group, long in the Parquet thread
        engine_write(self, table, rows)
        written.append((name, mine))

    monkeypatch.setattr(writer.EngineWriter, "write_table", write_table)
    out = tmp_path / "out"
    w = writer.DatasetWriter(str(out), ["anomalies", "frames"])  # the largest declared (closed) first
    for _ in range(3):  # anomalies: the largest, the Parquet thread's
        w["anomalies"].append(("c", 1, 1, 10, "c2s", None, None, "amqp", "kind", "detail", 1))
    for _ in range(2):  # frames: the closer's
        w["frames"].append(("c", 1, 1, 10, "c2s", 1, 0, 1, "method", 12, 20))
    w.close()
    assert written == [("frames", True), ("anomalies", False)]  # not after the largest's wait
    assert pq.read_table(out / "frames").num_rows == 2
    assert pq.read_table(out / "anomalies").num_rows == 3
