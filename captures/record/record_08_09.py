#!/usr/bin/env python3
"""Record the AMQP 0-8 / 0-9 captures against a local RabbitMQ, with ground truth.

    sudo python3 captures/record/record_08_09.py            # all captures
    sudo python3 captures/record/record_08_09.py --only amqplib,netamqp09

For each scenario this script
  1. makes sure RabbitMQ is running (uses a running broker, else starts one)
     and that user amqpcap08 / s3cret-pw exists with full rights on vhost /;
  2. starts `tcpdump -U -s 0 -i lo` filtered on the scenario's own client
     address (each client binds its socket to a distinct 127.0.x.y source
     address, so other people's traffic to the same broker is never captured);
  3. runs the client (python3-amqplib, Net::AMQP with the 0-8 or 0-9 XML,
     AnyEvent::RabbitMQ, or a raw socket sending bad protocol headers);
  4. stops tcpdump with SIGINT and waits for it;
  5. writes captures/rabbitmq0{8,9}_<client>.pcap and .truth.json: what the
     client did (ordered operations with their key arguments, body sizes and
     sha256, properties, acks), the protocol header bytes it sent, user and
     password, and every frame the client library wrote or read, in order;
  6. checks the capture decodes with tshark and prints a short summary.

Only the Python standard library is needed here.  The python3-amqplib client
runs under /usr/bin/python3 (Debian's package is not visible to a pyenv python).
"""

import argparse
import collections
import datetime
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.dirname(HERE)
USER, PASSWORD, VHOST = "amqpcap08", "s3cret-pw", "/"
BROKER = ("127.0.0.1", 5672)

# name -> (capture stem, client source address, description, command builder)
SCENARIOS = collections.OrderedDict()


def scenario(name, stem, src, description):
    def deco(fn):
        SCENARIOS[name] = dict(stem=stem, src=src, description=description, cmd=fn)
        return fn

    return deco


