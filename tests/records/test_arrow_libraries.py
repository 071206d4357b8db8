"""pyarrow's shared libraries loaded in a thread of their own once a dissect's loop is under way
(records/arrow_libraries.py, pipeline.LoadingArrow), and imported by the writer at the first
batch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from amqpcap.capture.reader import CHUNK
from amqpcap.pipeline import LoadingArrow
from amqpcap.records import arrow_libraries

CAPTURES = os.path.join(os.path.dirname(__file__), "..", "..", "captures")


def run_probe(code: str, *args: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()


def test_a_writer_loads_pyarrows_libraries_in_a_thread_once_asked_and_imports_pyarrow_at_the_first_batch(
    tmp_path,
):
    probe = """
        import sys
        from amqpcap.records import writer

        def mapped():
            with open("/proc/self/maps") as f:
                return any("/pyarrow/lib." in line for line in f)

        w = writer.DatasetWriter(sys.argv[1], ["connections", "anomalies"])
        print(w.arrow.started, mapped() != ("pyarrow" in sys.modules))  # made, nothing loaded
        w.load_arrow()
        w.arrow.wait()
        # loaded by the thread (the compiled writer's dlopen, ctypes without it); imported by the
        # compiled buffers at the first batch only (the reference buffer imports it when it is made)
        print(("pyarrow" in sys.modules) != writer.compiled_in_use(), mapped())
        print(("ctypes" in sys.modules) != writer.compiled_in_use())
        w["anomalies"].append(("c", 1, 1, 10, "c2s", None, None, "amqp", "kind", "detail", 1))
        print(w.close()["anomalies"], "pyarrow" in sys.modules)
    """
    assert run_probe(probe, str(tmp_path / "out")) == ["False", "False", "True", "True", "True", "1", "True"]


class Batches:
    """A source of batches that notes how many the loop has taken when ``load`` is called."""

    def __init__(self, batches) -> None:
        self.list = batches
        self.taken = 0
        self.loaded_after = []

    def batches(self):
        for b in self.list:
            self.taken += 1
            yield b

    def load(self) -> None:
        self.loaded_after.append(self.taken)


def records_of(source) -> list:
    return [r for batch in source.batches() for r in batch]


def test_the_libraries_load_once_the_loop_has_taken_the_first_batch_and_another_follows():
    src = Batches([[1, 2], [3], [4, 5], [6]])
    assert records_of(LoadingArrow(src, src.load)) == [1, 2, 3, 4, 5, 6]
    assert src.loaded_after == [2]  # once, with the second batch read, before it is decoded


def test_a_capture_of_one_batch_or_none_leaves_the_libraries_to_pyarrows_import():
    for batches in ([], [[1, 2, 3]]):
        src = Batches(batches)
        assert records_of(LoadingArrow(src, src.load)) == [r for b in batches for r in b]
        assert src.loaded_after == []


def test_a_source_without_batches_has_the_libraries_loaded_at_once():
    loads = []
    records = iter([1, 2, 3])
    fed = LoadingArrow(records, lambda: loads.append(1))
    assert [r for batch in fed.batches() for r in batch] == [1, 2, 3] and loads == [1]


def test_a_dissect_loads_the_libraries_after_its_first_conversations_chose_their_codecs(tmp_path):
    # an AMQP 1.0 capture of two chunks: the 1.0 codec (and the extension modules it imports,
    # which would wait for the dynamic loader) is imported before the loading starts; a capture
    # of one chunk never starts it
    probe = """
        import sys
        from amqpcap.pipeline import dissect
        from amqpcap.records import arrow_libraries

        start = arrow_libraries.ArrowLibraries.start
        seen = []

        def noting(self):
            seen.append("amqpcap.amqp.codec_1_0" in sys.modules)
            start(self)

        arrow_libraries.ArrowLibraries.start = noting
        for capture in sys.argv[1:3]:
            s = dissect([capture], sys.argv[3] + capture[-12:], force=True)
            print(s.rows["methods"] > 0, seen)
    """
    two_chunks = os.path.join(CAPTURES, "rabbitmq10_rhea_multiplex.pcap")
    one_chunk = os.path.join(CAPTURES, "rabbitmq09_anyevent.pcap")
    assert os.path.getsize(two_chunks) > CHUNK >= os.path.getsize(one_chunk)
    out = str(tmp_path / "out")
    assert run_probe(probe, two_chunks, one_chunk, out) == ["True", "[True]", "True", "[True]"]


def test_nothing_is_loaded_in_a_thread_once_pyarrow_is_imported():
    import pyarrow  # noqa: F401

    libraries = arrow_libraries.ArrowLibraries()
    libraries.start()
    assert not libraries.done.locked()  # no thread was started: nothing to wait for
    libraries.wait()


def test_each_opener_loads_the_files_that_open_and_leaves_one_that_does_not_to_the_import():
    from amqpcap.records import writer

    probe = """
        import sys
        from amqpcap.records import arrow_libraries

        if sys.argv[1] == "ctypes":
            opener = arrow_libraries.open_with_ctypes
        else:
            from amqpcap.records.fastwriter import open_libraries as opener

        def mapped():
            with open("/proc/self/maps") as f:
                return any("/pyarrow/lib." in line for line in f)

        print(mapped())
        paths = [b"/nonexistent/pyarrow/lib.so", arrow_libraries.extension_file("pyarrow.lib")]
        print(opener(paths, sys.getdlopenflags()), mapped(), "pyarrow" in sys.modules)
    """
    openers = ["ctypes"] + (["fastwriter"] if writer.compiled_in_use() else [])
    for opener in openers:  # (the first file fails, the one after it is loaded all the same)
        assert run_probe(probe, opener) == ["False", "None", "True", "False"], opener


def test_an_extension_file_is_found_without_importing_its_package():
    probe = """
        import sys
        from amqpcap.records.arrow_libraries import extension_file

        path = extension_file("pyarrow.lib").decode()
        print("pyarrow" in sys.modules, "/pyarrow/lib." in path, path.endswith(".so"))
        print(extension_file("pyarrow.no_such_module"), extension_file("no_such_package.lib"))
    """
    assert run_probe(probe) == ["False", "True", "True", "None", "None"]
