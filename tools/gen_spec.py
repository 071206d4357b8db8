#!/usr/bin/env python3
"""Generate src/amqpcap/amqp/spec/v*.py and the 0-9 readers from the AMQP XML specifications.

    python tools/gen_spec.py [--specs specs]

The generated modules are committed; tests/amqp/test_spec_generated.py checks
they are what this script produces.  0-8, 0-9 and 0-9-1 share one table shape
(classes of methods with fields); 0-10 has its own generator
(tools/gen_spec_0_10.py), called from here when present.  It also writes src/amqpcap/values.py and
values_1_0.py, the value classes of tools/gen_classes.py.

Dialect additions not in any XML file we have (documented in docs/dialects.md):
RabbitMQ's connection.blocked / unblocked (10.60 / 10.61) and
connection.update-secret / update-secret-ok (10.70 / 10.71) in 0-9-1.
"""

from __future__ import annotations

import argparse
import os
import sys
import xml.etree.ElementTree as ET

import gen_classes
import gen_spec_write

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT_DIR = os.path.join(REPO, "src", "amqpcap", "amqp", "spec")
DEFAULT_SPECS = os.path.join(REPO, "specs")  # vendored: a clean clone regenerates and checks

# version -> (module name, XML path under specs/)
SOURCES = {
    "0-8": ("v0_8", "0-8/amqp0-8.stripped.xml"),
    "0-9": ("v0_9", "0-9/amqp0-9.stripped.xml"),
    "0-9-1": ("v0_9_1", "0-9-1-rabbit/amqp0-9-1.stripped.extended.xml"),
}

# RabbitMQ extensions to 0-9-1 that its published XML does not carry.
EXTRA_METHODS = {
    "0-9-1": [
        # (class_id, method_id, name, synchronous, content, responses, fields)
        (10, 60, "connection.blocked", False, False, (), (("reason", "shortstr"),)),
        (10, 61, "connection.unblocked", False, False, (), ()),
        (
            10,
            70,
            "connection.update-secret",
            True,
            False,
            ("connection.update-secret-ok",),
            (("new-secret", "longstr"), ("reason", "shortstr")),
        ),
        (10, 71, "connection.update-secret-ok", True, False, (), ()),
    ],
}

PRIMITIVES = {"bit", "octet", "short", "long", "longlong", "shortstr", "longstr", "table", "timestamp"}


def norm(name: str) -> str:
    """0-8 writes names with spaces ("frame max"); later versions with hyphens."""
    return name.strip().replace(" ", "-").lower()


def resolve(domains: dict[str, str], field: ET.Element, undefined: set) -> str:
    t = field.get("type")
    if t:
        return norm(t)
    d = norm(field.get("domain", ""))
    seen = set()
    while d in domains and d not in PRIMITIVES and d not in seen:
        seen.add(d)
        d = domains[d]
    if d in PRIMITIVES:
        return d
    # 0-9 leaves the domain "content" (message.transfer body) undefined: the
    # codec treats it specially; record the domain name as the type.
    undefined.add(d)
    return d


def parse(xml_path: str, version: str) -> dict:
    root = ET.parse(xml_path).getroot()
    domains = {norm(d.get("name")): norm(d.get("type")) for d in root.iter("domain")}
    constants, reply_codes, frame_types = [], {}, {}
    for c in root.iter("constant"):
        name, value, cls = norm(c.get("name")), int(c.get("value")), c.get("class")
        constants.append((name, value))
        if name.startswith("frame-") and value < 20 and name not in ("frame-end",):
            frame_types[value] = name[len("frame-") :]
        if cls and "error" in cls:
            reply_codes[value] = (name, "soft" if "soft" in cls else "hard")
        elif name == "reply-success":
            reply_codes[value] = (name, None)
    classes, methods, properties = {}, [], {}
    undefined: set = set()
    for cl in root.iter("class"):
        cname, cid = norm(cl.get("name")), int(cl.get("index"))
        classes[cid] = cname
        props = tuple((norm(f.get("name")), resolve(domains, f, undefined)) for f in cl.findall("field"))
        if props:
            properties[cid] = props
        for m in cl.findall("method"):
            mname = norm(m.get("name"))
            fields = tuple((norm(f.get("name")), resolve(domains, f, undefined)) for f in m.findall("field"))
            responses = tuple(f"{cname}.{norm(r.get('name'))}" for r in m.findall("response"))
            methods.append(
                (
                    cid,
                    int(m.get("index")),
                    f"{cname}.{mname}",
                    m.get("synchronous") == "1",
                    m.get("content") == "1",
                    responses,
                    fields,
                )
            )
    for extra in EXTRA_METHODS.get(version, []):
        methods.append(extra)
    methods.sort()
    return dict(
        constants=constants,
        reply_codes=reply_codes,
        frame_types=frame_types,
        classes=classes,
        methods=methods,
        properties=properties,
        undefined=sorted(undefined),
        source=os.path.basename(xml_path),
    )


