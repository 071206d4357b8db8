"""Connection facts and credentials, for every AMQP version.

The codecs hand each decoded ``Method`` to one ``FactLearner`` per connection.  It keeps
what the connection row reports (negotiated limits, peer properties, user, vhost, how it
was closed) and applies the redaction policy: the one place where secrets are taken out
of method arguments.  ``ConnectionFacts`` (values.py) is the frozen snapshot the records
stage consumes.
"""

from __future__ import annotations

from amqpcap.values import ConnectionFacts

REDACTED = "<redacted>"
# Arguments whose values are secrets (redacted unless keep_secrets): method name -> argument.
SECRET_ARGS = {
    "connection.start-ok": "response",
    "connection.secure-ok": "response",
    "connection.update-secret": "new-secret",
}


def _text(b) -> str:
    return bytes(b).decode("utf-8", "replace")


def split_credentials(mechanism: str | None, response, rabbit: bool = True):
    """(user, password) from a PLAIN, AMQPLAIN or CRAM-MD5 SASL response; (None, None) if unknown."""
    from amqpcap.amqp.fields_0_9 import DecodeError, decode_table  # AMQPLAIN: a 0-9 field table

    raw = response.encode() if isinstance(response, str) else bytes(response or b"")
    mech = (mechanism or "").upper()
    if mech == "PLAIN" or (mechanism is None and raw.count(b"\0") == 2):
        parts = raw.split(b"\0")
        if len(parts) == 3:
            return _text(parts[1]), _text(parts[2])
    elif mech == "AMQPLAIN":
        try:
            t = decode_table(len(raw).to_bytes(4, "big") + raw, rabbit)
            return t.get("LOGIN"), t.get("PASSWORD")
        except DecodeError:
            pass
    elif mech == "CRAM-MD5" and b" " in raw:
        user, _, digest = raw.rpartition(b" ")
        return _text(user), _text(digest)
    return None, None


# connection.tune / tune-ok argument -> fact (0-10 names the frame size max-frame-size)
_TUNE = (
    ("channel-max", "channel_max"),
    ("frame-max", "frame_max"),
    ("max-frame-size", "frame_max"),
    ("heartbeat", "heartbeat"),
)


class FactLearner:
    """Learns ``ConnectionFacts`` from the methods of one connection, and redacts secrets."""

    def __init__(self, keep_secrets: bool = False, rabbit: bool = True) -> None:
        self.keep_secrets = keep_secrets
        self.rabbit = rabbit
        self.v: dict = {}  # fact name -> value
        self._tuned: set = set()  # facts connection.tune-ok has set (they win over tune's proposal)
        self.handlers = {
            "connection.start": self._start,
            "connection.start-ok": self._start_ok,
            "connection.tune": self._tune,
            "connection.tune-ok": self._tune,
            "connection.open": self._open,
            "connection.open-ok": self._open_ok,
            "connection.close": self._close,
        }

    def snapshot(self) -> ConnectionFacts:
        return ConnectionFacts(**self.v)

    def redact(self, name: str, args: dict) -> None:
        """Take the secret out of a connection.start-ok / secure-ok / update-secret (in place),
        keeping the user it names."""
        key = SECRET_ARGS[name]
        if name == "connection.start-ok":
            self.v["mechanism"] = args.get("mechanism")
        if key not in args:
            return
        user, _password = split_credentials(self.v.get("mechanism"), args[key], self.rabbit)
        if user is not None:
            self.v["user"] = user
        if not self.keep_secrets:
            args[key] = {"user": user, "password": REDACTED} if user is not None else REDACTED

    def _start(self, direction, m) -> None:
        self.v["server_properties"] = m.args.get("server-properties")
        if "version-major" in m.args:
            self.v["start_version"] = (m.args["version-major"], m.args.get("version-minor"))

    def _start_ok(self, direction, m) -> None:
        self.v["client_properties"] = m.args.get("client-properties")
        self.v["mechanism"] = m.args.get("mechanism")

    def _tune(self, direction, m) -> None:
        # the server's proposal, then what connection.tune-ok says wins (the two directions
        # may be decoded in either order); 0-10's tune-ok without a heartbeat asks for none
        ok = m.name == "connection.tune-ok"
        for src, dst in _TUNE:
            if src in m.args and (ok or dst not in self._tuned):
                self.v[dst] = m.args[src]
                if ok:
                    self._tuned.add(dst)
        if ok and "heartbeat" not in m.args:
            self.v["heartbeat"] = 0
            self._tuned.add("heartbeat")

    def _open(self, direction, m) -> None:
        self.v["vhost"] = m.args.get("virtual-host")

    def _open_ok(self, direction, m) -> None:
        self.v["open_ts"] = m.ts

    def _close(self, direction, m) -> None:
        if "close_ts" not in self.v:
            a = m.args
            self.v.update(
                close_ts=m.ts,
                closed_by="client" if direction == 0 else "server",
                close_frame=m.packet,
                close_reply_code=a.get("reply-code"),
                close_reply_text=a.get("reply-text"),
            )