def system_python_with(module):
    for py in ("/usr/bin/python3", sys.executable, "python3", "/usr/bin/python"):
        try:
            subprocess.run(
                [py, "-c", "import " + module],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            return py
        except (OSError, subprocess.CalledProcessError):
            continue
    sys.exit("no python with module %s (install python3-amqplib)" % module)


@scenario(
    "amqplib",
    "rabbitmq08_amqplib",
    "127.0.8.1",
    "py-amqplib client_0_8 (header 01 01 09 01): access.request, qos, declare, "
    "bind, publish with all properties + get/ack, reject, mandatory return, "
    "consume of a small and a 300000-byte (3 body frames) message + ack, "
    "cancel, tx select/commit/rollback, 404 channel error, unbind/delete, close",
)
def _amqplib(src, ops):
    return [
        system_python_with("amqplib"),
        os.path.join(HERE, "record_08_09_amqplib.py"),
        "--src",
        src,
        "--ops",
        ops,
    ]


@scenario(
    "netamqp08",
    "rabbitmq08_netamqp",
    "127.0.8.2",
    "Net::AMQP with amqp0-8.stripped.xml (header 01 01 08 00), hand-written client: "
    "AMQPLAIN, tune-ok frame_max 4096, open insist=1, access.request, declare, "
    "bind, qos, publish with all properties (S I D T F headers) + 10000-byte "
    "message (3 body frames), get x2 + ack multiple, get-empty, consume/deliver/"
    "ack/cancel, delete, close; second connection: basic.publish immediate=1 -> "
    "connection.close 540",
)
def _netamqp08(src, ops):
    return [
        "perl",
        os.path.join(HERE, "record_08_09_netamqp.pl"),
        "--spec",
        "0-8",
        "--src",
        src,
        "--ops",
        ops,
    ]


@scenario(
    "netamqp09",
    "rabbitmq09_netamqp",
    "127.0.9.1",
    "Net::AMQP with amqp0-9.stripped.xml (header 01 01 00 09), hand-written client: "
    "PLAIN, same shape as the 0-8 one with RabbitMQ table types (t b s l d f x A V) "
    "in the headers; second connection: dtx.select (class 100) -> broker drops TCP",
)
def _netamqp09(src, ops):
    return [
        "perl",
        os.path.join(HERE, "record_08_09_netamqp.pl"),
        "--spec",
        "0-9",
        "--src",
        src,
        "--ops",
        ops,
    ]


@scenario(
    "anyevent",
    "rabbitmq09_anyevent",
    "127.0.9.2",
    "AnyEvent::RabbitMQ (header 01 01 00 09, 0-9-1 methods): heartbeat 1 s, "
    "frame_max 8192, qos, declare fanout, bind, publish with properties, get/ack, "
    "get-empty, consume 2 messages (one 20000 bytes, 3 body frames) + ack multiple, "
    "cancel, 3.5 s idle with heartbeats, confirm.select + publish + broker basic.ack, "
    "purge, close",
)
def _anyevent(src, ops):
    return ["perl", os.path.join(HERE, "record_08_09_anyevent.pl"), "--src", src, "--ops", ops]


BAD_HEADERS = [b"AMQP\x01\x01\x00\x08", b"AMQP\x00\x00\x08\x00"]


@scenario(
    "rejected",
    "rabbitmq08_rejected",
    "127.0.8.3",
    "raw socket: two connections sending protocol headers RabbitMQ does not accept "
    "(AMQP 01 01 00 08 and AMQP 00 00 08 00); the broker answers with its own "
    "header and closes",
)
def _rejected(src, ops):
    return [sys.executable, os.path.abspath(__file__), "--raw-header-client", "--src", src, "--ops", ops]


def raw_header_client(src, ops_path):
    ops, frames, conns = [], [], []

    def op(name, **kw):
        rec = dict(seq=len(ops) + 1, op=name, t=round(time.time(), 6))
        rec.update(kw)
        ops.append(rec)
        print("op %2d %s %s" % (rec["seq"], name, kw), file=sys.stderr)

    for i, hdr in enumerate(BAD_HEADERS):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((src, 0))
        s.connect(BROKER)
        conns.append(dict(index=i, local=list(s.getsockname()), remote=list(s.getpeername())))
        op("tcp.connect", conn=i, local=list(s.getsockname()), remote=list(s.getpeername()))
        s.sendall(hdr)
        op("protocol.header", conn=i, direction="c2s", bytes_hex=hdr.hex())
        frames.append(dict(dir="c2s", conn=i, t=round(time.time(), 6), protocol_header_hex=hdr.hex()))
        s.settimeout(5)
        got = b""
        try:
            while True:
                b = s.recv(4096)
                if not b:
                    break
                got += b
        except TimeoutError:
            pass
        except ConnectionResetError:
            op("tcp.reset_by_broker", conn=i)
        frames.append(
            dict(
                dir="s2c",
                conn=i,
                t=round(time.time(), 6),
                protocol_header_hex=got[:8].hex(),
                extra_bytes_hex=got[8:].hex(),
                eof=True,
            )
        )
        op(
            "protocol.header",
            conn=i,
            direction="s2c",
            bytes_hex=got[:8].hex(),
            result="rejected: broker sent its own header then closed"
            if got[:4] == b"AMQP"
            else "closed without header",
            total_bytes=len(got),
        )
        s.close()
        op("tcp.close", conn=i)
    with open(ops_path, "w") as f:
        json.dump(
            dict(
                client=dict(
                    name="raw socket (record_08_09.py --raw-header-client)", python=sys.version.split()[0]
                ),
                protocol_header_sent_hex=[h.hex() for h in BAD_HEADERS],
                user=None,
                password=None,
                vhost=None,
                mechanism=None,
                connections=conns,
                operations=ops,
                frames=frames,
                error=None,
            ),
            f,
            indent=1,
        )
    return 0


# ------------------------------------------------------------------ broker --
def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def ensure_broker():
    if run(["rabbitmqctl", "-q", "status"]).returncode != 0:
        print("starting rabbitmq-server", file=sys.stderr)
        subprocess.run(["rabbitmq-server", "-detached"], check=False)
        subprocess.run(["rabbitmqctl", "await_startup"], check=True)
    users = run(["rabbitmqctl", "-q", "list_users"]).stdout
    if not any(line.split("\t")[0] == USER for line in users.splitlines()):
        run(["rabbitmqctl", "add_user", USER, PASSWORD])
    else:
        run(["rabbitmqctl", "change_password", USER, PASSWORD])
    run(["rabbitmqctl", "set_permissions", "-p", VHOST, USER, ".*", ".*", ".*"])
    info = {"product": "RabbitMQ"}
    info["version"] = run(["rabbitmqctl", "-q", "version"]).stdout.strip()
    erl = run(["rabbitmqctl", "-q", "eval", "erlang:system_info(otp_release)."]).stdout.strip()
    info["erlang_otp"] = erl.strip('"')
    info["listener"] = "%s:%d (listens on [::]:5672)" % BROKER
    frame_max = run(["rabbitmqctl", "-q", "eval", "application:get_env(rabbit, frame_max)."]).stdout.strip()
    heartbeat = run(["rabbitmqctl", "-q", "eval", "application:get_env(rabbit, heartbeat)."]).stdout.strip()
    info["config"] = {"frame_max": frame_max, "heartbeat": heartbeat}
    return info


def tool_versions():
    def first_line(cmd):
        try:
            out = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ).stdout.splitlines()
        except OSError:
            return None
        out = [l for l in out if l.lower().startswith(("tshark", "tcpdump"))]
        return out[0].strip() if out else None

    def dpkg(pkg):
        try:
            return run(["dpkg-query", "-W", "-f", "${Version}", pkg]).stdout.strip() or None
        except OSError:
            return None

    return {
        "tcpdump": first_line(["tcpdump", "--version"]),
        "tshark": first_line(["tshark", "--version"]),
        "debian_packages": {
            p: dpkg(p)
            for p in (
                "rabbitmq-server",
                "python3-amqplib",
                "libnet-amqp-perl",
                "libanyevent-rabbitmq-perl",
                "amqp-specs",
                "tcpdump",
                "tshark",
            )
        },
    }


