"""amqpcap.load on a capture: the cache of dissections."""

from amqpcap.analysis import tables

CAP = "captures/rabbitmq091_pyamqp_basic.pcap"


def test_a_dissection_cached_by_other_code_is_not_reused(tmp_path, monkeypatch):
    first = tables.dissect_cached(CAP, cache_dir=tmp_path)
    assert tables.dissect_cached(CAP, cache_dir=tmp_path) == first  # same code: reused
    # another decoder or schema (a newer checkout, an upgrade) must dissect again
    monkeypatch.setattr(tables, "_code_fingerprint", lambda: "other code")
    second = tables.dissect_cached(CAP, cache_dir=tmp_path)
    assert second != first and second.is_dir()


def test_the_code_fingerprint_changes_when_the_schema_module_does(monkeypatch):
    import pathlib

    tables._code_fingerprint.cache_clear()
    before = tables._code_fingerprint()
    orig = pathlib.Path.read_bytes

    def edited(self):
        data = orig(self)
        return data + b"# a column added" if self.name == "schema.py" else data

    monkeypatch.setattr(pathlib.Path, "read_bytes", edited)
    tables._code_fingerprint.cache_clear()
    try:
        assert tables._code_fingerprint() != before
    finally:
        tables._code_fingerprint.cache_clear()