def render(version: str, t: dict) -> str:
    out = [
        f'"""AMQP {version} protocol tables.',
        "",
        f"Generated by tools/gen_spec.py from {t['source']}; do not edit.",
        '"""',
        "from amqpcap.amqp.spec._types import MethodSpec",
        "",
        f"VERSION = {version!r}",
        "",
        "CONSTANTS = {",
        *(f"    {n!r}: {v!r}," for n, v in t["constants"]),
        "}",
        "",
        "# frame type octet -> name",
        "FRAME_TYPES = {",
        *(f"    {k!r}: {v!r}," for k, v in sorted(t["frame_types"].items())),
        "}",
        "",
        "# reply code -> (name, 'soft' | 'hard' | None)",
        "REPLY_CODES = {",
        *(f"    {k!r}: {v!r}," for k, v in sorted(t["reply_codes"].items())),
        "}",
        "",
        "CLASSES = {",
        *(f"    {k!r}: {v!r}," for k, v in sorted(t["classes"].items())),
        "}",
        "",
        "# (class_id, method_id) -> MethodSpec(name, synchronous, content, responses, fields)",
        "METHODS = {",
    ]
    for cid, mid, name, sync, content, responses, fields in t["methods"]:
        out.append(
            f"    ({cid}, {mid}): MethodSpec({name!r}, {sync!r}, {content!r}, {responses!r}, {fields!r}),"
        )
    out += [
        "}",
        "",
        "# class_id -> content header properties in flag order: ((name, type), ...)",
        "PROPERTIES = {",
        *(f"    {k!r}: {v!r}," for k, v in sorted(t["properties"].items())),
        "}",
        "",
        f"UNDEFINED_DOMAINS = {tuple(t['undefined'])!r}",
        "",
    ]
    return "\n".join(out)


# How each field type of 0-8 / 0-9 / 0-9-1 is read: the one table of field types both kinds of
# generated readers are written from.  type -> (the compiled decoder's type code, (struct code,
# size) of a fixed-size type, or the call of the runtime reader of that type: Python (fields_0_9.py,
# returns (value, end)), Cython (fields_0_9.pxi, returns the end or -1)).  Fixed-size types run
# together are read by one struct format (dpkt style) and one bounds check; up to eight bits
# share an octet.
TYPES = {
    "bit": ("P_BIT", None, None, None),
    "octet": ("P_OCTET", ("B", 1), None, None),
    "short": ("P_SHORT", ("H", 2), None, None),
    "long": ("P_LONG", ("I", 4), None, None),
    "longlong": ("P_LONGLONG", ("Q", 8), None, None),
    "timestamp": ("P_LONGLONG", ("Q", 8), None, None),
    "shortstr": (
        "P_SHORTSTR",
        None,
        "shortstr_value(buf, off, end, {name!r})",
        "shortstr_field(b, off, end, {i}, names, a, w)",
    ),
    "table": (
        "P_TABLE",
        None,
        "decode_table_at(buf, off, end, 0, rabbit)",
        "table_field(b, off, end, rabbit, {i}, names, a, w)",
    ),
    "longstr": (
        "P_LONGSTR",
        None,
        "longstr_value(buf, off, end, {name!r})",
        "longstr_field(b, off, end, {i}, names, a, w)",
    ),
    "content": (
        "P_LONGSTR",
        None,
        "longstr_value(buf, off, end, {name!r})",
        "longstr_field(b, off, end, {i}, names, a, w)",
    ),
}
FIXED = {t: v[1] for t, v in TYPES.items() if v[1]}
VARIABLE = {t: v[2] for t, v in TYPES.items() if v[2]}


