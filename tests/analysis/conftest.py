import os
import sys

# make the fixture factory (tests/analysis/tables.py) importable as ``tables``
sys.path.insert(0, os.path.dirname(__file__))
