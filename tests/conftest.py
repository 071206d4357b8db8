"""Shared test setup: make ``tests/`` importable so ``from fixtures import pcapgen`` works."""

import os
import sys

_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
