"""``fs/read_text_file`` and ``fs/write_text_file`` for an ACP agent, inside the notebook's folder only.

The folder is the session's ``cwd``, and the extra folders the user named (sent as the session's
``additionalDirectories``: ACP makes ``[cwd, ...additionalDirectories]`` the session's root set).
A path must be absolute (ACP says so) and, once every symlink
is resolved, inside the folder: ``../x``, ``/etc/passwd`` and a link pointing out are refused with
a JSON-RPC ``invalid params`` error that names the folder. Writes are approved by the user first
(``client_side`` asks, showing the diff); reads are not, as an editor's open file would not be.
Files are bounded (``FILE_MAX``) so an agent cannot make the kernel hold a huge file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from acp import RequestError

FILE_MAX = 10 * 1024 * 1024  # bytes of one file read or written


class FolderFiles:
    """Text files under ``root`` (the session's cwd) or one of the ``extra`` folders, by absolute path."""

    def __init__(self, root: str, extra: Sequence[str] = ()) -> None:
        self.root = Path(os.path.realpath(root))
        self.roots = [self.root, *(Path(os.path.realpath(e)) for e in extra)]

    def resolve(self, path: str) -> Path:
        """The real path of ``path``, or a JSON-RPC error when it is not inside the folder."""
        given = Path(path)
        if not given.is_absolute():
            raise RequestError.invalid_params({"details": f"the path must be absolute, got {path!r}", "path": path})
        real = Path(os.path.realpath(given))  # follows every symlink, also of a parent folder
        if not any(real == root or root in real.parents for root in self.roots):
            where = f"the notebook's folder {str(self.root)!r}" + (
                " and the folders you named" if self.roots[1:] else ""
            )
            raise RequestError.invalid_params({"details": f"{path!r} is outside {where}; refused", "path": path})
        return real

    def relative(self, path: str) -> str:
        """``path`` as shown to the user: relative to the notebook's folder (absolute in another one)."""
        real = self.resolve(path)
        return str(real.relative_to(self.root)) if real == self.root or self.root in real.parents else str(real)

    def read(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        """The file's text, from 1-based ``line``, at most ``limit`` lines (ACP's read)."""
        real = self.resolve(path)
        try:
            if real.stat().st_size > FILE_MAX:
                raise RequestError.invalid_params({"details": f"{path!r} is larger than {FILE_MAX} bytes"})
            text = real.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None
        except (IsADirectoryError, PermissionError, OSError) as exc:
            raise RequestError.invalid_params({"details": f"cannot read {path!r}: {exc.strerror}"}) from None
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        end = None if limit is None else start + max(limit, 0)
        return "".join(lines[start:end])

    def current(self, path: str) -> str | None:
        """What ``path`` holds now (for the diff a write is approved on), ``None`` if it does not exist."""
        real = self.resolve(path)
        try:
            if real.stat().st_size > FILE_MAX:
                return None
            return real.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def write(self, path: str, content: str) -> None:
        real = self.resolve(path)
        data = content.encode("utf-8")
        if len(data) > FILE_MAX:
            raise RequestError.invalid_params({"details": f"refused to write more than {FILE_MAX} bytes to {path!r}"})
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
            real.write_bytes(data)
        except OSError as exc:
            raise RequestError.invalid_params({"details": f"cannot write {path!r}: {exc.strerror}"}) from None


__all__ = ["FILE_MAX", "FolderFiles"]