# ----------------------------------------------------------------- capture --
def start_tcpdump(pcap, src):
    errf = tempfile.NamedTemporaryFile("w+", suffix=".tcpdump.err", delete=False)
    flt = "tcp port %d and host %s" % (BROKER[1], src)
    # --immediate-mode: without it libpcap's TPACKET_V3 ring hands packets over
    # per block (or after a timeout) and packets still in the current block are
    # lost on SIGINT -- a short capture can come out empty.  -B 65536 (KiB): with
    # the default buffer the 300 KB amqplib burst made the kernel drop packets.
    p = subprocess.Popen(
        ["tcpdump", "-U", "--immediate-mode", "-B", "65536", "-s", "0", "-i", "lo", "-w", pcap, flt],
        stdout=subprocess.DEVNULL,
        stderr=errf,
    )
    for _ in range(100):
        time.sleep(0.1)
        with open(errf.name) as f:
            if "listening on" in f.read():
                break
        if p.poll() is not None:
            raise RuntimeError("tcpdump died: " + open(errf.name).read())
    time.sleep(0.3)
    return p, errf.name, flt


def stop_tcpdump(p, errname):
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        p.terminate()
        p.wait()
    with open(errname) as f:
        err = f.read()
    os.unlink(errname)
    stats = {}
    for line in err.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "packets":
            stats[" ".join(parts[1:])] = int(parts[0])
    return stats


