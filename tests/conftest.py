"""Shared test setup: make ``tests/`` importable so ``from fixtures import pcapgen`` works."""

import os
import sys

import pytest
from hypothesis import settings

# A shared machine can deschedule one example past hypothesis' 200 ms deadline: time is not
# what these properties test, so no deadline (tests that set their own settings keep theirs).
settings.register_profile("amqpcap", deadline=None)
settings.load_profile("amqpcap")

_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


def pytest_sessionstart(session):
    """In CI (AMQPCAP_REQUIRE_TOOLS) the compiled pass runs every compiled part: one that is not
    built, or stale, fails the run instead of silently testing pure Python twice."""
    import amqpcap
    from amqpcap import compiled

    where = os.environ.get("AMQPCAP_INSTALLED_FROM")  # tests run with an installed wheel
    if where and not amqpcap.__file__.startswith(where):
        raise pytest.UsageError(f"amqpcap comes from {amqpcap.__file__}, not the install in {where}")
    if not os.environ.get("AMQPCAP_REQUIRE_TOOLS") or os.environ.get("AMQPCAP_PURE", "") not in ("", "0"):
        return

    missing = [
        why
        for why in (compiled.choose(os.environ, compiled.built(n), n)[1] for n in compiled.PARTS)
        if "pure" in why
    ]
    if missing:
        raise pytest.UsageError("compiled pass without every compiled part: " + "; ".join(missing))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "compiled(part): a test of compiled part ``part``'s own behaviour, run in the compiled pass "
        "(deselected under AMQPCAP_PURE=1, where no part is selected)",
    )


def pytest_collection_modifyitems(config, items):
    """Under AMQPCAP_PURE=1 the tests of a compiled part's own behaviour are deselected (they
    run in the compiled pass); in the compiled pass each needs its part selected."""
    if os.environ.get("AMQPCAP_PURE", "") in ("", "0"):
        return
    keep = [item for item in items if item.get_closest_marker("compiled") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


@pytest.fixture(autouse=True)
def _compiled_part(request):
    """A ``compiled(part)`` test runs where the part is selected (fixtures/compiled.py)."""
    marker = request.node.get_closest_marker("compiled")
    if marker is not None:
        from fixtures.compiled import selected_or_skip

        for part in marker.args:
            selected_or_skip(part)
