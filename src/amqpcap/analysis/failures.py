"""Errors: every failure the tables record, one row each, with the code's name and class."""

from __future__ import annotations

import pandas as pd

from amqpcap.analysis._common import (
    STR,
    TS_DTYPE,
    build,
    code_info,
    ns,
    ordered,
    records,
    spec_module,
)
from amqpcap.analysis.amqp10 import CONDITION_COLUMNS, KIND, condition_name, condition_rows
from amqpcap.analysis.tables import as_tables

__all__ = ["errors", "error_summary", "order_error_summary", "ERROR_COLS", "SUMMARY_COLS", "ERROR_METHODS"]

ERROR_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "frame_number": "Int64",
    "ts": TS_DTYPE,
    "direction": STR,
    "channel": "Int32",
    "version": STR,
    "kind": STR,
    "method": STR,
    "code": "Int32",
    "name": STR,
    "class": STR,
    "failing_method": STR,
    "text": STR,
    "condition": STR,
    "description": STR,
}

# method -> (kind, 0-10 code table consulted first)
_CODED = {
    "connection.close": ("connection-close", "CLOSE_CODES"),
    "channel.close": ("channel-close", None),
    "basic.return": ("return", None),
    "execution.exception": ("execution-exception", "ERROR_CODES"),
    "session.detached": ("session-detached", "DETACH_CODES"),
    "session.detach": ("session-detached", "DETACH_CODES"),
    "message.reject": ("reject", None),
}
_UNCODED = {"basic.nack": "nack", "basic.reject": "reject"}
ERROR_METHODS = (*_CODED, *_UNCODED)  # the methods whose rows errors reads (0-10 aside)
_OK = {0, 200}  # 0: what some 0-8 clients (py-amqplib) send on a normal close
_OK_0_10 = {"connection.close": {200}, "session.detached": {0}, "session.detach": {0}}


def _domain_name(version, domain, code):
    mod = spec_module(version)
    dom = getattr(mod, "DOMAINS", {}).get(domain) if mod is not None else None
    for value, name in getattr(dom, "choices", ()) or ():
        if value == code:
            return (name, None)
    return None


def errors(t) -> pd.DataFrame:
    """One row per failure, in capture order.

    ``kind``: ``connection-close`` / ``channel-close`` (reply code other than
    200, and other than 0, which some 0-8 clients send on a normal close),
    ``return`` (basic.return), ``nack`` / ``reject`` (basic.nack, basic.reject,
    0-10 message.reject; no code except 0-10 reject), ``execution-exception``
    (0-10), ``session-detached`` (0-10 session.detached with a code other than
    0 normal), ``tcp-reset`` (``connections.rst``, unless the conversation was
    already closed by connection.close: ``closed_by`` ``client`` / ``server``),
    ``protocol-rejected`` (``connections.negotiation == "rejected"``; the TCP
    reset that follows is not reported again).

    ``code`` / ``name`` / ``class`` (``soft`` / ``hard``; null when the spec gives
    none) come from the spec tables of the conversation's version (0-10: the
    table of the method: connection.close codes, execution error codes, detach
    codes).  ``failing_method``: the method the peer objected to (close
    class-id / method-id; 0-10 execution.exception: the command named by
    ``answers_command_id``; basic.return: ``basic.publish``; a publisher nack:
    ``basic.publish``; a consumer nack / reject: ``basic.deliver``).
    ``frame_number`` is the RST packet for TCP resets (``connections.rst_frame``, its
    sender ``rst_by`` gives ``direction`` and the text; ``ts`` is the conversation's last
    packet) and the conversation's first packet for rejected protocol headers.

    AMQP 1.0 (``kind`` ``amqp-1.0``): an error condition of close, end, detach or a rejected
    outcome, or a SASL outcome other than ok (``sasl:auth``, ...), as stats' 1.0 ``errors``
    entries count them: ``condition`` and ``description`` (also in ``text``) in place of a
    code, ``name`` the condition's in the specification, ``method`` the performative.
    """
    t = as_tables(t)
    rows = _method_failures(t.methods) + _condition_failures(t.methods)
    rows += _resets(t.connections) + _rejected_headers(t.connections)
    for r in rows:
        r["class"] = r.pop("cls", None)
    df = build(rows, ERROR_COLS)
    if len(df):
        df["_ts"] = ns(df["ts"])
        df = (
            df.sort_values(["capture", "_ts", "tcp_stream"], kind="stable")
            .drop(columns="_ts")
            .reset_index(drop=True)
        )
    return df


