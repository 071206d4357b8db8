"""Body digests hashed by the compiled walker's hashing thread (fast09, amqp/digests.pxi).

Pieces of a body queued to the thread must give hashlib's digest whatever the interleaving of
digests, the piece sizes (in place below QUEUE_MIN, in the ring, too large for it) and the
ring's wrap-around; a digest handed on before it is computed (a decoder with
``deferred_digests``) must read as its text once it is, and the compiled table buffer must
write that text into the batch (and let go of a row it cuts).  A forked child hashes with a
thread of its own.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures import amqp09 as A
from fixtures.compiled import built_or_skip, on_the_other_side

from amqpcap import pipeline
from amqpcap.amqp import codec_0_9
from amqpcap.records import writer

# the compiled walker's hashing, in the process that runs it (compiled table buffers with it)
pytestmark = pytest.mark.compiled("fast09", "fastwriter")

RING = 4 << 20  # AMQPCAP_HARENA: pieces above a quarter of it are hashed in place


@pytest.fixture(scope="module")
def fast09():
    module = built_or_skip("fast09")
    if not module.OPENSSL:
        pytest.skip("OpenSSL's SHA256_* not reachable: hashlib digests, nothing queued")
    return module


def piece_sizes(rng: random.Random, total: int) -> list[int]:
    """Sizes around every threshold: empty, tiny (in place), QUEUE_MIN, ring-sized, too large."""
    out, n = [], 0
    while n < total:
        size = rng.choice([0, 1, 100, 511, 512, 513, 2048, 16384, 131064, RING // 4, RING // 4 + 1, 1500000])
        out.append(size)
        n += size
    return out


def test_queued_pieces_of_interleaved_digests_give_hashlibs_digests(fast09):
    rng = random.Random(7)
    blob = rng.randbytes(1 << 21)
    digests = [(fast09.Sha256(), hashlib.sha256()) for _ in range(12)]
    queued = 0
    for size in piece_sizes(rng, 40 << 20):  # ten times the ring: it wraps and fills up
        at = rng.randrange(len(blob))
        piece = (blob[at:] + blob)[:size]
        ours, ref = rng.choice(digests)
        ours.update(piece, queued=rng.random() < 0.8)  # queued and in place, mixed
        ref.update(piece)
        queued += size
        if rng.random() < 0.05:  # one read (and dropped) while others are still queued
            i = rng.randrange(len(digests))
            assert digests[i][0].hexdigest() == digests[i][1].hexdigest()
            digests[i] = (fast09.Sha256(), hashlib.sha256())
    assert queued > 10 * RING
    for ours, ref in digests:
        assert ours.hexdigest() == ref.hexdigest()
        assert not ours.computing


def test_a_digest_dropped_with_pieces_queued_leaves_the_others_right(fast09):
    rng = random.Random(3)
    keep, ref = fast09.Sha256(), hashlib.sha256()
    for _ in range(200):
        doomed = fast09.Sha256()
        doomed.update(rng.randbytes(60000), queued=True)
        piece = rng.randbytes(rng.randrange(2048, 40000))
        keep.update(piece, queued=True)
        ref.update(piece)
        del doomed  # freed while the thread may still hash its piece: freeing waits for it
    assert keep.hexdigest() == ref.hexdigest()


def test_a_small_piece_after_queued_ones_keeps_the_order(fast09):
    h = fast09.Sha256()
    h.update(b"a" * 100000, queued=True)
    assert h.computing  # the thread is woken at 1 MB queued or by a reader: not yet
    for piece in (b"b", b"c" * 3000, b"", b"d" * 10):  # small ones queued too: they follow
        h.update(piece, queued=True)
    h.update(b"e")  # in place: after the queued pieces
    want = hashlib.sha256(b"a" * 100000 + b"b" + b"c" * 3000 + b"d" * 10 + b"e").hexdigest()
    assert h.hexdigest() == want
    assert str(h) == want and want in repr(h)


def _child(conn, seed: int) -> None:
    rng = random.Random(seed)
    h, ref = __import__("amqpcap.amqp.fast09", fromlist=["Sha256"]).Sha256(), hashlib.sha256()
    for _ in range(100):
        piece = rng.randbytes(rng.randrange(2048, 100000))
        h.update(piece, queued=True)
        ref.update(piece)
    conn.send(h.hexdigest() == ref.hexdigest())


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_hashes_with_a_thread_of_its_own(fast09):
    rng = random.Random(5)
    h, ref = fast09.Sha256(), hashlib.sha256()
    for _ in range(50):  # pieces queued in the parent when it forks
        piece = rng.randbytes(50000)
        h.update(piece, queued=True)
        ref.update(piece)
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    child = ctx.Process(target=_child, args=(there, 11))
    child.start()
    child.join(60)
    assert child.exitcode == 0, "the child hung or died"
    assert here.recv() is True
    assert h.hexdigest() == ref.hexdigest()


# --- handed on before it is computed ---------------------------------------------------------


def big_contents(rng: random.Random, n: int) -> tuple[bytes, list[bytes]]:
    """A 0-9-1 client stream: header, and ``n`` publishes of bodies over QUEUE_MIN, some split
    into several body frames, some far larger than the ring's quarter."""
    stream, bodies = A.protocol_header(), []
    for i in range(n):
        body = rng.randbytes(rng.choice([3000, 20000, 131072 * 2 + 5, 1_200_000]))
        bodies.append(body)
        publish = A.method_frame(1, "basic.publish", exchange="x", routing_key=f"k{i}")
        stream += A.content(1, publish, body, {"delivery-mode": 2})
    return stream, bodies


