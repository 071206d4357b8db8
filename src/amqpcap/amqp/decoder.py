"""Sans-IO decoder of one AMQP conversation, any version.

``ConnectionDecoder`` reads the protocol headers of both directions, picks the
codec (``Decoder09`` for 0-8 / 0-9 / 0-9-1, ``Decoder010`` for 0-10), records
the negotiation, and passes everything else to the codec.  It is the sink of
the TCP reassembler (``data`` / ``gap``); its events (the codec's too: they share one
list, ``events``) are drained with ``pop_events()``, and ``facts`` is what the connection
row reports.
"""

from __future__ import annotations

from amqpcap import compiled
from amqpcap.amqp import codec_0_9, detect
from amqpcap.amqp.events import Anomaly, ProtocolHeader
from amqpcap.amqp.facts import ConnectionFacts
from amqpcap.values import replace

# How much a direction picked up mid-stream may hold while its framing is unproven: two
# frames of the largest common sizes (0-10's 64 KiB, RabbitMQ's 128 KiB frame-max).
INFER_BYTES = 256 * 1024
# While a mid-stream 0-8/0-9/0-9-1 conversation's version is still open, its events are held
# (at most this many) so that every row carries the version the evidence settles on.
HOLD_EVENTS = 4096
HOLD_BODY_BYTES = 16 << 20


# The codec classes, each chosen once, here: the reference, or the compiled part's subclass of
# it, which hands whatever it does not walk itself to the reference's methods.
# * 0-8 / 0-9 / 0-9-1, at import: codec_0_9.Decoder09Py or fast09.Decoder09 (the compiled
#   walker: its frame loop, its per-feed path of the stream core, the per-direction state and
#   contents in assembly with their fields in C);
# * 1.0, at the first 1.0 conversation (codec_1_0 is loaded then, not at every start):
#   codec_1_0.Decoder10 or fast10.Decoder10 (its per-feed path, its frame loop and a whole
#   delivery in one transfer walked in C).
_fast09 = compiled.select("fast09")
Decoder09 = _fast09.Decoder09 if _fast09 is not None else codec_0_9.Decoder09Py


def decoder_1_0() -> type:
    """The 1.0 codec class (see above)."""
    from amqpcap.amqp import codec_1_0

    fast10 = compiled.select("fast10")
    return fast10.Decoder10 if fast10 is not None else codec_1_0.Decoder10


def compiled_in_use() -> bool:
    """True if new 0-8 / 0-9 / 0-9-1 codecs walk frames with the compiled walker."""
    return _fast09 is not None


