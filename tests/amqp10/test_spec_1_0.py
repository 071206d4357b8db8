"""The AMQP 1.0 tables generated from the OASIS XML vendored in specs/amqp-1.0."""

import importlib.util
import os
import subprocess
import sys

import pytest

from amqpcap.amqp.spec import v1_0 as SPEC

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_generated_module_is_current_with_the_vendored_xml():
    r = subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", "gen_spec_1_0.py"), "--check"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert (r.returncode, r.stderr) == (0, "")


def test_the_vendored_xml_is_the_shared_copy_unchanged():
    shared = "/work/shared/specs/amqp-1.0"
    for name in ("types.xml", "transport.xml", "messaging.xml", "security.xml", "transactions.xml"):
        mine = open(os.path.join(REPO, "specs", "amqp-1.0", name), "rb").read()
        assert b"Copyright" in mine[:600]  # the licence header travels with the file
        if os.path.isdir(shared):
            assert mine == open(os.path.join(shared, name), "rb").read()


def _recorder_names() -> dict:
    """The recorder's own table of frame names (captures/record/frame_fields.py), written from the
    specification's text by hand: the names the truth files give frames."""
    path = os.path.join(REPO, "captures", "record", "frame_fields.py")
    spec = importlib.util.spec_from_file_location("frame_fields", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.PERFORMATIVES


def test_performatives_and_sasl_frames_are_named_by_their_descriptor_codes():
    names = _recorder_names()
    assert len(names) == 14 and names[0x14] == "transfer" and names[0x44] == "sasl.outcome"
    assert SPEC.METHOD_NAMES == names
    assert SPEC.METHODS[0] == "open" and SPEC.METHODS[-1] == "sasl.outcome"


def test_fields_carry_type_multiplicity_and_mandatory():
    transfer = SPEC.COMPOSITES[0x14]
    assert [f.name for f in transfer.fields][:6] == [
        "handle",
        "delivery-id",
        "delivery-tag",
        "message-format",
        "settled",
        "more",
    ]
    handle = transfer.fields[0]
    assert (handle.type, handle.primitive, handle.mandatory, handle.multiple) == (
        "handle",
        "uint",
        True,
        False,
    )
    caps = [f for f in SPEC.COMPOSITES[0x10].fields if f.name == "offered-capabilities"][0]
    assert (caps.primitive, caps.multiple) == ("symbol", True)
    state = [f for f in transfer.fields if f.name == "state"][0]
    assert (state.type, state.requires) == ("*", "delivery-state")


def test_sections_outcomes_and_error_conditions():
    assert list(SPEC.SECTIONS.values()) == [
        "header",
        "delivery-annotations",
        "message-annotations",
        "properties",
        "application-properties",
        "data",
        "amqp-sequence",
        "amqp-value",
        "footer",
    ]
    assert set(SPEC.OUTCOMES.values()) == {"accepted", "rejected", "released", "modified", "declared"}
    assert set(SPEC.DELIVERY_STATES.values()) >= {"received", "transactional-state"}
    assert SPEC.ERROR_CONDITIONS["amqp:not-found"] == ("amqp-error", "not-found")
    assert SPEC.ERROR_CONDITIONS["amqp:link:detach-forced"] == ("link-error", "detach-forced")
    assert SPEC.CHOICES["sasl-code"][1] == ("1", "auth")
    assert SPEC.SYMBOLS["amqp:open:list"] == 0x10


PROTON_ERRORS = os.path.join(REPO, "captures", "rabbitmq10_proton_errors.pcap")


def loaded_after(command: str, argv: list, *modules: str, env=None) -> list:
    """``amqpcap command argv`` in a fresh process set up as the command line sets it up: its exit
    code and whether each of ``modules`` was loaded, as text ("0", "True", ...)."""
    code = (
        f"import sys; from amqpcap import cli; cli.lean({command!r}); rc = cli.main({[command, *argv]!r}); "
        f"print(rc, *(m in sys.modules for m in {modules!r}), file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return r.stderr.split()[-1 - len(modules) :]


def test_a_1_0_dissect_imports_neither_typing_nor_urllib(tmp_path):
    # typing (~2 ms) and urllib.parse with ipaddress (~2 ms) are no part of a dissect's start
    # otherwise (pyarrow imports neither; cli.lean keeps numpy out): the 1.0 tables are
    # collections.namedtuple rows, and rows_1_0.exchange_key imports unquote only for an address
    # with a percent escape (this capture's name /queues/... and /exchanges/... without one).
    argv = [PROTON_ERRORS, "-o", str(tmp_path / "out"), "-q"]
    got = loaded_after("dissect", argv, "amqpcap.amqp.codec_1_0", "typing", "urllib.parse")
    assert got == ["0", "True", "False", "False"]


@pytest.mark.compiled("fast10", "fast09")
def test_a_compiled_1_0_dissect_does_not_import_hashlib(tmp_path):
    # hashlib (~7 M instructions with _hashlib) is no part of a compiled dissect's start
    # otherwise: fast10 hashes bodies with fast09's digests (OpenSSL's SHA-256, found without it);
    # the reference codec hashes with hashlib.
    env = {k: v for k, v in os.environ.items() if k != "AMQPCAP_HASHLIB"}
    argv = [PROTON_ERRORS, "-o", str(tmp_path / "out"), "-q"]
    assert loaded_after("dissect", argv, "amqpcap.amqp.fast10", "hashlib", env=env) == ["0", "True", "False"]


def test_a_1_0_show_without_a_uuid_value_does_not_import_uuid():
    # uuid imports platform (~10 M instructions together); a dissect's pyarrow imports it anyway,
    # a show (no pyarrow) only where types_1_0 reads a uuid value (none in this capture).
    assert loaded_after("show", [PROTON_ERRORS], "amqpcap.amqp.codec_1_0", "uuid") == ["0", "True", "False"]


def test_the_digest_of_a_delivery_without_a_payload_is_hashlibs_digest_of_nothing():
    import hashlib

    from amqpcap.amqp import codec_1_0

    assert codec_1_0.EMPTY_DIGEST == hashlib.sha256(b"").hexdigest()
    assert codec_1_0.sha256(b"abc").hexdigest() == hashlib.sha256(b"abc").hexdigest()
