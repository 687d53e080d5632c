"""Crash-safe, all-or-nothing file replacement shared by checkpoints and safetensors export.

Protocol (every system call through :mod:`models.memoryx.fsio`):

1. write the new content to ``.<name>.tmp.<pid>.<random>`` in the target directory, fsync it;
2. when ``path`` exists, hard-link it to ``<temporary name>.prev`` (kept for a rollback);
3. rename the temporary file over ``path`` with ``os.replace`` (atomic on POSIX), fsync the directory;
4. remove the ``.prev`` link.

A crash at any moment leaves either the previous file or the new one at ``path``, never a mix; stray
``.<name>.tmp.*`` files may remain and are ignored. An I/O error (EIO, ENOSPC, a missing directory, ...)
at any step leaves ``path`` as it was and no temporary file: before the rename the temporary file is
removed; when the directory fsync after the rename fails, the ``.prev`` link is renamed back over
``path`` (or the new file removed when there was no previous one). It raises
:class:`~models.memoryx.errors.StorageError` naming ``path``, the step and the file it failed on, and
the cause (its ``errno`` set). On a file system without hard links step 2 is skipped: there a failed
directory fsync leaves the new, complete file at ``path`` and the error says so.
"""

import errno
import os
import uuid
from pathlib import Path

from . import fsio
from .errors import StorageError

__all__ = ["atomic_write"]

_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV)


class _FdWriter:
    """What ``write(f)`` receives: ``f.write(data)`` writes all of ``data`` (unbuffered)."""

    def __init__(self, fd):
        self.fd = fd

    def write(self, data):
        fsio.write_all(self.fd, data)


def _convert(e, path, step, outcome):
    """``e`` as the error to raise: an OSError becomes a StorageError naming ``path`` and ``step``."""
    if isinstance(e, StorageError) or not isinstance(e, OSError):
        return e
    return fsio.storage_error(f"cannot write {path}: {e.strerror or e} ({step}); {outcome}", e)


def _raise(e, path, step, outcome):
    err = _convert(e, path, step, outcome)
    if err is e:
        raise e
    raise err from e


def _keep_previous(path, prev):
    """Hard-link the current ``path`` to ``prev``: ``"kept"``, ``"none"`` (no file at ``path``) or
    ``"unkept"`` (the file system has no hard links)."""
    try:
        fsio.link(path, prev)
        return "kept"
    except FileNotFoundError:
        return "none"
    except OSError as e:
        if e.errno in _NO_HARD_LINKS:
            return "unkept"
        raise


def atomic_write(path, write):
    """Create/replace ``path`` all-or-nothing: ``write(f)`` fills a temporary file in the same
    directory (``f.write(data)``), which is fsync-ed and renamed over ``path``; the directory is
    fsync-ed. See the module docstring for what a failure leaves."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    prev = tmp.with_name(tmp.name + ".prev")
    unchanged = f"{path} is unchanged"
    step = f"creating {tmp}"
    try:
        fd = fsio.create(tmp)
    except BaseException as e:
        _raise(e, path, step, unchanged)
    kept = "none"
    try:
        try:
            step = f"writing {tmp}"
            write(_FdWriter(fd))
            step = f"fsync of {tmp}"
            fsio.fsync(fd)
            step = f"closing {tmp}"
        finally:
            fsio.close(fd)
        step = f"hard-linking the previous {path.name} to {prev}"
        kept = _keep_previous(path, prev)
        step = f"renaming {tmp} over it"
        fsio.replace(tmp, path)
    except BaseException as e:
        fsio.unlink_quietly(tmp)
        if kept == "kept":
            fsio.unlink_quietly(prev)
        _raise(e, path, step, unchanged)
    try:
        fsio.fsync_dir(path.parent)
    except BaseException as e:
        outcome = _roll_back(path, prev, kept)
        _raise(e, path, f"fsync of the directory {path.parent}", outcome)
    if kept == "kept":
        fsio.unlink_quietly(prev)


def _roll_back(path, prev, kept):
    """Undo the rename after a failed directory fsync; returns what the file system now holds."""
    if kept == "unkept":
        return f"{path} holds the new, complete file (no hard links here to keep the previous one)"
    try:
        if kept == "kept":
            fsio.replace(prev, path)
        else:
            os.unlink(path)
    except OSError as e:
        if kept == "kept":
            fsio.unlink_quietly(prev)
        return f"the rollback failed too ({e.strerror or e}): {path} holds the new, complete file"
    try:
        fsio.fsync_dir(path.parent)
    except OSError:
        pass
    return f"{path} is unchanged"
