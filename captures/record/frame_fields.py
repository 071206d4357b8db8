"""A client's own reading of a frame -> the frame's fields by their specification names.

rhea logs a performative as its positional list of fields; Qpid Proton logs a text form
(``@transfer(20) [handle=0x0, delivery-id=0x1, more=true] (payload)``). Both become
``{"handle": 0, "delivery-id": 1, "more": true, ...}`` with described values (outcomes, error,
source, target) as ``{"descriptor": "accepted", ...fields}``, so the truth of every capture has
one shape whatever the client.
"""

from __future__ import annotations

import re

# descriptor code -> the name a frame has in the truth files (performatives and SASL frames)
PERFORMATIVES = {
    0x10: "open",
    0x11: "begin",
    0x12: "attach",
    0x13: "flow",
    0x14: "transfer",
    0x15: "disposition",
    0x16: "detach",
    0x17: "end",
    0x18: "close",
    0x40: "sasl.mechanisms",
    0x41: "sasl.init",
    0x42: "sasl.challenge",
    0x43: "sasl.response",
    0x44: "sasl.outcome",
}

FIELDS = {
    "open": "container-id hostname max-frame-size channel-max idle-time-out outgoing-locales "
    "incoming-locales offered-capabilities desired-capabilities properties",
    "begin": "remote-channel next-outgoing-id incoming-window outgoing-window handle-max "
    "offered-capabilities desired-capabilities properties",
    "attach": "name handle role snd-settle-mode rcv-settle-mode source target unsettled "
    "incomplete-unsettled initial-delivery-count max-message-size offered-capabilities "
    "desired-capabilities properties",
    "flow": "next-incoming-id incoming-window next-outgoing-id outgoing-window handle delivery-count "
    "link-credit available drain echo properties",
    "transfer": "handle delivery-id delivery-tag message-format settled more rcv-settle-mode state "
    "resume aborted batchable",
    "disposition": "role first last settled state batchable",
    "detach": "handle closed error",
    "end": "error",
    "close": "error",
    "sasl.mechanisms": "sasl-server-mechanisms",
    "sasl.init": "mechanism initial-response hostname",
    "sasl.challenge": "challenge",
    "sasl.response": "response",
    "sasl.outcome": "code additional-data",
    # described types inside performatives
    "error": "condition description info",
    "source": "address durable expiry-policy timeout dynamic dynamic-node-properties "
    "distribution-mode filter default-outcome outcomes capabilities",
    "target": "address durable expiry-policy timeout dynamic dynamic-node-properties capabilities",
    "received": "section-number section-offset",
    "accepted": "",
    "rejected": "error",
    "released": "",
    "modified": "delivery-failed undeliverable-here message-annotations",
}
FIELDS = {k: v.split() for k, v in FIELDS.items()}
DESCRIPTORS = {
    0x1D: "error",
    0x23: "received",
    0x24: "accepted",
    0x25: "rejected",
    0x26: "released",
    0x27: "modified",
    0x28: "source",
    0x29: "target",
}


def from_rhea(performative, value):
    """rhea's {"value": [positional fields]} -> named fields (trailing nulls dropped)."""
    if not isinstance(value, dict) or "value" not in value:
        return None
    return _named(performative, value["value"])


def _named(kind, values):
    names = FIELDS.get(kind, [])
    out = {}
    for i, v in enumerate(values or []):
        if v is None:
            continue
        name = names[i] if i < len(names) else "field-%d" % i
        out[name] = _rhea_value(v)
    return out


def _rhea_value(v):
    if isinstance(v, dict) and "descriptor" in v and "value" in v:
        d = v["descriptor"]
        kind = DESCRIPTORS.get(d, d) if isinstance(d, int) else d
        inner = v["value"] if isinstance(v["value"], list) else [v["value"]]
        return {"descriptor": kind, **_named(kind, inner)}
    if isinstance(v, dict) and set(v) == {"binary_hex"}:
        return v
    return v


# --------------------------------------------------------------------------
# Proton's text form
# --------------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(0x[0-9a-f]+)|(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)|(true|false|null)\b"
    r'|(b?"(?:[^"\\]|\\.)*")|(:(?:"(?:[^"\\]|\\.)*"|[^,\]\}= ]+)))'
)


class _Parser:
    def __init__(self, text):
        self.s = text
        self.i = 0

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def peek(self, t):
        self.ws()
        return self.s.startswith(t, self.i)

    def eat(self, t):
        if not self.peek(t):
            raise ValueError("expected %r at %d" % (t, self.i))
        self.i += len(t)

    def value(self):
        self.ws()
        s = self.s
        if s.startswith("@<", self.i):  # array: @<symbol>[...]
            j = s.index(">", self.i)
            self.i = j + 1
            return self.seq("[", "]")
        if s.startswith("@", self.i):  # described: @name(code) [fields]
            m = re.compile(r"@([a-z-]+|\d+)\((\d+)\)\s*").match(s, self.i)
            self.i = m.end()
            name = m.group(1)
            kind = DESCRIPTORS.get(int(m.group(2)), name)
            if self.peek("["):
                return {"descriptor": kind, **self.fields()}
            return {"descriptor": kind, "value": self.value()}
        if s.startswith("{", self.i):
            return self.mapping()
        if s.startswith("[", self.i):
            return self.seq("[", "]")
        m = _TOKEN.match(s, self.i)
        if not m:
            raise ValueError("cannot read %r" % s[self.i : self.i + 20])
        self.i = m.end()
        hx, num, lit, string, sym = m.groups()
        if hx:
            return int(hx, 16)
        if num:
            return float(num) if any(c in num for c in ".e") else int(num)
        if lit:
            return {"true": True, "false": False, "null": None}[lit]
        if string:
            raw = _unescape(string[2:-1] if string.startswith("b") else string[1:-1])
            return {"binary_hex": raw.hex()} if string.startswith("b") else raw.decode("utf-8", "replace")
        return sym[2:-1] if sym.startswith(':"') else sym[1:]

    def fields(self):
        self.eat("[")
        out = {}
        while not self.peek("]"):
            m = re.compile(r"\s*([a-z-]+)=").match(self.s, self.i)
            self.i = m.end()
            out[m.group(1)] = self.value()
            if self.peek(","):
                self.eat(",")
        self.eat("]")
        return out

    def seq(self, open_, close):
        self.eat(open_)
        out = []
        while not self.peek(close):
            out.append(self.value())
            if self.peek(","):
                self.eat(",")
        self.eat(close)
        return out

    def mapping(self):
        self.eat("{")
        out = {}
        while not self.peek("}"):
            k = self.value()
            self.eat("=")
            out[str(k)] = self.value()
            if self.peek(","):
                self.eat(",")
        self.eat("}")
        return out


def _unescape(s):
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "x":
                out.append(int(s[i + 2 : i + 4], 16))
                i += 4
                continue
            out.extend({"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0"}.get(n, n.encode()))
            i += 2
            continue
        out.extend(c.encode("utf-8"))
        i += 1
    return bytes(out)


def from_proton(trace):
    """Proton's '@transfer(20) [handle=0x0, ...] (n) payload' -> named fields, or None."""
    p = _Parser(trace)
    try:
        v = p.value()
    except (ValueError, AttributeError, IndexError):
        return None
    if not isinstance(v, dict):
        return None
    v.pop("descriptor", None)
    return v
