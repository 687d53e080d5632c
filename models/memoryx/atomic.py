"""Crash-safe file replacement shared by checkpoints and safetensors export.

The file is written under a temporary name in the target directory, flushed and ``fsync``-ed,
renamed over the target with ``os.replace`` (atomic on POSIX) and the directory is ``fsync``-ed. A
crash at any moment leaves either the previous file or the new one at ``path``, never a mix; a stray
``.<name>.tmp.*`` file may remain and is ignored. An operating-system failure (missing directory, disk
full, permissions) raises :class:`~models.memoryx.errors.StorageError` naming ``path``, after the
temporary file is removed.
"""

import os
import uuid
from pathlib import Path

from .errors import StorageError

__all__ = ["atomic_write"]


def _storage_error(path, e):
    return StorageError(f"cannot write {path}: {e.strerror or e}")


def atomic_write(path, write):
    """Create/replace ``path`` atomically: ``write(f)`` fills a temporary file in the same
    directory, which is fsync-ed, renamed over ``path``, and the directory fsync-ed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except StorageError:
        tmp.unlink(missing_ok=True)
        raise
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _storage_error(path, e) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        raise _storage_error(path.parent, e) from e
