"""Row types of the generated protocol tables."""

from collections import namedtuple

# collections.namedtuple, not typing.NamedTuple: no typing import on the dissect path (~1.5 ms)
MethodSpec = namedtuple("MethodSpec", "name synchronous content responses fields")
MethodSpec.__doc__ = """One method of a version's tables: ``name`` ("class.method", the spec's spelling, with
hyphens), ``synchronous``, ``content`` (it carries content), ``responses`` (the full names of
its possible responses), ``fields`` (((field name, primitive type), ...) in wire order)."""
