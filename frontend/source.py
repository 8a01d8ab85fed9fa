"""Reading a .tdsl file: its text as Python reads text files, and, for a file that is not UTF-8, where it stops
being UTF-8 (a located error at the first undecodable byte).  A file that cannot be read at all is a `TdslError`.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Union

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import SourceError, TdslError, visible
from tdsl.frontend.limits import MAX_SOURCE_CHARS


def read_source(path: Union[str, Path]) -> str:
    """The text of a .tdsl file, as Python reads text files: a byte-order mark dropped, '\\r\\n' and a lone
    '\\r' read as '\\n'.  Past the size limit only one more character is read: `parse` refuses it anyway."""
    shown = visible(str(path))  # a path may hold control characters too
    try:
        with open(path, encoding="utf-8-sig") as file:
            return file.read(MAX_SOURCE_CHARS + 1)
    except FileNotFoundError:
        raise TdslError(f"cannot read '{shown}': no such file") from None
    except IsADirectoryError:
        raise TdslError(f"cannot read '{shown}': it is a directory") from None
    except UnicodeDecodeError:
        raise _not_utf8(Path(path)) from None
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise TdslError(f"cannot read '{shown}': {getattr(err, 'strerror', None) or err}") from None


def _not_utf8(path: Path) -> TdslError:
    """Where a file stops being UTF-8: a located error at the first undecodable byte (shown as '\\xNN')."""
    limit = 4 * (MAX_SOURCE_CHARS + 1)  # bytes enough for the characters `read_source` reads
    try:
        with open(path, "rb") as file:
            data = file.read(limit)
    except OSError:
        data = b""
    cut = len(data) == limit
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        if not (cut and err.end == len(data)):  # not merely a character cut where reading stopped
            return _undecodable_byte(data, err.start, err.end, str(path))
    return TdslError(f"cannot read '{visible(str(path))}': it is not UTF-8 text")


def _undecodable_byte(data: bytes, start: int, end: int, filename: str) -> SourceError:
    prefix = _universal_newlines(data[:start].decode("utf-8"))
    text = prefix + _universal_newlines(data[start:].decode("utf-8", errors="backslashreplace"))
    line = prefix.count("\n") + 1
    column = len(prefix) - (prefix.rfind("\n") + 1) + 1
    span = ast.Span(line, column, line, column + 4 * (end - start))  # each byte shows as '\xNN'
    message = f"the file is not UTF-8 text: byte 0x{data[start]:02x} cannot be decoded (tdsl programs are UTF-8)"
    return SourceError(message, span).located(text, filename)


def _universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
