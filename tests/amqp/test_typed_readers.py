"""The compiled decoder reads method arguments with the readers tools/gen_spec.py generates from
the XML (spec/readers_0_9.pxi), and its build is stamped with every file it includes.

That those readers decode what the reference decodes is tests/amqp/test_compiled_decoder.py's
(identical events for every method of every version, random values and damaged frames)."""

from __future__ import annotations

import os
import re

from fixtures.compiled import built_or_skip

from amqpcap import compiled
from amqpcap.amqp import spec

VERSIONS = ("0-8", "0-9", "0-9-1")


def test_every_method_argument_list_has_a_generated_typed_reader():
    fast09 = built_or_skip("fast09")
    kinds = set()
    for v in VERSIONS:
        for m in spec.get(v).METHODS.values():
            codes = tuple(fast09.TYPE_CODES[t] for _, t in m.fields)
            assert codes in fast09.LAYOUTS, (v, m.name, m.fields)
            kinds.add(codes)
    # one reader per list of types, not per method: lists of the same types share it
    assert set(fast09.LAYOUTS) == kinds
    assert len(kinds) < sum(len(spec.get(v).METHODS) for v in VERSIONS) / 2


def test_types_read_alike_share_a_type_code():
    fast09 = built_or_skip("fast09")
    codes = fast09.TYPE_CODES
    assert codes["timestamp"] == codes["longlong"] and codes["content"] == codes["longstr"]
    distinct = ("bit", "octet", "short", "long", "longlong", "shortstr", "table", "longstr")
    assert len({codes[t] for t in distinct}) == len(distinct)


def _includes(path: str) -> set:
    """The files ``path`` includes, and those they include, relative to the package."""
    out = set()
    with open(os.path.join(compiled.ROOT, path)) as f:
        for name in re.findall(r'^include "([^"]+)"', f.read(), re.M):
            rel = os.path.normpath(os.path.join(os.path.dirname(path), name))
            out |= {rel} | _includes(rel)
    return out


def test_each_compiled_part_is_stamped_with_every_file_it_includes():
    for part in compiled.PARTS.values():
        assert _includes(part.sources[0]) <= set(part.sources), part.name
