"""An exception as a plugin author reads it: its type, its message and the
frames of the plugin's own code (file, line, function, source line), not
the SDK's or the interpreter's."""

from __future__ import annotations

import os
import traceback

#: The SDK's own folder: its frames are left out of a report.
_SDK = os.path.dirname(os.path.abspath(__file__))
#: At most this many of the plugin's frames, the innermost ones.
_MAX_FRAMES = 8


def _own(filename: str) -> bool:
    path = os.path.abspath(filename)
    return not path.startswith(_SDK + os.sep) and not filename.startswith("<")


def report(e: BaseException) -> str:
    """`Type: message`, then the plugin's frames, innermost last, as a
    Python traceback shows them (`File "plugin.py", line 27, in helper`)."""
    head = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    frames = [f for f in traceback.extract_tb(e.__traceback__) if _own(f.filename)][-_MAX_FRAMES:]
    if not frames:
        return head
    lines = [head, "Traceback (the plugin's frames, most recent call last):"]
    for frame in frames:
        lines.append(f'  File "{os.path.basename(frame.filename)}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)