def test_a_deferred_digest_is_handed_on_and_reads_as_its_text(fast09):
    rng = random.Random(1)
    stream, bodies = big_contents(rng, 6)
    dec = fast09.Decoder09("0-9-1")
    codec_0_9.direct_output(dec, None, True)
    dec.feed(0, stream, 0, 1, 1000)
    contents = [e for _, e in dec.pop_events() if type(e).__name__ == "Content"]
    assert [c.body_received for c in contents] == [len(b) for b in bodies]
    assert any(type(c.body_hash) is fast09.Sha256 for c in contents)  # some still computing
    assert [str(c.body_hash) for c in contents] == [hashlib.sha256(b).hexdigest() for b in bodies]


def test_without_deferred_digests_the_walker_gives_text(fast09):
    stream, bodies = big_contents(random.Random(2), 3)
    _, events = A.decode(stream, decoder=fast09.Decoder09)
    contents = [e for e in events if type(e).__name__ == "Content"]
    assert [c.body_hash for c in contents] == [hashlib.sha256(b).hexdigest() for b in bodies]


@pytest.fixture
def fastwriter():
    return built_or_skip("fastwriter")


def test_a_text_column_writes_a_deferred_digest_when_the_batch_is_made(fast09, fastwriter):
    fastwriter.defer_text(fast09.DEFERRED_DIGEST)
    schema = pa.schema([("n", pa.int64()), ("h", pa.string())])
    cols = fastwriter.Columns(schema, 100)
    rng = random.Random(4)
    expect = []
    for i in range(20):
        h, data = fast09.Sha256(), rng.randbytes(5000 * (i + 1))
        h.update(data, queued=True)
        cols.append((i, h if i % 3 else hashlib.sha256(data).hexdigest()))  # text or deferred
        expect.append(hashlib.sha256(data).hexdigest())
    batch = cols.take()
    assert batch.column("h").to_pylist() == expect
    assert batch.column("n").to_pylist() == list(range(20))


def test_a_cut_row_lets_go_of_its_deferred_digest(fast09, fastwriter):
    fastwriter.defer_text(fast09.DEFERRED_DIGEST)
    schema = pa.schema([("h", pa.string()), ("n", pa.int8())])
    cols = fastwriter.Columns(schema, 100)
    kept, cut = fast09.Sha256(), fast09.Sha256()
    kept.update(b"k" * 4000, queued=True)
    cut.update(b"c" * 4000, queued=True)
    cols.append((kept, 1))
    before = sys.getrefcount(cut)
    with pytest.raises(pa.ArrowInvalid):
        cols.append((cut, 1000))  # 1000 does not fit int8: the row is cut, digest and all
    assert sys.getrefcount(cut) == before
    assert cols.take().column("h").to_pylist() == [hashlib.sha256(b"k" * 4000).hexdigest()]