def tshark_summary(pcap):
    out = subprocess.run(
        [
            "tshark",
            "-r",
            pcap,
            "-Y",
            "amqp",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "tcp.stream",
            "-e",
            "amqp.method.class",
            "-e",
            "amqp.method.method",
            "-e",
            "amqp.type",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ).stdout
    lines = [l for l in out.splitlines() if l.strip()]
    return lines


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def record(name, sc, broker, tools, args):
    stem = sc["stem"]
    pcap = os.path.join(args.outdir, stem + ".pcap")
    truth_path = os.path.join(args.outdir, stem + ".truth.json")
    tmpdir = tempfile.mkdtemp(prefix="amqpcap-rec-")
    ops_path = os.path.join(tmpdir, "ops.json")
    cmd = sc["cmd"](sc["src"], ops_path)
    print("== %s: %s" % (name, " ".join(cmd)), file=sys.stderr)
    tcpd, errname, flt = start_tcpdump(pcap, sc["src"])
    started = datetime.datetime.now(datetime.UTC)
    try:
        rc = subprocess.run(cmd, timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    stats = stop_tcpdump(tcpd, errname)
    with open(ops_path) as f:
        ops = json.load(f)
    shutil.rmtree(tmpdir, ignore_errors=True)

    counts = collections.Counter(o["op"] for o in ops["operations"])
    frame_counts = collections.Counter(
        "%s %s"
        % (
            fr["dir"],
            fr.get("method")
            or {1: "method", 2: "header", 3: "body", 8: "heartbeat"}.get(fr.get("type"), "other"),
        )
        for fr in ops["frames"]
        if "type" in fr
    )
    recv_hdrs = [
        fr["protocol_header_hex"]
        for fr in ops["frames"]
        if fr.get("dir") == "s2c" and fr.get("protocol_header_hex")
    ]
    truth = collections.OrderedDict()
    truth["capture"] = os.path.basename(pcap)
    truth["capture_sha256"] = sha256_file(pcap)
    truth["description"] = sc["description"]
    truth["recorded_at"] = started.isoformat()
    truth["record_command"] = "python3 captures/record/record_08_09.py --only " + name
    truth["client_command"] = " ".join(
        os.path.relpath(c, os.path.dirname(CAPTURES)) if c.startswith(CAPTURES) else c for c in cmd
    )
    truth["client_exit"] = rc
    truth["tcpdump_command"] = "tcpdump -U --immediate-mode -B 65536 -s 0 -i lo -w %s '%s'" % (
        os.path.basename(pcap),
        flt,
    )
    truth["tcpdump_stats"] = stats
    truth["broker"] = broker
    truth["tools"] = tools
    truth["client"] = ops["client"]
    truth["client_address"] = sc["src"]
    truth["server_address"] = "%s:%d" % BROKER
    truth["tcp_connections"] = ops.get("connections") or []
    truth["protocol_header_sent_hex"] = ops["protocol_header_sent_hex"]
    truth["protocol_header_received_hex"] = recv_hdrs
    truth["user"] = ops["user"]
    truth["password"] = ops["password"]
    truth["vhost"] = ops["vhost"]
    truth["mechanism"] = ops["mechanism"]
    truth["operation_counts"] = dict(sorted(counts.items()))
    truth["frame_counts"] = dict(sorted(frame_counts.items()))
    truth["notes"] = [
        'operations: what the client script did and saw, in order; "t" is the client\'s '
        "wall clock (same clock as the pcap timestamps).",
        "frames: every frame the client library wrote (c2s) or read (s2c), in the "
        "order the client saw them; sizes are payload sizes (frame minus 8 bytes); "
        "protocol headers appear as protocol_header_hex entries.",
        "table values are given as [type_char, value] where the script knows the wire type.",
    ]
    truth["error"] = ops.get("error")
    truth["operations"] = ops["operations"]
    truth["frames"] = ops["frames"]
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")

    lines = tshark_summary(pcap)
    size = os.path.getsize(pcap)
    print(
        "   %s: %d bytes, %s; tshark amqp packets: %d; client exit %s; ops %d"
        % (pcap, size, stats, len(lines), rc, len(ops["operations"])),
        file=sys.stderr,
    )
    got, seen = stats.get("packets captured"), stats.get("packets received by filter")
    if got is not None and seen is not None and 2 * got != seen:
        # on lo every packet passes the filter twice (outgoing + incoming copy)
        print(
            "   WARNING: tcpdump captured %s of %s filtered packets (expected half)" % (got, seen),
            file=sys.stderr,
        )
    if size > 1 << 20:
        print("   WARNING: capture larger than 1 MB", file=sys.stderr)
    if ops.get("error"):
        print("   CLIENT ERROR: " + ops["error"], file=sys.stderr)
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated subset of: " + ",".join(SCENARIOS))
    ap.add_argument("--outdir", default=CAPTURES)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--raw-header-client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--ops", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.raw_header_client:
        return raw_header_client(args.src, args.ops)
    if os.geteuid() != 0:
        sys.exit("run as root (tcpdump on lo)")
    names = args.only.split(",") if args.only else list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            sys.exit("unknown scenario %r (have %s)" % (n, ", ".join(SCENARIOS)))
    broker = ensure_broker()
    tools = tool_versions()
    bad = 0
    for n in names:
        rc = record(n, SCENARIOS[n], broker, tools, args)
        bad += rc != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