def steps(fields: tuple):
    """``fields`` as the generated readers read them: ("fixed", [(index, name, type), ...]) for a
    run of fixed-size fields, ("bits", [...]) for the bits of one octet, ("one", [...]) else."""
    i, nf = 0, len(fields)
    while i < nf:
        t = fields[i][1]
        kind = "fixed" if t in FIXED else "bits" if t == "bit" else "one"
        j = i + 1
        if kind == "fixed":
            while j < nf and fields[j][1] in FIXED:
                j += 1
        elif kind == "bits":
            while j < nf and fields[j][1] == "bit" and j - i < 8:
                j += 1
        yield kind, [(k, fields[k][0], fields[k][1]) for k in range(i, j)]
        i = j


def reader(fields: tuple, number: int, structs: dict) -> list:
    """The lines of ``def rN(buf, off, end, rabbit, a)``: ``fields`` read into ``a``."""
    lines = [f"def r{number}(buf, off, end, rabbit, a):"]
    for kind, run in steps(fields):
        name = run[0][1]
        if kind == "fixed":
            fmt = ">" + "".join(FIXED[t][0] for _, _, t in run)
            size = sum(FIXED[t][1] for _, _, t in run)
            s = structs.setdefault(fmt, f"S_{fmt[1:]}")
            lines += [
                f"    if off + {size} > end:",
                f"        raise DecodeError({name + ': fixed fields past end'!r})",
                f"    {', '.join(f'a[{n!r}]' for _, n, _ in run)}, = {s}.unpack_from(buf, off)",
                f"    off += {size}",
            ]
        elif kind == "bits":
            lines += [
                "    if off >= end:",
                f"        raise DecodeError({name + ': bit past end'!r})",
                "    b = buf[off]",
                "    off += 1",
                *(f"    a[{n!r}] = bool(b & {1 << bit})" for bit, (_, n, _) in enumerate(run)),
            ]
        else:
            lines.append(f"    a[{name!r}], off = " + VARIABLE[run[0][2]].format(name=name))
    return lines + ["    return off", "", ""]


def typed_reader(types: tuple, number: int) -> list:
    """The lines of the Cython reader ``fieldsN`` of the field types ``types``: fields_0_9.pxi's
    read_fields for them, straight-line (the names are the caller's: one reader serves every
    argument list of these types)."""
    fields = tuple((str(i), t) for i, t in enumerate(types))
    lines = [
        f"cdef Py_ssize_t fields{number}(",
        "    const uint8_t *b, Py_ssize_t off, Py_ssize_t end, bint rabbit, tuple names, dict a, amqpcap_wire *w",
        ") except -2:",
    ]
    if "bit" in types:
        lines.append("    cdef uint8_t bits")
    for kind, run in steps(fields):
        if kind == "fixed":
            size = sum(FIXED[t][1] for _, _, t in run)
            lines += [f"    if off + {size} > end:", "        return -1"]
            for i, _, t in run:
                lines.append(f"    off = fixed_field({TYPES[t][0]}, {FIXED[t][1]}, b, off, {i}, names, a, w)")
                if TYPES[t][0] == "P_LONGLONG":
                    lines += ["    if off < 0:", "        return -1"]
        elif kind == "bits":
            lines += ["    if off >= end:", "        return -1", "    bits = b[off]", "    off += 1"]
            lines += [
                f"    put_obj({i}, (bits & {1 << bit}) != 0, names, a, w)"
                for bit, (i, _, _) in enumerate(run)
            ]
        else:
            i, _, t = run[0]
            lines += ["    off = " + TYPES[t][3].format(i=i), "    if off < 0:", "        return -1"]
    return lines + ["    return off", "", ""]