class ConnectionDecoder:
    def __init__(
        self,
        *,
        body_bytes: int = 64,
        keep_secrets: bool = False,
        amqp_port: bool = True,
        tally=None,
        frame_events: bool = True,
        deferred_digests: bool = False,
        row_sink=None,
    ) -> None:
        self.body_bytes = body_bytes
        self.keep_secrets = keep_secrets
        self.amqp_port = amqp_port
        self.tally = tally  # the codec's: every frame decoded, (direction, ts, n)
        self.frame_events = frame_events  # a Frame event per frame (the frames table, show)
        # what the compiled 0-9 walker may write without events (codec_0_9.direct_output): body
        # digests handed on uncomputed, and rows (to a codec whose version the header settled:
        # held events wait for a version)
        self.deferred_digests = deferred_digests
        self.row_sink = row_sink
        self.codec = None
        self.version: str | None = None
        self.version_evidence: str | None = None
        self.client_header: bytes | None = None
        self.server_header: bytes | None = None
        self.client_version: str | None = None
        self.negotiation = "none"
        self.tls = False
        self.mid_stream = False
        self.undecoded = False  # AMQP 1.0 / TLS / not AMQP: bytes are counted, not decoded
        self.is_amqp = False
        self._pre = [bytearray(), bytearray()]  # bytes before the header / codec was settled
        self._pre_off = [None, None]
        self._settled = [False, False]
        self._pieces: list[list] = [[], []]
        self._scan_at = [0, 0]  # held length at which the mid-stream boundary scan runs again
        self._resume = [0, 0]  # where it resumes: no boundary before
        self._holding = True  # mid-stream events are held until the version is settled
        self._hold_max = max(64, min(HOLD_EVENTS, HOLD_BODY_BYTES // max(body_bytes, 1)))
        self.events: list = []

    # -- sink API (called by the TCP reassembler) ---------------------------------------

    def data(self, direction: int, offset: int, data: bytes, packet: int, ts: int) -> None:
        if self._settled[direction]:
            if self.codec is not None:
                self.codec.feed(direction, data, offset, packet, ts)
            return
        if self.undecoded and (self._settled[direction] or not self.is_amqp):
            return
        pre = self._pre[direction]
        if self._pre_off[direction] is None:
            self._pre_off[direction] = offset
        pre += data
        # Pieces keep their packet numbers and times for the replay into the codec.
        self._pieces[direction].append((offset, data, packet, ts))
        self._settle(direction, packet, ts)
        if self._settled[0] and self._settled[1] and self.codec is not None:
            # From now on every byte goes to the codec: the reassembler calls it directly.
            self.data = self.codec.data

    def gap(self, direction: int, offset: int, size: int, packet: int, ts: int) -> None:
        if self.codec is not None and self._settled[direction]:
            self.codec.gap(direction, offset, size, packet, ts)
        elif not self.undecoded:
            # Lost before we knew what the conversation was: the held bytes cannot be placed.
            held = len(self._pre[direction])
            self.events.append(
                (
                    direction,
                    Anomaly(
                        packet,
                        ts,
                        offset,
                        "gap",
                        f"{size} bytes lost before the protocol was identified",
                        None,
                        size + held,
                    ),
                )
            )
            self._pre[direction] = bytearray()
            self._pre_off[direction] = None
            self._pieces[direction] = []
            self._scan_at[direction] = self._resume[direction] = 0

    def finish(self, packet: int, ts: int) -> None:
        for direction in (0, 1):
            if not self._settled[direction] and self._pre[direction] and not self.undecoded:
                if self.is_amqp or self.amqp_port:
                    self._start_midstream(direction, packet, ts, force=True)
        if self.codec is not None:
            self.codec.finish(packet, ts)
        self._holding = False

    def pop_events(self) -> list:
        ev = self.events
        if self.version_evidence == "inferred":
            # frames count whether or not they are events: the same hold with or without --frames
            held = len(ev) + self.codec.silent_frames
            if self._holding and len(self.codec.candidates) > 1 and held < self._hold_max:
                return []
            self._holding = False
            self.version = self.codec.version
        self.events = []
        if self.codec is not None:
            self.codec.events = self.events
            self.codec.silent_frames = 0
        return ev

    @property
    def facts(self) -> ConnectionFacts:
        """What the connection row reports: the codec's facts and how the version was found."""
        f = self.codec.facts if self.codec is not None else ConnectionFacts()
        evidence = self.version_evidence
        if evidence == "header" and f.start_version is not None:
            evidence = "header+start"
        return replace(
            f,
            client_header=self.client_header,
            server_header=self.server_header,
            client_version=self.client_version,
            version=self.version,
            version_evidence=evidence,
            negotiation=self.negotiation,
            tls=self.tls,
            mid_stream=self.mid_stream,
        )

    # -- header handling -----------------------------------------------------------------

    def _settle(self, direction: int, packet: int, ts: int) -> None:
        pre = self._pre[direction]
        if self.undecoded and pre[:4] != b"AMQP"[: len(pre)]:
            # Not decoded (AMQP 1.0, unknown header): only a header answer is still of interest.
            self._settled[direction] = True
            self._pre[direction] = bytearray()
            return
        if pre[:4] == b"AMQP"[: len(pre)] and len(pre) < 8:
            return  # a header is arriving in pieces
        if pre[:4] == b"AMQP":
            raw = bytes(pre[:8])
            version = detect.header_version(raw)
            self.events.append(
                (direction, ProtocolHeader(packet, ts, self._pre_off[direction], raw, version))
            )
            if direction == 0:
                self.client_header = raw
                self.client_version = version
                self.is_amqp = True
                if version in detect.DECODED_VERSIONS:
                    self._use(version, "header")
                else:
                    self.version = version
                    self.version_evidence = "header"
                    # AMQP 1.0 over TLS (recognised) or an unknown header (a broker answers it with
                    # its own and closes): recorded on the connection row, nothing more to decode.
                    self.undecoded = True
                    self.tls = version == "1.0-tls"
            else:
                self.server_header = raw
                if self.client_header is not None and raw == self.client_header:
                    self.negotiation = "accepted"  # 0-10 peers echo the header
                else:
                    self.negotiation = "rejected"
                    if (
                        self.version is None
                        and version in detect.DECODED_VERSIONS
                        and self.client_header is None
                    ):
                        self._use(version, "header")
            self._settled[direction] = True
            self._pre[direction] = bytearray()
            if self.codec is not None:
                self._replay(direction, self._pre_off[direction] + 8)
            self._pieces[direction] = []
            return
        if not self._settled[direction ^ 1] and self.client_header is None and detect.is_tls(pre):
            self.tls = True
            self.undecoded = True
            self.version = "tls"
            self.is_amqp = self.amqp_port
            return
        if self.codec is not None:
            # The other side's header settled the version; this side starts with frames
            # (or mid-frame, if the capture started late): decode from a provable boundary.
            if self.negotiation == "none" and direction == 1:
                self.negotiation = "accepted"
            self._begin_frames(direction)
            return
        if not self.amqp_port and not self.is_amqp:
            self.undecoded = True  # no AMQP header on a non-AMQP port: not ours
            return
        self._start_midstream(direction, packet, ts)

    def _start_midstream(self, direction: int, packet: int, ts: int, force: bool = False) -> None:
        pre = self._pre[direction]
        at = None
        if self.codec is None:
            final = force or len(pre) >= INFER_BYTES
            if not final and len(pre) < self._scan_at[direction]:
                return
            found, self._resume[direction] = detect.find_midstream_boundary(
                pre, final, self._resume[direction]
            )
            if found is None:
                if not final:
                    # Rescan once a quarter more has arrived: bounded work on garbage.
                    self._scan_at[direction] = len(pre) + max(len(pre) // 4, 1)
                    return
                version = "0-9-1"  # nothing provable: the codec's resync accounts for the bytes
            else:
                version = found[0] if found[0] in ("0-10", "1.0") else "0-9-1"
                at = self._pre_off[direction] + found[1]
            self.mid_stream = self.client_header is None
            self.negotiation = "unknown"
            self.is_amqp = True
            self._use(version, "inferred")
        self._begin_frames(direction, at)

    def _begin_frames(self, direction: int, at: int | None = None) -> None:
        """Hand a direction without a protocol header to the codec, decoding from the first
        provable frame boundary (``at`` where detection proved it; no bytes skipped when the
        data starts with a frame)."""
        self._settled[direction] = True
        self._pre[direction] = bytearray()
        if self._pre_off[direction] is not None:
            begun = direction == 1 and self.client_header is not None  # the server answering
            self.codec.start_midstream(direction, self._pre_off[direction], at, begun)
        self._replay(direction, None)
        self._pieces[direction] = []

    def _replay(self, direction: int, skip_to) -> None:
        """Feed the held pieces to the codec with their own packet numbers and times,
        dropping the bytes before ``skip_to`` (the protocol header)."""
        for off, data, packet, ts in self._pieces[direction]:
            if skip_to is not None and off < skip_to:
                cut = skip_to - off
                if cut >= len(data):
                    continue
                off, data = skip_to, data[cut:]
            self.codec.feed(direction, data, off, packet, ts)

    def _use(self, version: str, evidence: str) -> None:
        if version in detect.AMQP_1_0:
            self._use_1_0(evidence)
            return
        self.version = version
        self.version_evidence = evidence
        if version == "0-10":
            from amqpcap.amqp.codec_0_10 import Decoder010

            self.codec = Decoder010(body_bytes=self.body_bytes, keep_secrets=self.keep_secrets)
        else:
            self.codec = Decoder09(
                version,
                body_bytes=self.body_bytes,
                keep_secrets=self.keep_secrets,
                infer=evidence == "inferred",
            )
        self.codec.events = self.events  # one list: the pipeline drains both with pop_events
        self.codec.tally = self.tally
        self.codec.frame_events = self.frame_events
        if version != "0-10":
            self._direct_output(version, evidence)

    def _use_1_0(self, evidence: str) -> None:
        self.version = "1.0"
        self.version_evidence = evidence
        self.codec = decoder_1_0()(body_bytes=self.body_bytes, keep_secrets=self.keep_secrets)
        self.codec.events = self.events
        self.codec.tally = self.tally
        self.codec.frame_events = self.frame_events
        self.codec.deferred_digests = self.deferred_digests
        self._direct_output("1.0", evidence)

    def _direct_output(self, version: str, evidence: str) -> None:
        """The row sink and deferred digests handed to a compiled codec (codec_0_9.direct_output):
        rows only to a codec whose version the header settled (held events wait for a version)."""
        if self.row_sink is not None or self.deferred_digests:
            sink = None if self.row_sink is None or evidence == "inferred" else self.row_sink
            if sink is not None:
                sink.version = version
            codec_0_9.direct_output(self.codec, sink, self.deferred_digests)
