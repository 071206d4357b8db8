"""Method round trips (synchronous request -> response) and connection setup latency.

docs/analysis.md has the exact definitions.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis._common import (
    STR,
    TS_DTYPE,
    build,
    covered,
    ordered,
    records,
    spec_by_name,
)
from amqpcap.analysis.batches import tables
from amqpcap.analysis.pairing import (
    BASE_COLS,
    BY_ID,
    CLOSE,
    CLOSE_OK,
    METHOD_COLUMNS,
    SCOPE_OPEN,
    NotStreamed,
    finish,
)
from amqpcap.analysis.tables import CATEGORICAL_COLUMNS, arrow_to_pandas, as_tables, empty_frame, load_section

# method round trips

RTT_COLS = dict(BASE_COLS, status=STR, command_id="Int64")


def method_rtt(t) -> pd.DataFrame:
    """Synchronous request -> response on the same conversation and channel.

    Responses come from the specification tables (``MethodSpec.responses``).
    Asynchronous methods (deliver, ack, publish, ...) may interleave and are
    ignored.  ``status``: ``ok`` (a listed response), ``error`` (the peer
    closed the channel / connection instead; the response is that close),
    ``missing`` (no response before the channel was closed or the capture
    ended; NaN latency).  Requests sent with ``no-wait`` expect no response
    and are left out.  0-10: execution.sync -> the first session.completed
    from the peer whose command set covers the sync's command id; any command
    -> execution.result (``ok``) / execution.exception (``error``) whose
    ``answers_command_id`` is its command id.
    """
    t = as_tables(t)
    m = t.methods
    cols = METHOD_COLUMNS + [
        "command_id",
        "answers_command_id",
        "id_ranges",
        "no_wait",
        "synchronous",
    ]
    m = _relevant(m, cols)
    rows: list[dict] = []
    if len(m) == 0:
        return finish(rows, RTT_COLS)

    state: dict = {}  # (capture, stream) -> {channel: [pending request dicts]}
    commands: dict = {}  # (capture, stream, channel, direction) -> {command_id: request dict} (0-10)

    def emit(req, resp, status):
        req["done"] = True
        rows.append(
            dict(
                capture=req["capture"],
                tcp_stream=req["tcp_stream"],
                channel=req["channel"],
                version=req["version"],
                request_method=req["method"],
                request_direction=req["direction"],
                request_frame=req["frame"],
                request_ts=req["ts"],
                response_method=resp[4] if resp else None,
                response_frame=resp[5] if resp else None,
                response_ts=resp[6] if resp else None,
                status=status,
                command_id=req.get("command_id"),
            )
        )

    def flush(pend: list, status="missing"):
        for req in pend:
            if not req["done"]:
                emit(req, None, status)
        pend.clear()

    for r in records(m, cols):
        cap, st, ch, d, name, frame, ts, version, cmd, answers, id_ranges, no_wait, synchronous = r
        conn = state.setdefault((cap, st), {})
        pend = conn.setdefault(ch, [])
        specs = spec_by_name(version)
        matched = False

        # 1. a response listed by the spec for the oldest pending request of the peer
        # (0-10 results and completions are matched by command id below, never by name)
        for i, req in enumerate(pend if name not in BY_ID else ()):
            if req["direction"] != d and name in req["responses"]:
                emit(req, r, "ok")
                del pend[i]
                matched = True
                break

        # 2. 0-10 specials
        if name == "session.completed":
            for req in list(pend):
                if (
                    req["sync"]
                    and req["direction"] != d
                    and req.get("command_id") is not None
                    and covered(req["command_id"], id_ranges)
                ):
                    emit(req, r, "ok")
                    pend.remove(req)
        elif name in ("execution.result", "execution.exception") and answers is not None:
            peer = "s2c" if d == "c2s" else "c2s"
            req = commands.get((cap, st, ch, peer), {}).pop(answers, None)
            if req is not None and not req["done"]:
                emit(req, r, "ok" if name == "execution.result" else "error")
                if req in pend:
                    pend.remove(req)
                matched = True

        # 3. the peer closed instead of answering
        if not matched and name in CLOSE:
            targets = [pend] if name == "channel.close" else list(conn.values())
            for lst in targets:
                for req in list(lst):
                    if req["direction"] != d:
                        emit(req, r, "error")
                        lst.remove(req)

        # 4. a close-ok ends the channel (connection): whatever is left got no answer
        if name == "channel.close-ok":
            flush(pend)
        elif name == "connection.close-ok":
            for lst in conn.values():
                flush(lst)
        elif name in SCOPE_OPEN:
            flush(pend)

        # 5. is this a request?  (a request waits for its response; any other 0-10 command may
        # still get an execution.result: it is remembered by command id, not reported if unanswered)
        req, is_request = _request(r, specs)
        if req is None:
            continue
        if is_request:
            pend.append(req)
        if cmd is not None:
            commands.setdefault((cap, st, ch, d), {})[cmd] = req

    for conn in state.values():
        for lst in conn.values():
            flush(lst)
    df = finish(rows, RTT_COLS)
    return df.sort_values(["capture", "tcp_stream", "request_frame"], kind="stable").reset_index(drop=True)


def _relevant(m: pd.DataFrame, cols: list) -> pd.DataFrame:
    """The ``cols`` of the rows of ``m`` a round trip can involve, in wire order: 0-8 / 0-9 / 0-9-1
    requests, their responses and closes (not publishes, ...), and every 0-10 command."""
    if len(m) == 0:
        return m
    relevant = relevant_methods(m["version"].dropna().unique())
    is_010 = (m["version"] == "0-10").fillna(False).to_numpy(dtype=bool)
    return ordered(m, columns=cols, rows=is_010 | m["method"].isin(relevant).to_numpy(dtype=bool))


def relevant_methods(versions) -> set:
    """The methods a round trip of these versions can involve (0-10 aside): requests, their
    responses, closes and reopenings."""
    relevant = set(CLOSE + CLOSE_OK + SCOPE_OPEN)
    for v in versions:
        for name, spec in spec_by_name(v).items():
            if getattr(spec, "responses", ()):
                relevant.add(name)
                relevant.update(spec.responses)
    return relevant


def method_rtt_of_output(directory, columns: dict) -> pd.DataFrame:
    """:func:`method_rtt` of a dissect output, loading only the rows it can involve (``columns``:
    the load's, see :func:`~amqpcap.analysis.tables.load_section`); a table with 0-10 rows (any
    command may be answered) raises :class:`~amqpcap.analysis.pairing.NotStreamed`."""
    versions: set = set()
    for b in tables(directory, "methods", ["version"]):
        col = b.column("version").combine_chunks()
        col = col.dictionary if pa.types.is_dictionary(col.type) else pc.unique(col)
        versions.update(v for v in col.to_pylist() if v is not None)
    if "0-10" in versions:
        raise NotStreamed("0-10 commands: every one may be answered")
    return method_rtt(section_rows(directory, columns, {"methods": relevant_methods(versions)}))


def section_rows(directory, columns: dict, names: dict):
    """:func:`~amqpcap.analysis.tables.load_section` of a dissect output, the tables in ``names``
    read batch by batch, keeping only the rows of their methods: what is held is one batch and
    the rows kept, not a whole column of the table."""
    t = load_section(directory, {k: v for k, v in columns.items() if k not in names})
    read = {k: _rows_named(directory, k, list(columns[k]), names[k]) for k in names}
    return dataclasses.replace(t, **read)


def _rows_named(directory, name: str, columns: list, names) -> pd.DataFrame:
    """The rows of table ``name`` whose method is one of ``names``, typed as a section load
    types them, read batch by batch: what is held is one batch and the rows kept."""
    parts = list(tables(directory, name, columns, methods=names))
    if not parts:
        return empty_frame(name, columns, CATEGORICAL_COLUMNS, True)
    return arrow_to_pandas(
        pa.concat_tables(parts, promote_options="permissive"), name, columns, CATEGORICAL_COLUMNS, True
    )


def _request(r: tuple, specs: dict) -> tuple[dict | None, bool]:
    """(the pending-request record of method row ``r``, whether it is a request awaiting a
    response); (None, False) when it is neither a request nor a 0-10 command, or is sent no-wait."""
    cap, st, ch, d, name, frame, ts, version, cmd, answers, id_ranges, no_wait, synchronous = r
    spec = specs.get(name)
    responses = tuple(spec.responses) if spec is not None else ()
    result = getattr(spec, "result", None)
    # 0-10: execution.sync, and any command sent with the sync flag, is answered by session.completed
    is_sync = name == "execution.sync" or (
        version == "0-10" and cmd is not None and bool(synchronous) and not responses and result is None
    )
    is_request = bool(responses or is_sync or result is not None) and name not in CLOSE_OK
    if (is_request and no_wait) or not (is_request or (cmd is not None and version == "0-10")):
        return None, False
    req = dict(
        capture=cap,
        tcp_stream=st,
        channel=ch,
        direction=d,
        method=name,
        frame=frame,
        ts=ts,
        version=version,
        responses=frozenset(responses if is_request else ()),
        sync=is_request and is_sync,
        command_id=cmd,
        done=False,
    )
    return req, is_request


# connection setup

SETUP_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "version": STR,
    "client_ip": STR,
    "client_port": "Int32",
    "server_ip": STR,
    "server_port": "Int32",
    "request_method": STR,
    "request_frame": "Int64",
    "request_ts": TS_DTYPE,
    "response_method": STR,
    "response_frame": "Int64",
    "response_ts": TS_DTYPE,
    "latency_ms": "float64",
    "status": STR,
}


def connection_setup(t) -> pd.DataFrame:
    """TCP SYN (``connections.syn_ts``) -> connection.open-ok (``open_ts``), one row per
    conversation whose SYN was captured.  ``status`` ``ok`` or ``missing``
    (never opened: NaN latency).  ``request_frame`` is the conversation's first
    packet (the SYN), ``response_frame`` the first connection.open-ok packet."""
    t = as_tables(t)
    c = t.connections
    if len(c) == 0:
        return build([], SETUP_COLS)
    c = c[c["syn_ts"].notna()]
    m = t.methods
    ok = (
        m[m["method"] == "connection.open-ok"]
        .groupby(["capture", "tcp_stream"], sort=False, observed=True)["frame_number"]
        .min()
    )
    okmap = ok.to_dict()
    rows = []
    cols = [
        "capture",
        "tcp_stream",
        "version",
        "client_ip",
        "client_port",
        "server_ip",
        "server_port",
        "frame_number",
        "syn_ts",
        "open_ts",
    ]
    for cap, st, v, cip, cport, sip, sport, frame, syn, opn in records(c, cols):
        rows.append(
            dict(
                capture=cap,
                tcp_stream=st,
                channel=0,
                version=v,
                client_ip=cip,
                client_port=cport,
                server_ip=sip,
                server_port=sport,
                request_method="tcp.syn",
                request_frame=frame,
                request_ts=syn,
                response_method="connection.open-ok" if opn is not None else None,
                response_frame=okmap.get((cap, st)) if opn is not None else None,
                response_ts=opn,
                status="ok" if opn is not None else "missing",
            )
        )
    return finish(rows, SETUP_COLS)