def _method_failures(m: pd.DataFrame) -> list[dict]:
    """The rows of ``errors`` the methods give (closes, returns, nacks, rejects, 0-10
    exceptions and detaches), in method order."""
    rows: list[dict] = []
    sub = ordered(m, ERROR_METHODS) if len(m) else m
    if len(sub):
        # 0-10: find the command an execution.exception answers
        cmds = {}
        if (m["version"] == "0-10").any() and m["command_id"].notna().any():
            c10_cols = ["capture", "tcp_stream", "channel", "direction", "command_id", "method"]
            c10 = ordered(m, columns=c10_cols, rows=m["command_id"].notna().to_numpy(dtype=bool))
            for cap, st, ch, d, cid, meth in records(c10, c10_cols):
                cmds[(cap, st, ch, d, cid)] = meth
        cols = [
            "capture",
            "tcp_stream",
            "frame_number",
            "ts",
            "direction",
            "channel",
            "version",
            "method",
            "reply_code",
            "reply_text",
            "reply_name",
            "failing_method",
            "answers_command_id",
            "code",
            "text",
        ]
        for r in records(sub, cols):
            cap, st, frame, ts, d, ch, ver, meth, code, text, rname, failing, answers, code2, text2 = r
            # 0-10 session.detached and message.reject carry `code` / `text`, not reply-code / reply-text
            code = code if code is not None else code2
            text = text if text is not None else text2
            if meth in _UNCODED:
                kind = _UNCODED[meth]
                if failing is None:
                    failing = "basic.publish" if (meth == "basic.nack" and d == "s2c") else "basic.deliver"
                rows.append(
                    _failure(cap, st, frame, ts, d, ch, ver, kind, meth, failing_method=failing, text=text)
                )
                continue
            kind, table = _CODED[meth]
            ok = _OK_0_10.get(meth, set()) if ver == "0-10" else _OK
            if meth in ("connection.close", "channel.close", "session.detached", "session.detach") and (
                code is None or code in ok
            ):
                continue
            if meth == "session.detach" and code is None:
                continue
            if meth == "message.reject" and ver == "0-10":
                info = _domain_name(ver, "message.reject-code", code)
            else:
                info = code_info(ver, code, table if ver == "0-10" else None)
            name = rname or (info[0] if info else None)
            cls = info[1] if info else None
            if meth == "basic.return" and failing is None:
                failing = "basic.publish"
            if meth == "execution.exception" and failing is None and answers is not None:
                peer = "c2s" if d == "s2c" else "s2c"
                failing = cmds.get((cap, st, ch, peer, answers))
            if meth == "message.reject":
                failing = failing or "message.transfer"
            rows.append(
                _failure(
                    cap,
                    st,
                    frame,
                    ts,
                    d,
                    ch,
                    ver,
                    kind,
                    meth,
                    code=code,
                    name=name,
                    cls=cls,
                    failing_method=failing,
                    text=text,
                )
            )
    return rows


def _condition_failures(m: pd.DataFrame) -> list[dict]:
    """The 1.0 rows of ``errors`` (:func:`~amqpcap.analysis.amqp10.condition_rows`)."""
    if len(m) == 0 or "condition" not in m:  # (a load without the 1.0 columns: no 1.0 row read)
        return []
    rows = []
    cols = CONDITION_COLUMNS + ["condition", "reply_text"]
    for cap, st, frame, ts, d, ch, method, cond, desc in records(condition_rows(m), cols):
        rows.append(
            _failure(
                cap,
                st,
                frame,
                ts,
                d,
                ch,
                "1.0",
                KIND,
                method,
                name=condition_name(cond),
                text=desc,
                condition=cond,
                description=desc,
            )
        )
    return rows


def _failure(cap, st, frame, ts, direction, channel, version, kind, method, **fields) -> dict:
    """A row of ``errors``: where it was (capture, stream, frame, time, direction, channel), the
    version, its kind and the method that carried it, then the kind's own ``fields``."""
    return dict(
        capture=cap,
        tcp_stream=st,
        frame_number=frame,
        ts=ts,
        direction=direction,
        channel=channel,
        version=version,
        kind=kind,
        method=method,
        **fields,
    )


