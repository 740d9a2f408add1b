"""bridge/layout.py is the one description of the wire: the C clients' header and the layout tables
of docs/protocol.md are what ``python -m episodic.bridge.generate`` writes from it, the C client takes
every offset from that header, the header compiles to the layout's numbers, and the layout is still
the one of its protocol version. (tests/test_readme.py reads the document's tables back and compares
them with the dtypes.)"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess

import numpy as np
import pytest

from episodic.bridge.generate import C_HEADER, PROTOCOL, c_header, main, protocol_text
from episodic.bridge.layout import (
    ALIGN,
    BATCH_PARTS,
    BLOCKS,
    COMMAND_ARRAYS,
    MAGIC,
    MESSAGE_BYTES,
    NAME_BYTES,
    REPLY_ARRAYS,
    VERSION,
    Sizes,
    block_dtype,
    field_at,
    wire_dtype,
)
from episodic.interface.columns import step_widths
from tests.helpers import ROOT

REGENERATE = "python -m episodic.bridge.generate --c-header clients/c/episodic_layout.h --protocol docs/protocol.md"
# sha256 of the wire description of each protocol version: a change of the layout needs a new VERSION
LAYOUT_OF_VERSION = {5: "69fbf11c204ff2125e84690022d370dfcedf87ce714435d39e218c47c5f57f94"}


def wire_description() -> str:
    """Every name, offset, type and order of the layout, as text."""
    blocks = tuple((name, tuple((f.name, field_at(block_dtype(fields), f.name)[0], f.type) for f in fields),
                    block_dtype(fields).itemsize) for name, fields in BLOCKS.items())
    arrays = tuple((a.name, a.shape, a.element) for group in (COMMAND_ARRAYS, REPLY_ARRAYS, BATCH_PARTS)
                   for a in group)
    return repr((MAGIC, NAME_BYTES, MESSAGE_BYTES, ALIGN, blocks, arrays))


def test_the_layout_is_the_one_of_its_protocol_version():
    digest = hashlib.sha256(wire_description().encode()).hexdigest()
    assert LAYOUT_OF_VERSION.get(VERSION) == digest, (
        f"the wire layout of bridge/layout.py changed under protocol version {VERSION}: clients built for "
        f"{VERSION} would misread it. Raise VERSION (and EP_PROTOCOL_VERSION through the generated header) and "
        f"pin the new layout here as {{{VERSION + 1}: '{digest}'}}")


def test_c_header_is_written_from_the_layout():
    assert (ROOT / C_HEADER).read_text() == c_header(), f"{C_HEADER} is out of date; run {REGENERATE}"


def test_protocol_tables_are_written_from_the_layout():
    text = (ROOT / PROTOCOL).read_text()
    assert protocol_text(text) == text, f"the layout tables of {PROTOCOL} are out of date; run {REGENERATE}"


def test_a_document_without_a_marked_table_is_refused():
    text = (ROOT / PROTOCOL).read_text().replace("<!-- layout: REPLY arrays -->\n", "")
    with pytest.raises(ValueError, match="0 tables marked '<!-- layout: REPLY arrays -->'"):
        protocol_text(text)


def test_generate_writes_both_files(tmp_path):
    header, protocol = tmp_path / "episodic_layout.h", tmp_path / "protocol.md"
    text = (ROOT / PROTOCOL).read_text()
    protocol.write_text(re.sub(r"(<!-- layout: COMMAND -->\n(?:\|.*\n){2})\|.*\n", r"\1", text))  # one row less
    main(["--c-header", str(header), "--protocol", str(protocol)])
    assert header.read_text() == (ROOT / C_HEADER).read_text()
    assert protocol.read_text() == (ROOT / PROTOCOL).read_text()  # the dropped row is back


def test_c_client_takes_every_offset_from_the_header():
    """No field or block offset written as a number in the C client: each is a name of episodic_layout.h."""
    source = (ROOT / "clients" / "c" / "episodic_client.c").read_text()
    literal = re.findall(r"(?:get_u|put_u|get_i32|get_f64|put_f64|GET|PUT)\([^;]*?\+ *\d+\b(?! *\*)[^;]*", source)
    assert not literal, f"offsets as numbers in episodic_client.c (use the EP_ names of episodic_layout.h): {literal}"
    assert not re.search(r"#define \w*_BYTES \d", source), "a block size defined in episodic_client.c"
    assert '#include "episodic_layout.h"' in (ROOT / "clients" / "c" / "episodic_client.h").read_text()


CHECK_SIZES = Sizes(7, 20_000, 60_000, 64, ("a", "b", "c", "d"), step_widths(7, 4), 500.0, 256, 4096, 1 << 21)


def c_probe() -> str:
    """A C program that prints every number of episodic_layout.h, name and value, one a line."""
    s = CHECK_SIZES
    lines = ['#include <inttypes.h>', '#include <stdio.h>', '#include "episodic_layout.h"', "int main(void) {",
             f"    const uint64_t arrays[] = EP_COMMAND_ARRAY_BYTES({s.n_dofs}, {s.max_context}, {s.max_samples});",
             f"    const uint64_t replies[] = EP_REPLY_ARRAY_BYTES({s.n_state}, {s.n_dofs});",
             f"    const uint64_t parts[] = EP_BATCH_PART_BYTES({s.max_batch_commands}, {s.max_batch_values}, "
             f"{s.max_batch}, {s.n_state});", "    int i;",
             '    printf("version %d\\nname %d\\nmessage %d\\nalign %d\\nmagic %s\\n", EP_PROTOCOL_VERSION, '
             'EP_NAME_BYTES, EP_MESSAGE_BYTES, EP_ALIGN, EP_MAGIC);']
    for name, fields in BLOCKS.items():
        lines.append(f'    printf("{name} bytes %d\\n", EP_{name}_BYTES);')
        for f in fields:
            macro = f"EP_{name}_{f.name}".upper()
            lines.append(f'    printf("{name} {f.name} %d %d\\n", {macro}, {macro}_SIZE);')
    for array, count in (("arrays", "EP_COMMAND_N_ARRAYS"), ("replies", "EP_REPLY_N_ARRAYS"),
                         ("parts", "EP_BATCH_N_PARTS")):
        lines.append(f'    for (i = 0; i < {count}; i++) printf("{array} %d %" PRIu64 "\\n", i, {array}[i]);')
    return "\n".join(lines + ["    return 0;", "}", ""])


@pytest.mark.slow  # a compiler and a subprocess
def test_c_header_compiles_to_the_layout(tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc)")
    (tmp_path / "probe.c").write_text(c_probe())
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", f"-I{ROOT / 'clients' / 'c'}", "-o",
                    str(tmp_path / "probe"), str(tmp_path / "probe.c")], check=True, capture_output=True, text=True)
    out = subprocess.run([str(tmp_path / "probe")], check=True, capture_output=True, text=True).stdout.splitlines()
    expected = [f"version {VERSION}", f"name {NAME_BYTES}", f"message {MESSAGE_BYTES}", f"align {ALIGN}",
                f"magic {MAGIC.decode()}"]
    for name, fields in BLOCKS.items():
        dtype = block_dtype(fields)
        expected.append(f"{name} bytes {dtype.itemsize}")
        expected += [f"{name} {f.name} {' '.join(map(str, field_at(dtype, f.name)))}" for f in fields]
    for label, arrays in (("arrays", COMMAND_ARRAYS), ("replies", REPLY_ARRAYS), ("parts", BATCH_PARTS)):
        expected += [f"{label} {i} {wire_dtype(a.element).itemsize * int(np.prod(CHECK_SIZES.shape(a)))}"
                     for i, a in enumerate(arrays)]
    assert out == expected
