"""Exclusive lock on a directory that a MemoryX store keeps files in (its flash tier).

Protocol: the holder keeps an exclusive ``flock(LOCK_EX | LOCK_NB)`` on the file ``.memoryx.lock`` in
the directory, on its own open file description, and writes ``{"pid", "host"}`` into it. flock locks
of separate open file descriptions conflict even within one process, so a second store on the same
directory is refused whether it is in this process or another; the kernel drops the lock when the
holder's descriptor is closed: on :meth:`DirectoryLock.release`, when the lock object is garbage
collected, and when the holding process dies (even by SIGKILL). A lock file left by a dead holder is
therefore simply taken over. Releasing removes the lock file while still holding the lock; an opener
that locked a file which is no longer the one at the path (removed or replaced in between) retries,
so at most one live holder locks the file the path names.

flock works between processes of one host (and on NFS through the client's lock emulation); the host
name is recorded for the error message. The descriptor is close-on-exec; a child forked without exec
shares the lock until it exits, and never removes the lock file.
"""

import fcntl
import json
import os
import socket
import weakref
from pathlib import Path

from .errors import DirectoryLockedError, StorageError

__all__ = ["DirectoryLock", "LOCK_NAME"]

LOCK_NAME = ".memoryx.lock"


def _holder(fd):
    """``(pid, host)`` recorded in an open lock file (None for what it does not say)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return info.get("pid"), info.get("host")
    except (OSError, ValueError, AttributeError):
        return None, None


def _release(fd, path, pid):
    """Remove the lock file (if it is still ours) and close ``fd``, which drops the lock. In a forked
    child (``pid`` is the holder's) only the child's copy of the descriptor is closed."""
    try:
        if os.getpid() != pid:
            return
        st, cur = os.fstat(fd), os.stat(path)
        if (st.st_dev, st.st_ino) == (cur.st_dev, cur.st_ino):
            os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


class DirectoryLock:
    """Take the exclusive lock on ``directory`` (which must exist) for ``owner`` (a description such as
    ``"MemoryX flash directory"``), or raise :class:`DirectoryLockedError` naming the directory and the
    holder, before anything in the directory is changed."""

    def __init__(self, directory, owner="MemoryX flash directory"):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as e:
                raise StorageError(f"cannot lock {owner} {self.directory}: cannot open {self.path}: "
                                   f"{e.strerror or e}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid, host = _holder(fd)
                os.close(fd)
                raise DirectoryLockedError(self.directory, pid, host, owner) from None
            except OSError as e:
                os.close(fd)
                raise StorageError(f"cannot lock {owner} {self.directory}: flock of {self.path}: "
                                   f"{e.strerror or e}") from None
            try:
                st, cur = os.fstat(fd), os.stat(self.path)
                if (st.st_dev, st.st_ino) == (cur.st_dev, cur.st_ino):
                    break
            except FileNotFoundError:
                pass
            os.close(fd)              # a releasing holder removed (or replaced) the file: try again
        self.pid, self.host = os.getpid(), socket.gethostname()
        try:                          # who holds it, for the error of the next opener (best effort)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": self.pid, "host": self.host}).encode(), 0)
        except OSError:
            pass
        self._finalizer = weakref.finalize(self, _release, fd, str(self.path), self.pid)

    @property
    def held(self):
        return self._finalizer.alive

    def release(self):
        """Remove the lock file and drop the lock (idempotent)."""
        self._finalizer()
