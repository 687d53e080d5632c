"""All-or-nothing replacement of tensors of a :class:`~models.memoryx.tiers.TieredStore` (used by the
safetensors import and the checkpoint restore).

Protocol (file-system calls through :mod:`models.memoryx.fsio`)::

    with tiers.transaction("safetensors import from w.safetensors") as tx:
        tx.stage(key, shape, dtype)        # new contents (zeros) for an existing tensor or a new one
        tx.write(key, start, values)       # ... filled chunk by chunk
        tx.commit()                        # fsync everything, then switch; otherwise nothing happened

1. Stage: each tensor the operation writes gets new contents beside the live ones. With a flash tier
   that is a new file in the flash directory, created, its space reserved (``posix_fallocate``, so a
   full disk fails here with ENOSPC), written with ``pwrite``; without one, a new DRAM array. The live
   tensors, the DRAM cache and the store's bookkeeping are not touched.
2. Commit: every staged file is fsync-ed (write errors that surface only at write-back are caught
   here) and closed; then the store switches to the staged tensors in memory (its tensor -> file map
   and DRAM cache: no I/O, cannot fail), and the replaced tensors' files are removed.
3. Abort (an error before the switch, an I/O error or the operation's own validation, or leaving the
   ``with`` block without commit): the staged files are removed and the store is exactly as before.

An I/O error raises :class:`~models.memoryx.errors.StorageError` naming the operation, the file, the
tensor and the cause (``errno`` set). The flash tier holds working state only: which file holds which
tensor lives in the process, so after a crash there is nothing to roll forward (durable state is in
checkpoints); the store that next locks the directory removes the dead store's files (see
:mod:`models.memoryx.tiers`).
"""

import numpy as np

from . import fsio
from .errors import TierError

__all__ = ["TierTransaction"]


class _Staged:
    __slots__ = ("shape", "dtype", "size", "path", "fd", "array")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype
        self.size = int(np.prod(shape, dtype=np.int64))
        self.path = self.fd = self.array = None


class TierTransaction:
    """New contents for tensors of ``tiers``, switched in all at once by :meth:`commit` (see the module
    docstring). ``what`` names the operation and ``outcome`` says what a failure leaves, in errors."""

    def __init__(self, tiers, what, outcome="the store is unchanged"):
        self.tiers, self.what, self.outcome = tiers, what, outcome
        self._staged = {}
        self._open = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._open:
            self.abort()

    def _io(self, verb, st, key, fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            raise fsio.storage_error(f"{self.what}: cannot {verb} flash tier file {st.path} (tensor {key!r}): "
                                     f"{e.strerror or e}; {self.outcome}", e) from e

    def stage(self, key, shape, dtype):
        """Start new contents, zeros, for ``key``: an existing tensor (same shape and dtype, not acquired)
        or a new one."""
        if not self._open:
            raise TierError(f"{self.what}: the transaction is finished")
        shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        tiers = self.tiers
        if key in self._staged:
            raise TierError(f"{self.what}: tensor {key!r} staged twice")
        if key in tiers:
            if (tiers.shape(key), tiers.dtype(key)) != (shape, dtype):
                raise TierError(f"{self.what}: tensor {key!r} is {tiers.shape(key)} {tiers.dtype(key)}, "
                                f"staged as {shape} {dtype}")
            if key in tiers._pins:
                raise TierError(f"{self.what}: tensor {key!r} is acquired and cannot be replaced")
        st = _Staged(shape, dtype)
        if not tiers.has_flash:
            st.array = np.zeros(shape, dtype)
            self._staged[key] = st
            return
        st.path = tiers.flash_dir / tiers._new_file_name()
        st.fd = self._io("create", st, key, fsio.create, st.path)
        self._staged[key] = st
        self._io("allocate space for", st, key, fsio.allocate, st.fd, st.size * dtype.itemsize)

    def write(self, key, start, values):
        """Write ``values`` (flat, cast to the staged dtype) at element ``start`` of the new ``key``."""
        st = self._staged.get(key)
        if st is None or not self._open:
            raise TierError(f"{self.what}: tensor {key!r} is not staged")
        values = np.ascontiguousarray(values, dtype=st.dtype).reshape(-1)
        if start < 0 or start + values.size > st.size:
            raise TierError(f"{self.what}: write of {values.size} elements at {start} outside tensor {key!r} "
                            f"of {st.size}")
        if st.array is not None:
            st.array.reshape(-1)[start:start + values.size] = values
            return
        self._io("write", st, key, fsio.pwrite_all, st.fd, values, start * st.dtype.itemsize)
        self.tiers.flash.add("writes")
        self.tiers.flash.add("bytes_written", values.nbytes)

    def commit(self):
        """fsync and close every staged file, then switch the store to the staged tensors (all of them)
        and remove the replaced files. On an error the transaction is aborted and nothing changed."""
        if not self._open:
            raise TierError(f"{self.what}: the transaction is finished")
        try:
            for key, st in self._staged.items():
                if st.fd is not None:
                    self._io("fsync", st, key, fsio.fsync, st.fd)
            for key, st in self._staged.items():
                if st.fd is not None:
                    fd, st.fd = st.fd, None
                    self._io("close", st, key, fsio.close, fd)
        except BaseException:
            self.abort()
            raise
        self._open = False
        old = self.tiers._install({key: (st.shape, st.dtype, st.path, st.array) for key, st in self._staged.items()})
        self._staged.clear()
        for path in old:
            fsio.unlink_quietly(path)

    def abort(self):
        """Drop everything staged (close and remove the staged files); the store is as before."""
        self._open = False
        for st in self._staged.values():
            if st.fd is not None:
                try:
                    fsio.close(st.fd)
                except OSError:
                    pass
                st.fd = None
            if st.path is not None:
                fsio.unlink_quietly(st.path)
        self._staged.clear()
