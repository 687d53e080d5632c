"""The file-system calls of MemoryX's all-or-nothing operations (checkpoint save and restore,
safetensors export and import), in one place.

Each function is a thin wrapper that calls the operating system through this module's global ``os``
and raises its ``OSError`` unchanged; the caller knows which file and step it was and turns the error
into a :class:`~models.memoryx.errors.StorageError` (:func:`storage_error`). The points where a write
can fail are: creating a file (:func:`create`), :func:`allocate`, :func:`write_all`,
:func:`pwrite_all`, :func:`fsync`, :func:`fsync_dir`, :func:`link` and :func:`replace`. Fault-injection
tests substitute a proxy for ``os`` here (``monkeypatch.setattr(fsio, "os", proxy)``) that fails any
one of them.
"""

import errno
import os

from .errors import StorageError

__all__ = ["create", "allocate", "write_all", "pwrite_all", "fsync", "fsync_dir", "link", "replace",
           "close", "unlink_quietly", "storage_error"]


def storage_error(message, cause):
    """A :class:`StorageError` with ``message`` (which names the file and the cause), carrying the
    ``errno`` of the ``OSError`` ``cause``."""
    err = StorageError(message)
    err.errno = getattr(cause, "errno", None)
    return err


def create(path):
    """Create the new file ``path`` (it must not exist) for reading and writing; returns the fd."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)


def allocate(fd, nbytes):
    """Reserve ``nbytes`` of disk for ``fd`` (reads as zeros), so that a full disk fails here with
    ENOSPC rather than later. File systems without ``posix_fallocate`` keep a sparse file."""
    try:
        os.posix_fallocate(fd, 0, max(1, nbytes))
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        os.ftruncate(fd, max(1, nbytes))


def write_all(fd, data):
    """Write all of ``data`` (any contiguous buffer) at the position of ``fd``."""
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


def pwrite_all(fd, data, offset):
    """Write all of ``data`` at byte ``offset`` of ``fd``."""
    view = memoryview(data).cast("B")
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def fsync(fd):
    os.fsync(fd)


def fsync_dir(path):
    """fsync the directory ``path`` (makes renames and new names in it durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def link(src, dst):
    os.link(src, dst)


def replace(src, dst):
    os.replace(src, dst)


def close(fd):
    os.close(fd)


def unlink_quietly(path):
    """Remove ``path`` if it exists; errors are ignored (clean-up of files nothing refers to)."""
    try:
        os.unlink(path)
    except OSError:
        pass
