"""Fixture factory: tiny tables that match amqpcap.records.schema exactly.

Rows get defaults for every schema column; the DataFrames go through the same
Arrow -> pandas conversion as ``amqpcap.load`` so the dtypes are the real ones.

    c = Capture()
    c.method(0, "c2s", "queue.declare", channel=1, queue="q")
    c.method(3, "s2c", "queue.declare-ok", channel=1)
    t = c.tables()

Times are milliseconds from T0; frame numbers are assigned in call order
(override with ``frame=``).  Methods with content also get a ``messages`` row
(completed in the same packet unless ``done_ms`` / ``done_frame`` say otherwise).
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa

from amqpcap.analysis.tables import arrow_to_pandas, from_frames
from amqpcap.records.rows import ARG_COLUMNS, arg_columns
from amqpcap.records.schema import SCHEMAS

T0 = pd.Timestamp("2024-05-01T12:00:00", tz="UTC")
T0_NS = T0.value

# (class_id, method_id, synchronous, has_content) of the methods the tests use, so the
# factory does not depend on the generated spec tables.
IDS = {
    "connection.start": (10, 10, True, False),
    "connection.start-ok": (10, 11, True, False),
    "connection.tune": (10, 30, True, False),
    "connection.tune-ok": (10, 31, True, False),
    "connection.open": (10, 40, True, False),
    "connection.open-ok": (10, 41, True, False),
    "connection.close": (10, 50, True, False),
    "connection.close-ok": (10, 51, True, False),
    "connection.blocked": (10, 60, False, False),
    "connection.unblocked": (10, 61, False, False),
    "channel.open": (20, 10, True, False),
    "channel.open-ok": (20, 11, True, False),
    "channel.flow": (20, 20, True, False),
    "channel.flow-ok": (20, 21, False, False),
    "channel.close": (20, 40, True, False),
    "channel.close-ok": (20, 41, True, False),
    "exchange.declare": (40, 10, True, False),
    "exchange.declare-ok": (40, 11, True, False),
    "queue.declare": (50, 10, True, False),
    "queue.declare-ok": (50, 11, True, False),
    "queue.bind": (50, 20, True, False),
    "queue.bind-ok": (50, 21, True, False),
    "basic.qos": (60, 10, True, False),
    "basic.qos-ok": (60, 11, True, False),
    "basic.consume": (60, 20, True, False),
    "basic.consume-ok": (60, 21, True, False),
    "basic.cancel": (60, 30, True, False),
    "basic.cancel-ok": (60, 31, True, False),
    "basic.publish": (60, 40, False, True),
    "basic.return": (60, 50, False, True),
    "basic.deliver": (60, 60, False, True),
    "basic.get": (60, 70, True, False),
    "basic.get-ok": (60, 71, True, True),
    "basic.get-empty": (60, 72, True, False),
    "basic.ack": (60, 80, False, False),
    "basic.reject": (60, 90, False, False),
    "basic.recover": (60, 110, False, False),
    "basic.nack": (60, 120, False, False),
    "confirm.select": (85, 10, True, False),
    "confirm.select-ok": (85, 11, True, False),
    # 0-10
    "session.attach": (2, 1, False, False),
    "session.attached": (2, 2, False, False),
    "session.detach": (2, 3, False, False),
    "session.detached": (2, 4, False, False),
    "session.completed": (2, 10, False, False),
    "execution.sync": (3, 1, False, False),
    "execution.result": (3, 2, False, False),
    "execution.exception": (3, 3, False, False),
    "message.transfer": (4, 1, False, True),
    "message.accept": (4, 2, False, False),
    "message.reject": (4, 3, False, False),
    "message.release": (4, 4, False, False),
    "message.subscribe": (4, 7, False, False),
    "queue.query": (8, 4, False, False),
}

# typed columns that are also arguments (spec spelling)
_ARG_COLS = {
    "exchange": "exchange",
    "routing_key": "routing-key",
    "queue": "queue",
    "consumer_tag": "consumer-tag",
    "delivery_tag": "delivery-tag",
    "multiple": "multiple",
    "requeue": "requeue",
    "redelivered": "redelivered",
    "no_ack": "no-ack",
    "mandatory": "mandatory",
    "reply_code": "reply-code",
    "reply_text": "reply-text",
    "prefetch_count": "prefetch-count",
    "prefetch_size": "prefetch-size",
}

_MSG_COLS = set(c.name for c in SCHEMAS["messages"])


def defaults(table: str) -> dict:
    return {f.name: None for f in SCHEMAS[table]}


def frame(table: str, rows: list[dict]) -> pd.DataFrame:
    """DataFrame of ``table`` from row dicts (unknown keys rejected, missing ones null)."""
    names = set(SCHEMAS[table].names)
    full = []
    for r in rows:
        bad = set(r) - names
        assert not bad, f"{table}: no such columns {bad}"
        d = defaults(table)
        d.update(r)
        for k, v in d.items():
            if isinstance(v, pd.Timestamp):
                d[k] = v.value  # int ns: exact
        full.append(d)
    return arrow_to_pandas(pa.Table.from_pylist(full, schema=SCHEMAS[table]), table)


def at(ms: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(milliseconds=ms)


class Capture:
    """Builds the tables of one small synthetic capture."""

    def __init__(self, capture: str = "t.pcap", version: str = "0-9-1"):
        self.capture = capture
        self.version = version
        self.rows: dict[str, list[dict]] = {n: [] for n in SCHEMAS}
        self.frame = 0
        self.offsets: dict = {}

    def _next_frame(self, frame):
        if frame is None:
            self.frame += 1
            return self.frame
        self.frame = max(self.frame, frame)
        return frame

    def _offset(self, stream, direction, size):
        k = (stream, direction)
        off = self.offsets.get(k, 8)
        self.offsets[k] = off + size
        return off

    def method(
        self,
        ms,
        direction,
        name,
        channel=1,
        stream=0,
        frame=None,
        args=None,
        version=None,
        body=b"",
        props=None,
        done_ms=None,
        done_frame=None,
        **cols,
    ):
        """Add a methods row (and a messages row for content methods); returns the methods row."""
        version = version or self.version
        cid, mid, sync, content = IDS[name]
        frame = self._next_frame(frame)
        a = dict(args or {})
        for c, an in _ARG_COLS.items():
            if c in cols and cols[c] is not None and an not in a:
                a[an] = cols[c]
        size = cols.pop("frame_size", 20)
        row = dict(
            capture=self.capture,
            tcp_stream=stream,
            frame_number=frame,
            ts=at(ms),
            direction=direction,
            channel=channel,
            stream_offset=self._offset(stream, direction, size + 8),
            method=name,
            class_id=cid,
            method_id=mid,
            version=version,
            synchronous=sync,
            has_content=content,
            frame_size=size,
            arguments=json.dumps(a),
        )
        row.update(zip(ARG_COLUMNS, arg_columns(a)))  # the typed argument columns, as dissect fills them
        row.update({k: v for k, v in cols.items() if k not in _MSG_ONLY})
        self.rows["methods"].append(row)
        if content:
            self._message(row, body, props or {}, done_ms, done_frame, cols)
        return row

    def _message(self, mrow, body, props, done_ms, done_frame, cols):
        import hashlib

        frame = mrow["frame_number"] if done_frame is None else self._next_frame(done_frame)
        ts = mrow["ts"] if done_ms is None else at(done_ms)
        msg = dict(
            capture=mrow["capture"],
            tcp_stream=mrow["tcp_stream"],
            frame_number=frame,
            ts=ts,
            direction=mrow["direction"],
            channel=mrow["channel"],
            stream_offset=mrow["stream_offset"],
            method=mrow["method"],
            version=mrow["version"],
            body_size=len(body),
            body_received=len(body),
            body_frames=1 if body else 0,
            body_hash=hashlib.sha256(body).hexdigest(),
            body=body[:64],
            complete=True,
            first_frame_number=mrow["frame_number"],
            last_frame_number=frame,
            properties=json.dumps(props),
        )
        for k in ("exchange", "routing_key", "consumer_tag", "delivery_tag", "redelivered", "reply_code"):
            msg[k] = mrow.get(k)
        for k, v in cols.items():
            if k in _MSG_COLS and k not in msg or k in _MSG_ONLY:
                msg[k] = v
        self.rows["messages"].append(msg)

    def connection(self, stream=0, **cols):
        row = dict(
            capture=self.capture,
            tcp_stream=stream,
            frame_number=1,
            ts=at(0),
            client_ip="10.0.0.1",
            client_port=40000 + stream,
            server_ip="10.0.0.2",
            server_port=5672,
            ip_version=4,
            direction_source="header",
            client_header="00000901",
            client_version=self.version,
            version=self.version,
            version_evidence="header",
            negotiation="accepted",
            tls=False,
            mid_stream=False,
            rst=False,
            gaps=0,
            gap_bytes=0,
            anomalies=0,
        )
        row.update(cols)
        self.rows["connections"].append(row)
        return row

    def frame_row(
        self,
        ms,
        direction,
        type_name="heartbeat",
        channel=0,
        stream=0,
        size=0,
        wire_size=8,
        frame=None,
        frame_type=None,
    ):
        frame = self._next_frame(frame)
        ft = (
            frame_type
            if frame_type is not None
            else {"method": 1, "header": 2, "body": 3, "heartbeat": 8}.get(type_name, 0)
        )
        row = dict(
            capture=self.capture,
            tcp_stream=stream,
            frame_number=frame,
            ts=at(ms),
            direction=direction,
            channel=channel,
            stream_offset=self._offset(stream, direction, wire_size),
            frame_type=ft,
            type_name=type_name,
            size=size,
            wire_size=wire_size,
        )
        self.rows["frames"].append(row)
        return row

    def anomaly(self, ms, kind, stream=0, **cols):
        row = dict(
            capture=self.capture,
            tcp_stream=stream,
            frame_number=self._next_frame(None),
            ts=at(ms),
            direction="c2s",
            layer="amqp",
            kind=kind,
            detail=kind,
            skipped_bytes=0,
        )
        row.update(cols)
        self.rows["anomalies"].append(row)

    def tables(self, frames: bool | None = None):
        dfs = {}
        for name, rows in self.rows.items():
            if name == "frames" and not rows and not frames:
                continue
            dfs[name] = frame(name, rows)
        return from_frames(**dfs)


# message-only property columns accepted by Capture.method for content methods
_MSG_ONLY = {
    "message_id",
    "correlation_id",
    "reply_to",
    "content_type",
    "headers",
    "delivery_mode",
    "priority",
    "expiration",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
    "msg_timestamp",
    "content_encoding",
}


def rows(df: pd.DataFrame, cols: list[str]) -> list[tuple]:
    """``df[cols]`` as plain tuples, missing values as None (for exact comparisons)."""
    sub = df[cols].astype(object)
    return [tuple(None if pd.isna(v) else v for v in r) for r in sub.itertuples(index=False, name=None)]
