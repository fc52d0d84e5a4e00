"""Write fixed files atomically, and never over someone else's edit.

A temp file beside the target, the original mode copied, then `os.replace`:
a crash at any point leaves either the old file or the new one, never half.
The bytes on disk are compared with the bytes that were checked just before
the rename, so a file edited during the run is left alone and reported.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


class WriteRefused(Exception):
    """The fix was not written; the message says why."""


def write_fixed(path: Path, original: bytes, fixed: bytes) -> None:
    # Replace the link's target, not the link: a symlink stays a symlink.
    path = path.resolve()
    try:
        info = path.stat()
        if path.read_bytes() != original:
            raise WriteRefused("file changed since it was read; not overwritten")
    except FileNotFoundError:
        raise WriteRefused("file vanished since it was read") from None
    except PermissionError:
        raise WriteRefused("file is not readable") from None
    except OSError as exc:
        raise WriteRefused(f"cannot read it back: {exc.strerror or exc}") from None
    # The mode bits count, not only access(): root may write anything, but a file
    # someone marked read-only is a file they do not want rewritten.
    if not info.st_mode & WRITE_BITS or not os.access(path, os.W_OK):
        raise WriteRefused("file is read-only; not fixed")
    directory = path.parent
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".kvlint", dir=directory)
    except OSError as exc:
        raise WriteRefused(f"cannot create a temporary file beside it: {exc.strerror}") from None
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(fixed)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, stat.S_IMODE(info.st_mode))
        if path.read_bytes() != original:
            raise WriteRefused("file changed since it was read; not overwritten")
        os.replace(temp, path)
    except OSError as exc:
        raise WriteRefused(f"write failed, original kept: {exc.strerror or exc}") from None
    finally:
        if temp.exists():
            temp.unlink()
