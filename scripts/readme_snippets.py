#!/usr/bin/env python3
"""Extracts every ```python fence of the READMEs that document the Python
package, so that they are type-checked (scripts/test-python runs
`mypy --strict` over them) and run (bindings/python/tests/test_readme.py).

    python3 scripts/readme_snippets.py OUTDIR

writes each fence to OUTDIR as a module of its own, named after its README
and line (`bindings_python_README_35.py`), and prints their paths. Each
fence is a whole program: its imports and names are its own, as a reader
copying it gets it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The READMEs whose Python fences are checked.
READMES = ("README.md", "bindings/python/README.md")
FENCE = re.compile(r"^```python\s*$")


@dataclass(frozen=True)
class Snippet:
    readme: str
    """The README's path, relative to the repository."""
    line: int
    """The line of the fence's first line of code."""
    code: str

    @property
    def module(self) -> str:
        """A module name for it: the README's path and the line."""
        stem = re.sub(r"[^A-Za-z0-9]+", "_", self.readme.removesuffix(".md"))
        return f"{stem}_{self.line}"


def snippets(readme: str) -> list[Snippet]:
    """The ```python fences of `readme` (a path relative to the repository),
    in order. An unclosed fence is an error."""
    lines = (REPO / readme).read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        start = i + 1
        end = start
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise SystemExit(f"{readme}:{i + 1}: a ```python fence is not closed")
        found.append(Snippet(readme, start + 1, "\n".join(lines[start:end]) + "\n"))
        i = end + 1
    return found


def all_snippets() -> list[Snippet]:
    """The fences of every README in `READMES`."""
    return [s for readme in READMES for s in snippets(readme)]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for snippet in all_snippets():
        path = out / f"{snippet.module}.py"
        header = f"# {snippet.readme}, line {snippet.line}\n"
        path.write_text(header + snippet.code)
        print(path)


if __name__ == "__main__":
    main()