def _connection_failure(cap, st, frame, ts, direction, version, kind: str, text: str) -> dict:
    """A failure of the whole conversation (no method, no channel): ``kind`` is its name too,
    and it is hard."""
    return _failure(
        cap, st, frame, ts, direction, None, version, kind, None, name=kind, cls="hard", text=text
    )


def _resets(c: pd.DataFrame) -> list[dict]:
    """The ``tcp-reset`` rows: a reset conversation not closed by connection.close before it,
    nor rejected at its protocol header (that failure is reported as such)."""
    rows: list[dict] = []
    if not len(c):
        return rows
    rst = c[c["rst"].fillna(False).astype(bool)]
    rst = rst[rst["negotiation"] != "rejected"]  # the reset that follows a rejected header is that failure
    cols = ["capture", "tcp_stream", "end_ts", "version", "closed_by", "rst_by", "rst_frame"]
    for cap, st, end, ver, closed_by, who, frame in records(rst, cols):
        if closed_by in ("client", "server"):
            continue  # reset after an AMQP connection.close: socket teardown, not a failure
        direction = {"client": "c2s", "server": "s2c"}.get(who)
        text = f"reset by {who}" if who else "reset"
        rows.append(_connection_failure(cap, st, frame, end, direction, ver, "tcp-reset", text))
    return rows


def _rejected_headers(c: pd.DataFrame) -> list[dict]:
    """The ``protocol-rejected`` rows: the server answered the client's header with its own."""
    rows: list[dict] = []
    if not len(c):
        return rows
    rej = c[c["negotiation"] == "rejected"]
    for cap, st, frame, ts, ver, ch_, sh in records(
        rej,
        [
            "capture",
            "tcp_stream",
            "frame_number",
            "ts",
            "client_version",
            "client_header",
            "server_header",
        ],
    ):
        text = f"client sent {ch_}, server answered {sh}"
        rows.append(_connection_failure(cap, st, frame, ts, "s2c", ver, "protocol-rejected", text))
    return rows


SUMMARY_COLS = {
    "kind": STR,
    "code": "Int32",
    "name": STR,
    "class": STR,
    "method": STR,
    "failing_method": STR,
    "text": STR,
    "condition": STR,
    "description": STR,
    "count": "Int64",
    "first_capture": STR,
    "first_tcp_stream": "Int32",
    "first_frame": "Int64",
    "first_ts": TS_DTYPE,
}


def error_summary(t, err: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each distinct error once: (``kind``, ``code``, ``name``, ``class``, ``method``, ``failing_method``,
    ``text``, and of AMQP 1.0 ``condition``, ``description``) with
    its ``count`` and where it first happened (``first_capture``, ``first_tcp_stream``,
    ``first_frame``: Wireshark ``frame.number``, ``first_ts``); most frequent first.
    ``err``: a precomputed :func:`errors` frame."""
    err = errors(t) if err is None else err
    keys = ["kind", "code", "name", "class", "method", "failing_method", "text", "condition", "description"]
    if len(err) == 0:
        return build([], SUMMARY_COLS)
    counts = err.groupby(
        keys, dropna=False, sort=False, observed=True
    ).size()  # groups in order of first appearance
    out = err.drop_duplicates(keys, keep="first").reset_index(drop=True)  # errors() is in capture order
    out = out.rename(
        columns={
            "capture": "first_capture",
            "tcp_stream": "first_tcp_stream",
            "frame_number": "first_frame",
            "ts": "first_ts",
        }
    )
    out["count"] = counts.to_numpy()
    return order_error_summary(out)


def order_error_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`error_summary`'s row order (most frequent first, then code, kind, method, first
    occurrence; ties stay in the order given), for summaries aggregated elsewhere (Spark)."""
    out = summary.assign(_code=summary["code"].fillna(10**9))
    out = out.sort_values(
        ["count", "_code", "kind", "method", "first_ts"],
        ascending=[False, True, True, True, True],
        kind="stable",
        na_position="last",
    )
    out = out.drop(columns="_code").reset_index(drop=True)
    return out[list(SUMMARY_COLS)]