def test_a_batch_taken_for_later_gets_its_digests_from_its_deferred_text_in_a_thread(fast09, fastwriter):
    """take_later leaves the digests' text to the DeferredText it returns (the rows' other
    values are in the batch already); its write(), in the thread that encodes the batch, writes
    every digest where its row has it and lets go of the digests."""
    import threading

    fastwriter.defer_text(fast09.DEFERRED_DIGEST)
    schema = pa.schema([("n", pa.int64()), ("h", pa.string()), ("s", pa.string())])
    cols = fastwriter.Columns(schema, 100)
    rng = random.Random(5)
    expect, digests = [], []
    for i in range(12):
        h, data = fast09.Sha256(), rng.randbytes(3000 * (i + 1))
        h.update(data, queued=True)
        digest = h if i % 4 else None  # deferred, or a null between them
        digests.append(digest)
        cols.append((i, digest, f"s{i}"))
        expect.append(hashlib.sha256(data).hexdigest() if digest is not None else None)
    held = [sys.getrefcount(h) for h in digests if h is not None]
    batch, text = cols.take_later()
    assert text.pending == 9 and cols.pending == 0
    assert batch.column("n").to_pylist() == list(range(12))
    assert batch.column("s").to_pylist() == [f"s{i}" for i in range(12)]
    writing = threading.Thread(target=text.write)
    writing.start()
    writing.join(60)
    assert text.pending == 0
    assert batch.column("h").to_pylist() == expect
    assert [sys.getrefcount(h) + 1 for h in digests if h is not None] == held  # let go


def test_a_batch_without_deferred_values_has_no_deferred_text(fastwriter):
    cols = fastwriter.Columns(pa.schema([("h", pa.string())]), 100)
    cols.append(("text",))
    batch, text = cols.take_later()
    assert text is None and batch.column("h").to_pylist() == ["text"]


def test_a_dropped_deferred_text_lets_go_of_its_digests(fast09, fastwriter):
    fastwriter.defer_text(fast09.DEFERRED_DIGEST)
    cols = fastwriter.Columns(pa.schema([("h", pa.string())]), 100)
    h = fast09.Sha256()
    h.update(b"d" * 5000, queued=True)
    before = sys.getrefcount(h)
    cols.append((h,))
    assert sys.getrefcount(h) == before + 1
    batch, text = cols.take_later()
    del text  # a dissect that stops before the batch is written
    assert sys.getrefcount(h) == before


def messages_of(capture: str, out):
    """The messages table of ``capture`` dissected by this process."""
    pipeline.dissect([capture], str(out), force=True)
    return pq.read_table(out / "messages")


def test_a_dissect_writes_the_digests_of_bodies_hashed_in_the_thread(fast09, fastwriter, tmp_path):
    """End to end: a capture of large bodies through the compiled walker into compiled table
    buffers (deferred digests on) gives hashlib's digest of every body, as the reference does."""
    from fixtures import pcapgen as G

    rng = random.Random(9)
    stream, bodies = big_contents(rng, 12)
    segs = G.tcp_conversation([("c2s", stream)], mss=16344)
    cap = tmp_path / "big.pcap"
    G.write(cap, G.pcap_bytes(G.to_packets(segs)))
    here = messages_of(str(cap), tmp_path / "compiled")
    want = [hashlib.sha256(b).hexdigest() for b in bodies]
    assert here.column("body_hash").to_pylist() == want
    assert here.equals(on_the_other_side(messages_of, str(cap), tmp_path / "reference"))


def test_dissections_in_threads_share_the_hashing_thread_and_write_the_same_tables(
    fast09, fastwriter, tmp_path
):
    import threading

    from fixtures import pcapgen as G

    stream, bodies = big_contents(random.Random(6), 8)
    cap = tmp_path / "big.pcap"
    G.write(cap, G.pcap_bytes(G.to_packets(G.tcp_conversation([("c2s", stream)], mss=16344))))
    outs = [tmp_path / f"t{i}" for i in range(3)]
    errors = []

    def run(out):
        try:
            pipeline.dissect([str(cap)], str(out), force=True)
        except BaseException as e:  # reported below: a thread's exception is not the test's
            errors.append(e)

    threads = [threading.Thread(target=run, args=(o,)) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in threads)
    want = [hashlib.sha256(b).hexdigest() for b in bodies]
    for out in outs:
        assert pq.read_table(out / "messages").column("body_hash").to_pylist() == want


def test_the_dissect_pipeline_defers_digests_only_into_compiled_buffers(fast09, fastwriter, tmp_path):
    w = writer.DatasetWriter(str(tmp_path / "o"), ("connections", "methods", "messages", "anomalies"))
    try:
        d = pipeline.Dissector("x", w, pipeline.Options())
        assert d.deferred_digests is True
        assert writer.takes_deferred_digests(w["messages"])
        assert not writer.takes_deferred_digests(writer.TableBufferReference("messages", str(tmp_path / "r")))
        assert not writer.takes_deferred_digests(object())
    finally:
        w.abort()
    assert os.path.exists(tmp_path) and not os.path.exists(tmp_path / "o")
