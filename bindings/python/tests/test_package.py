"""The installed package itself: its extension is stripped."""

import struct
from pathlib import Path

import sandwit


def section_names(path: Path) -> set[str]:
    """The names of an ELF64 (little-endian) file's sections."""
    with open(path, "rb") as f:
        header = f.read(64)
        assert header[:4] == b"\x7fELF" and header[4] == 2 and header[5] == 1, path
        shoff, = struct.unpack_from("<Q", header, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", header, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
        _, _, _, _, names_at, names_size = sections[shstrndx]
        f.seek(names_at)
        names = f.read(names_size)
    return {names[s[0]:names.index(b"\0", s[0])].decode() for s in sections}


def test_the_extension_is_stripped():
    extension = Path(sandwit._sandwit.__file__)
    names = section_names(extension)
    assert ".text" in names and ".dynsym" in names, names  # read right
    leftovers = sorted(n for n in names if n == ".symtab" or n.startswith(".debug"))
    assert not leftovers, f"{extension} is not stripped: {leftovers}"
