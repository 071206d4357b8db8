"""pyarrow's shared libraries loaded in a thread of their own while a dissect starts
(records/arrow_libraries.py), and imported by the writer at the first batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from amqpcap.records import arrow_libraries


def run_probe(code: str, *args: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()


def test_a_new_writer_loads_pyarrows_libraries_in_a_thread_and_imports_pyarrow_at_the_first_batch(tmp_path):
    probe = """
        import sys
        from amqpcap.records import writer

        def mapped():
            with open("/proc/self/maps") as f:
                return any("/pyarrow/lib." in line for line in f)

        w = writer.DatasetWriter(sys.argv[1], ["connections", "anomalies"])
        w.arrow.wait()
        # loaded by the thread; imported by the compiled buffers at the first batch only (the
        # reference buffer imports it when it is made)
        print(("pyarrow" in sys.modules) != writer.compiled_in_use(), mapped())
        w["anomalies"].append(("c", 1, 1, 10, "c2s", None, None, "amqp", "kind", "detail", 1))
        print(w.close()["anomalies"], "pyarrow" in sys.modules)
    """
    assert run_probe(probe, str(tmp_path / "out")) == ["True", "True", "1", "True"]


def test_nothing_is_loaded_in_a_thread_once_pyarrow_is_imported():
    import pyarrow  # noqa: F401

    libraries = arrow_libraries.ArrowLibraries()
    assert not libraries.done.locked()  # no thread was started: nothing to wait for
    libraries.wait()


def test_an_extension_file_is_found_without_importing_its_package():
    probe = """
        import sys
        from amqpcap.records.arrow_libraries import extension_file

        path = extension_file("pyarrow.lib").decode()
        print("pyarrow" in sys.modules, "/pyarrow/lib." in path, path.endswith(".so"))
        print(extension_file("pyarrow.no_such_module"), extension_file("no_such_package.lib"))
    """
    assert run_probe(probe) == ["False", "True", "True", "None", "None"]