def ctuple(items) -> str:
    """A tuple's source text of the names ``items``."""
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def layouts_of(tables: dict) -> list:
    """Every distinct argument list of the methods of ``tables``, sorted."""
    return sorted({m[6] for t in tables.values() for m in t["methods"]})


def render_typed_readers(tables: dict) -> str:
    """spec/readers_0_9.pxi: the typed twin of spec/readers_0_9.py for the compiled decoder, a
    reader per distinct list of field types (by their type codes)."""
    code = {t: v[0] for t, v in TYPES.items()}
    # types read alike (timestamp and longlong, content and longstr) share a reader
    canonical = {v[0]: t for t, v in reversed(TYPES.items())}
    kinds = sorted({tuple(canonical[code[t]] for _, t in fields) for fields in layouts_of(tables)})
    out = [
        "# Typed readers of the 0-8 / 0-9 / 0-9-1 method arguments, one per list of field types, for",
        "# the compiled decoder (fast09.pyx includes this after amqp/fields_0_9.pxi, whose steps they",
        "# call).  Generated by tools/gen_spec.py from the XML of those versions and its table of field",
        "# types (TYPES), as spec/readers_0_9.py is; do not edit.",
        "",
        "# field type -> the compiled decoder's type code (wirefields.pxi)",
        "TYPE_CODES = {",
        *(f"    {t!r}: {c}," for t, c in code.items()),
        "}",
        "",
        "",
    ]
    for k, types in enumerate(kinds):
        out += typed_reader(types, k)
    out += [
        "# {(type code, ...): the index of its reader in FIELD_READERS}",
        "LAYOUTS = {",
        *(
            f"    {ctuple(code[t] for t in types)}: {k},  # {' '.join(types) or 'no fields'}"
            for k, types in enumerate(kinds)
        ),
        "}",
        f"cdef fields_fn FIELD_READERS[{len(kinds)}]",
        *(f"FIELD_READERS[{k}] = fields{k}" for k in range(len(kinds))),
        "",
    ]
    return "\n".join(out)


def render_readers(tables: dict) -> str:
    """spec/readers_0_9.py: a reader per distinct argument list of the methods of ``tables``."""
    layouts = layouts_of(tables)
    structs: dict = {}
    body = []
    for k, fields in enumerate(layouts):
        body += reader(fields, k, structs)
    out = [
        '"""Readers of the 0-8 / 0-9 / 0-9-1 method arguments, one per argument list.',
        "",
        "Generated by tools/gen_spec.py from the XML of those versions and its table of field types",
        "(TYPES); do not edit.  The variable-size types are read by the runtime",
        "readers of fields_0_9, written there once.",
        '"""',
        "",
        "from struct import Struct",
        "",
        "from amqpcap.amqp.fields_0_9 import DecodeError, decode_table_at, longstr_value, shortstr_value",
        "",
        *(f"{name} = Struct({fmt!r})" for fmt, name in sorted(structs.items())),
        "",
        "",
        *body,
        "# {((name, type), ...): reader(buf, off, end, rabbit, args) -> end offset}",
        "READERS = {",
        *(f"    {fields!r}: r{k}," for k, fields in enumerate(layouts)),
        "}",
        "",
    ]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", default=DEFAULT_SPECS)
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated module is out of date")
    a = ap.parse_args(argv)
    outputs = {}
    tables = {}
    for version, (module, rel) in SOURCES.items():
        tables[version] = parse(os.path.join(a.specs, rel), version)
        outputs[module + ".py"] = render(version, tables[version])
    outputs["readers_0_9.py"] = render_readers(tables)
    outputs["readers_0_9.pxi"] = render_typed_readers(tables)
    try:
        sys.path.insert(0, HERE)
        import gen_spec_0_10  # noqa: E402

        outputs["v0_10.py"] = gen_spec_0_10.generate(os.path.join(a.specs, "0-10", "amqp.0-10.stripped.xml"))
    except ImportError:
        pass
    written = {os.path.join(OUT_DIR, name): src for name, src in outputs.items()}
    written.update(gen_classes.generate())  # the value classes: events, connection facts
    return gen_spec_write.write(written, a.check)


if __name__ == "__main__":
    sys.exit(main())
