#!/usr/bin/env python3
"""Generate src/amqpcap/amqp/spec/v1_0.py from the OASIS AMQP 1.0 type definitions.

    python tools/gen_spec_1_0.py [--xml-dir specs/amqp-1.0] [--check]

``generate(xml_dir) -> str`` returns the module source (deterministic: same XML, same
bytes); ``main()`` writes it.

What the module holds (plain dicts and tuples, built once at import):

* ``ENCODINGS``: constructor octet -> Encoding(type, name, category, width): every primitive
  encoding (``category`` fixed / variable / compound / array; ``width`` the fixed value's
  octets, or the octets of the size (and count) prefix).
* ``COMPOSITES``: descriptor code -> Composite(name, symbol, provides, fields): every
  described list type (performatives, SASL frames, message sections that are lists,
  delivery states, source/target, error, transactions).  A field is Field(name, type,
  primitive, mandatory, multiple, default, requires): ``type`` as written, ``primitive``
  the primitive it restricts to (``*`` for any), ``requires`` the archetype it must
  provide.
* ``DESCRIBED``: descriptor code -> Described(name, symbol, source, provides) for the
  described types that are not lists (annotations, application-properties, data,
  amqp-value, ...).
* ``SYMBOLS``: descriptor symbol ("amqp:open:list") -> code; a described value may be
  identified either way.
* ``PERFORMATIVES``, ``SASL_FRAMES``, ``SECTIONS``, ``DELIVERY_STATES``, ``OUTCOMES``:
  code -> name, from what each type provides.
* ``METHOD_NAMES``: code -> the methods-table name of a performative or SASL frame
  (``open`` ... ``close``, ``sasl.mechanisms`` ... ``sasl.outcome``); ``METHODS`` the
  names in code order.
* ``CHOICES``: restricted type name -> ((value, name), ...) (role, settle modes, sasl-code,
  terminus durability / expiry policy, distribution mode, the error conditions, ...).
* ``ERROR_CONDITIONS``: condition symbol -> (restricted type, choice name), every type that
  provides error-condition (amqp, connection, session, link, transaction errors).
* ``RESTRICTED``: restricted type name -> its source type.
* ``DEFINITIONS``: name -> value (PORT, MIN-MAX-FRAME-SIZE, ...).
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET

import gen_spec_write

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT_PATH = os.path.join(REPO, "src", "amqpcap", "amqp", "spec", "v1_0.py")
DEFAULT_XML_DIR = os.path.join(REPO, "specs", "amqp-1.0")
FILES = ("types.xml", "transport.xml", "messaging.xml", "security.xml", "transactions.xml")
NS = "{http://www.amqp.org/schema/amqp.xsd}"

PRIMITIVES = frozenset(
    "null boolean ubyte ushort uint ulong byte short int long float double decimal32 decimal64 "
    "decimal128 char timestamp uuid binary string symbol list map array".split()
)


def _code(text: str) -> int:
    hi, lo = text.split(":")
    return (int(hi, 16) << 32) | int(lo, 16)


def _provides(t) -> tuple:
    return tuple(p.strip() for p in (t.get("provides") or "").split(",") if p.strip())


def _load(xml_dir: str):
    types = []
    definitions = {}
    for name in FILES:
        root = ET.parse(os.path.join(xml_dir, name)).getroot()
        for section in root.iter(NS + "section"):
            for t in section.iter(NS + "type"):
                types.append(t)
            for d in section.iter(NS + "definition"):
                definitions[d.get("name")] = d.get("value")
    return types, definitions


def _primitive(name: str, restricted: dict) -> str:
    seen = set()
    while name not in PRIMITIVES and name != "*" and name in restricted and name not in seen:
        seen.add(name)
        name = restricted[name]
    return name


def generate(xml_dir: str = DEFAULT_XML_DIR) -> str:
    types, definitions = _load(xml_dir)
    encodings = {}
    restricted = {}
    for t in types:
        if t.get("class") == "primitive":
            for e in t.iter(NS + "encoding"):
                encodings[int(e.get("code"), 16)] = (
                    t.get("name"),
                    e.get("name") or t.get("name"),
                    e.get("category"),
                    int(e.get("width")),
                )
        elif t.get("class") == "restricted":
            restricted[t.get("name")] = t.get("source")
    composites = {}
    described = {}
    symbols = {}
    choices = {}
    conditions = {}
    for t in types:
        name = t.get("name")
        desc = t.find(NS + "descriptor")
        if t.get("class") == "restricted":
            ch = tuple((c.get("value"), c.get("name")) for c in t.iter(NS + "choice"))
            if ch:
                choices[name] = ch
            if "error-condition" in _provides(t):
                for value, cname in ch:
                    conditions[value] = (name, cname)
        if desc is None:
            continue
        code = _code(desc.get("code"))
        symbols[desc.get("name")] = code
        if t.get("class") == "composite":
            fields = tuple(
                (
                    f.get("name"),
                    f.get("type"),
                    _primitive(f.get("type"), restricted),
                    f.get("mandatory") == "true",
                    f.get("multiple") == "true",
                    f.get("default"),
                    f.get("requires"),
                )
                for f in t.iter(NS + "field")
            )
            composites[code] = (name, desc.get("name"), _provides(t), fields)
        else:
            described[code] = (name, desc.get("name"), t.get("source"), _provides(t))

    def providing(archetype):
        out = {}
        for code, (n, _s, prov, _f) in composites.items():
            if archetype in prov:
                out[code] = n
        for code, (n, _s, _src, prov) in described.items():
            if archetype in prov:
                out[code] = n
        return dict(sorted(out.items()))

    performatives = providing("frame")
    sasl = providing("sasl-frame")
    method_names = {c: n for c, n in performatives.items()}
    method_names.update({c: "sasl." + n.removeprefix("sasl-") for c, n in sasl.items()})
    method_names = dict(sorted(method_names.items()))

    out = [
        "# generated by tools/gen_spec_1_0.py, do not edit",
        '"""AMQP 1.0 type tables, from the OASIS type definitions in specs/amqp-1.0 (see',
        'tools/gen_spec_1_0.py for the layout)."""',
        "from collections import namedtuple",
        "",
        "# collections.namedtuple, not typing.NamedTuple: no typing import on the dissect path (~2 ms of",
        "# the start of every run that meets a 1.0 conversation)",
        "",
        "# type: the primitive type name; name: the encoding's name (the type's own name where the spec",
        "# gives none); category: fixed, variable, compound, array; width: octets of a fixed value, or of",
        "# the size (and count) prefix",
        'Encoding = namedtuple("Encoding", "type name category width")',
        "# type: as written in the spec (a restricted type, a composite, or *); primitive: the primitive",
        "# it restricts to (* for any); default: str or None; requires: the archetype the value must",
        "# provide (or None)",
        'Field = namedtuple("Field", "name type primitive mandatory multiple default requires")',
        "# symbol: the symbolic descriptor",
        'Composite = namedtuple("Composite", "name symbol provides fields")',
        'Described = namedtuple("Described", "name symbol source provides")',
        "",
        "ENCODINGS = {",
    ]
    for code in sorted(encodings):
        out.append(f"    0x{code:02x}: Encoding{encodings[code]!r},")
    out.append("}")
    out.append("")
    out.append("COMPOSITES = {")
    for code in sorted(composites):
        n, s, prov, fields = composites[code]
        out.append(f"    0x{code:x}: Composite(")
        out.append(f"        {n!r},")
        out.append(f"        {s!r},")
        out.append(f"        {prov!r},")
        out.append("        (")
        for f in fields:
            out.append(f"            Field{f!r},")
        out.append("        ),")
        out.append("    ),")
    out.append("}")
    out.append("")
    out.append("DESCRIBED = {")
    for code in sorted(described):
        out.append(f"    0x{code:x}: Described{described[code]!r},")
    out.append("}")
    out.append("")
    out.append("SYMBOLS = {")
    for sym, code in sorted(symbols.items(), key=lambda kv: kv[1]):
        out.append(f"    {sym!r}: 0x{code:x},")
    out.append("}")
    for title, table in (
        ("PERFORMATIVES", performatives),
        ("SASL_FRAMES", sasl),
        ("SECTIONS", providing("section")),
        ("DELIVERY_STATES", providing("delivery-state")),
        ("OUTCOMES", providing("outcome")),
        ("METHOD_NAMES", method_names),
    ):
        out.append("")
        out.append(f"{title} = {{")
        for code, n in table.items():
            out.append(f"    0x{code:x}: {n!r},")
        out.append("}")
    out.append("")
    out.append("METHODS = tuple(METHOD_NAMES.values())")
    for title, table in (
        ("CHOICES", choices),
        ("ERROR_CONDITIONS", conditions),
        ("RESTRICTED", restricted),
        ("DEFINITIONS", definitions),
    ):
        out += ["", f"{title} = {{", *(f"    {n!r}: {table[n]!r}," for n in sorted(table)), "}"]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    return gen_spec_write.main(__doc__, ("--xml-dir", DEFAULT_XML_DIR), OUT_PATH, generate, argv)


if __name__ == "__main__":
    sys.exit(main())
