"""The wire layout of bridge/layout.py written out for others: the C clients' header and the layout
tables of docs/protocol.md. Both are checked in; tests/test_wire_schema.py fails when either differs
from what this module writes. After changing the layout, run from the repository root::

    python -m episodic.bridge.generate --c-header clients/c/episodic_layout.h --protocol docs/protocol.md
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from episodic.bridge.layout import (
    ALIGN,
    BATCH,
    BATCH_PARTS,
    BLOCKS,
    COMMAND,
    COMMAND_ARRAYS,
    MAGIC,
    MAX_LARGE,
    MAX_SMALL,
    MAX_VALUES,
    MESSAGE_BYTES,
    NAME_BYTES,
    REPLY,
    REPLY_ARRAYS,
    VERSION,
    Array,
    block_dtype,
    field_at,
    wire_dtype,
)

C_HEADER = "clients/c/episodic_layout.h"
PROTOCOL = "docs/protocol.md"


# -- the C header --------------------------------------------------------------------------------

def _c_name(*words: str) -> str:
    return "EP_" + "_".join(words).upper()


def _c_bytes(array: Array) -> str:
    """C expression of ``array``'s bytes, in terms of the macro's size arguments."""
    element = _c_name(array.element, "bytes") if array.element in BLOCKS else str(wire_dtype(array.element).itemsize)
    return " * ".join([f"(uint64_t){element}", *(f"({name})" for name in array.shape)])


def _c_arrays(block: str, kind: str, arrays: tuple[Array, ...], what: str) -> list[str]:
    """An enum naming ``arrays`` by position and a macro of their bytes for given sizes."""
    sizes = list(dict.fromkeys(name for array in arrays for name in array.shape))
    macro = _c_name(block, kind, "bytes")
    lines = [f"/* {what};", f" * {macro}(sizes) is an initializer of their bytes, in that order */", "enum {"]
    lines += [f"    {_c_name(block, kind, array.name)}," for array in arrays]
    lines += [f"    {_c_name(block, 'n', kind + 's')}", "};", f"#define {macro}({', '.join(sizes)}) {{ \\"]
    lines += [f"    {_c_bytes(array)}{',' if i < len(arrays) - 1 else ''} \\" for i, array in enumerate(arrays)]
    return lines + ["}", ""]


def c_header() -> str:
    """The text of clients/c/episodic_layout.h: every size, field offset and array of the layout as
    C constants."""
    lines = [
        f"/* {Path(C_HEADER).name}: the wire layout of the episodic shared-memory protocol, version {VERSION}",
        " * (docs/protocol.md), for the C client (episodic_client.c) and through it the MEX gateway.",
        " * Written by `python -m episodic.bridge.generate --c-header clients/c/episodic_layout.h` from",
        " * bridge/layout.py, the one description of the layout; do not edit (tests/test_wire_schema.py",
        " * fails when this file differs from what that command writes).",
        " * EP_<PART>_BYTES is a fixed part's size, EP_<PART>_<FIELD> a field's byte offset in it and",
        " * EP_<PART>_<FIELD>_SIZE the field's bytes; every number is little-endian. */",
        "#ifndef EPISODIC_LAYOUT_H", "#define EPISODIC_LAYOUT_H", "",
        "#include <stdint.h>", "",
        f'#define EP_MAGIC "{MAGIC.decode()}"  /* the first {len(MAGIC)} bytes of the header and of a command, '
        "no NUL */",
        f"#define EP_PROTOCOL_VERSION {VERSION}",
        f"#define EP_NAME_BYTES {NAME_BYTES}     /* longest state / log column name */",
        f"#define EP_MESSAGE_BYTES {MESSAGE_BYTES} /* longest reply message */",
        f"#define EP_ALIGN {ALIGN}           /* every block starts at a multiple of this many bytes */",
        "/* plausibility bounds on the header's sizes: joints, context, state and log columns and widths; */",
        f"#define EP_MAX_SMALL {MAX_SMALL}u",
        "/* samples, log steps, batch episodes and batch commands; values of the batch pool */",
        f"#define EP_MAX_LARGE {MAX_LARGE}u",
        f"#define EP_MAX_VALUES UINT64_C({MAX_VALUES})", "",
    ]
    for block, fields in BLOCKS.items():
        dtype = block_dtype(fields)
        lines += [f"/* {block} */", f"#define {_c_name(block, 'bytes')} {dtype.itemsize}"]
        for field in fields:
            offset, size = field_at(dtype, field.name)
            name = _c_name(block, field.name)
            lines += [f"#define {name} {offset}  /* {field.type} */", f"#define {name}_SIZE {size}"]
        lines.append("")
    lines += _c_arrays("COMMAND", "array", COMMAND_ARRAYS, "the float64 arrays after COMMAND, back to back")
    lines += _c_arrays("REPLY", "array", REPLY_ARRAYS, "the float64 arrays after REPLY, back to back")
    lines += _c_arrays("BATCH", "part", BATCH_PARTS,
                       f"the parts of the batch block after BATCH, each at a multiple of {ALIGN} bytes")
    lines += ["#endif", ""]
    names = [line.split()[1].split("(")[0] for line in lines if line.startswith("#define ")]
    names += [line.strip(" ,") for line in lines if line.startswith("    EP_")]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"C names of the layout given twice: {twice}; rename a field or an array in bridge/layout.py")
    return "\n".join(lines)


# -- the protocol document's tables --------------------------------------------------------------

_SYMBOL = {"n_dofs": "n"}  # the document's short names of sizes


def _shape(array: Array) -> str:
    names = [_SYMBOL.get(name, name) for name in array.shape]
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _term(factor: int, names: tuple[str, ...]) -> str:
    return "·".join([str(factor), *(_SYMBOL.get(name, name) for name in names)])


def _array_rows(arrays: tuple[Array, ...], start: int, aligned: bool) -> list[list[str]]:
    """name, shape, offset (a formula in the sizes) and meaning of each of ``arrays`` laid out from
    byte ``start`` (each rounded up to a multiple of ALIGN when ``aligned``)."""
    rows: list[list[str]] = []
    bytes_before: dict[tuple[str, ...], int] = {}  # shape -> bytes per element of it, of the arrays before
    aligned_before: list[str] = []  # align(bytes) of each array before
    for array in arrays:
        terms = aligned_before if aligned else [_term(n, shape) for shape, n in bytes_before.items()]
        itemsize = wire_dtype(array.element).itemsize
        element = (f" `{array.element}`, {itemsize} bytes each" if array.element in BLOCKS
                   else f" {array.element}" if aligned else "")
        rows.append([f"`{array.name}`", _shape(array) + element, " + ".join([str(start), *terms]), array.meaning])
        aligned_before.append(f"align({_term(itemsize, array.shape)})")
        bytes_before[array.shape] = bytes_before.get(array.shape, 0) + itemsize
    return rows


def _markdown(header: list[str], align: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    return "".join(line + "\n" for line in lines + ["| " + " | ".join(cells) + " |" for cells in rows])


def protocol_tables() -> dict[str, str]:
    """mark -> the markdown table that follows ``<!-- layout: mark -->`` in docs/protocol.md."""
    out = {}
    for block, fields in BLOCKS.items():
        dtype = block_dtype(fields)
        rows = [[str(field_at(dtype, f.name)[0]), f"`{f.name}`", f.type, f.meaning] for f in fields]
        out[block] = _markdown(["offset", "field", "type", "meaning"], ["---:", "---", "---", "---"], rows)
    for mark, arrays, start, where, what in (
            ("COMMAND arrays", COMMAND_ARRAYS, COMMAND.itemsize, "the command block", "used by"),
            ("REPLY arrays", REPLY_ARRAYS, REPLY.itemsize, "the reply block", "content")):
        out[mark] = _markdown(["array", "shape", f"offset in {where}", what], ["---"] * 4,
                              _array_rows(arrays, start, aligned=False))
    out["BATCH parts"] = _markdown(["part", "shape and type", "offset in the batch block", "content (written by)"],
                                   ["---"] * 4, _array_rows(BATCH_PARTS, ALIGN * -(-BATCH.itemsize // ALIGN),
                                                            aligned=True))
    return out


def _marked(mark: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- layout: {re.escape(mark)} -->\n)((?:\|.*\n)+)")


def protocol_text(text: str) -> str:
    """``text`` (docs/protocol.md) with every generated table replaced by the layout's; ValueError
    naming a mark the text lacks."""
    for mark, table in protocol_tables().items():
        text, found = _marked(mark).subn(lambda m: m.group(1) + table, text)  # noqa: B023 - used at once
        if found != 1:
            raise ValueError(f"docs/protocol.md has {found} tables marked '<!-- layout: {mark} -->'; "
                             f"it needs exactly one, right before the table")
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m episodic.bridge.generate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--c-header", metavar="PATH", type=Path, help=f"write the C header (e.g. {C_HEADER})")
    parser.add_argument("--protocol", metavar="PATH", type=Path,
                        help=f"rewrite the layout tables of the protocol document (e.g. {PROTOCOL}) in place")
    args = parser.parse_args(argv)
    if not (args.c_header or args.protocol):
        parser.error("give --c-header PATH, --protocol PATH or both")
    if args.c_header:
        args.c_header.write_text(c_header())
    if args.protocol:
        args.protocol.write_text(protocol_text(args.protocol.read_text()))


if __name__ == "__main__":
    main()
