"""A bulk AMQP 1.0 capture for bench_dissect (``--shape bulk10``): the 1.0 encoder of its traffic.

Several connections, each with a SASL PLAIN layer, a sender link publishing unsettled messages
(header, properties, application-properties, a data body of 100 B to 16 KiB, a few of 200 kB
split over transfers at max-frame-size 65536) that the broker settles with dispositions over
ranges, and a receiver link the broker delivers to (a TCP send per delivery, as the 0-9-1
consumer's), the client settling each batch.
"""

from __future__ import annotations

import struct

MAX_FRAME = 65536


def _u(v: int) -> bytes:  # uint
    return b"\x43" if v == 0 else (b"\x52" + bytes([v]) if v < 256 else b"\x70" + struct.pack(">I", v))


def _str(s: str, code=0xA1) -> bytes:
    b = s.encode()
    return bytes([code, len(b)]) + b


def _sym(s: str) -> bytes:
    return _str(s, 0xA3)


def _bin(b: bytes) -> bytes:
    return (b"\xa0" + bytes([len(b)]) if len(b) < 256 else b"\xb0" + struct.pack(">I", len(b))) + b


def _list(items: list[bytes]) -> bytes:
    body = b"".join(items)
    if len(body) < 255:
        return b"\xc0" + bytes([len(body) + 1, len(items)]) + body
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


def _map(pairs: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(k + v for k, v in pairs)
    return b"\xc1" + bytes([len(body) + 1, 2 * len(pairs)]) + body


def _desc(code: int, value: bytes) -> bytes:
    return b"\x00\x53" + bytes([code]) + value


def frame(body: bytes, channel: int = 0, ftype: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, ftype, channel) + body


def handshake(name: str):
    client = [
        b"AMQP\x03\x01\x00\x00",
        frame(_desc(0x41, _list([_sym("PLAIN"), _bin(b"\0guest\0guest")])), ftype=1),
        b"AMQP\x00\x01\x00\x00"
        + frame(_desc(0x10, _list([_str(name), _str("vhost:/"), _u(MAX_FRAME)])))
        + frame(_desc(0x11, _list([b"\x40", _u(0), _u(5000), _u(5000)]))),
    ]
    server = [
        b"AMQP\x03\x01\x00\x00"
        + frame(_desc(0x40, _list([b"\xe0\x08\x01\xa3\x05PLAIN"])), ftype=1)
        + frame(_desc(0x44, _list([b"\x50\x00"])), ftype=1),
        b"AMQP\x00\x01\x00\x00"
        + frame(_desc(0x10, _list([_str("rabbit@bench"), b"\x40", _u(MAX_FRAME)])))
        + frame(_desc(0x11, _list([b"\x60\x00\x00", _u(0), _u(5000), _u(5000)]))),
    ]
    return client, server


def attach(name: str, handle: int, role: bool, address: str) -> bytes:
    term = _desc(0x28 if role else 0x29, _list([_str(address)]))
    fields = [
        _str(name),
        _u(handle),
        b"\x41" if role else b"\x42",
        b"\x50\x00" if role else b"\x50\x02",
        b"\x50\x00",
    ]
    fields += [term, b"\x40"] if role else [b"\x40", term]
    return frame(_desc(0x12, _list(fields)))


def flow(handle: int, credit: int) -> bytes:
    return frame(_desc(0x13, _list([_u(0), _u(5000), _u(0), _u(5000), _u(handle), _u(0), _u(credit)])))


def message(n: int, key: str, body: bytes) -> bytes:
    return (
        _desc(0x70, _list([b"\x41"]))
        + _desc(0x73, _list([_str(f"msg-{n}"), b"\x40", _str(f"/exchanges/amq.topic/{key}")]))
        + _desc(0x74, _map([(_str("n"), _u(n))]))
        + _desc(0x75, _bin(body))
    )


def transfers(handle: int, delivery_id: int, msg: bytes, settled: bool = False) -> bytes:
    out = []
    room = MAX_FRAME - 64
    for i in range(0, len(msg), room):
        more = i + room < len(msg)
        if i == 0:
            head = [_u(handle), _u(delivery_id), _bin(struct.pack(">I", delivery_id)), _u(0)]
            head += [b"\x41" if settled else b"\x42", b"\x41" if more else b"\x42"]
        else:
            head = [_u(handle), b"\x40", b"\x40", b"\x40", b"\x40", b"\x41" if more else b"\x42"]
        out.append(frame(_desc(0x14, _list(head)) + msg[i : i + room]))
    return b"".join(out)


def disposition(role: bool, first: int, last: int) -> bytes:
    return frame(
        _desc(0x15, _list([b"\x41" if role else b"\x42", _u(first), _u(last), b"\x41", _desc(0x24, b"\x45")]))
    )


def conversation(pub, con, n: int) -> int:
    """bench_dissect.build_bulk's conversation in AMQP 1.0: a publisher and a consumer (their
    connections: bench_dissect.Conn) over ``batches``."""
    from bench_dissect import batches  # (bench_dissect imports this module when it needs it)

    for conn, name in ((pub, "publisher"), (con, "consumer")):
        c, s = handshake(name)
        for a, b in zip(c, s + [b""]):
            conn.send(0, a)
            if b:
                conn.send(1, b)
    pub.send(0, attach("pub", 0, False, "/exchanges/amq.topic"))
    pub.send(1, attach("pub", 0, True, "/exchanges/amq.topic") + flow(0, 1000))
    con.send(0, attach("sub", 0, True, "/queues/q") + flow(0, 1000))
    con.send(1, attach("sub", 0, False, "/queues/q"))
    pid = cid = 0
    for batch in batches():
        msgs = [message(n + i, key, body) for i, (key, body) in enumerate(batch)]
        n += len(msgs)
        first = pid
        pub.send(0, b"".join(transfers(0, pid + i, m) for i, m in enumerate(msgs)))
        pid += len(msgs)
        pub.send(1, disposition(True, first, pid - 1))
        first = cid
        for i, m in enumerate(msgs):  # a delivery per send, as the 0-9-1 consumer's
            con.send(1, transfers(0, cid + i, m))
        cid += len(msgs)
        con.send(0, disposition(True, first, cid - 1))
    for conn in (pub, con):
        conn.send(0, frame(_desc(0x18, b"\x45")))
        conn.send(1, frame(_desc(0x18, b"\x45")))
    return n
