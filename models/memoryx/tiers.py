"""Memory tiers of MemoryX: a DRAM tier (an LRU cache with a byte budget) over a flash tier
(one memory-mapped file per tensor in a directory).

:class:`TieredStore` holds named float32/uint16 tensors. ``acquire(key)`` returns a writable array
holding the tensor's current value and pins it; ``release(key, dirty)`` unpins it (``dirty`` says
it was modified). Inside the budget a tensor is cached in DRAM: a miss reads it from flash, and
to make room the least recently used *unpinned* tensors are evicted (written back to flash when
dirty). A tensor that cannot be cached (larger than the budget, or the budget is held by pinned
tensors) is worked on directly in its memory-mapped file, so a layer larger than the DRAM budget
still trains, chunk by chunk. Without a flash directory and without a budget every tensor simply
lives in DRAM.

Counters (:meth:`TieredStore.counters`): DRAM ``hits``, ``misses`` (accesses not served from
DRAM), ``evictions``, ``bytes_in`` (flash to DRAM), ``bytes_out`` (DRAM to flash, write-backs);
flash ``reads``, ``writes``, ``bytes_read``, ``bytes_written`` and ``direct`` (accesses served
from the memory map: a whole-tensor acquire counts the whole tensor read, and written again on a
dirty release; :meth:`TieredStore.read_rows` counts only the rows it reads).

Streaming access (checkpoints, safetensors, restore): :meth:`TieredStore.create` makes a zero tensor
without a source array (on flash: a sparse file), :meth:`TieredStore.iter_chunks` yields read-only
views of a tensor chunk by chunk (from DRAM when cached, else straight from the memory map, without
caching it) and :meth:`TieredStore.write_range` writes a range of elements the same way. None of them
allocates more than the chunk the caller passes, so a store larger than its DRAM budget is saved and
restored within the budget plus a bounded number of chunks.

All-or-nothing replacement (safetensors import, checkpoint restore): :meth:`TieredStore.transaction`
stages new contents beside the live tensors and switches them in at once
(:mod:`models.memoryx.staging`).

The flash directory belongs to one open store: the store takes an exclusive lock on it
(:mod:`models.memoryx.lock`, the file ``.memoryx.lock``) before it touches anything there, keeps it
until :meth:`TieredStore.close` (or until it is garbage collected, or its process dies), and a second
store on the directory, in this process or another, is refused with
:class:`~models.memoryx.errors.DirectoryLockedError` naming the holder. Which file holds which tensor
lives only in the process, so tensor files (``t<6 digits>.bin``) found when the lock is taken are left
by a store that is gone (closed, or killed with its lock recovered) and are removed; other files are
left alone. A private temporary directory is locked the same way.

Errors: misuse (unknown key, release without acquire, duplicate key, use after close) raises
:class:`~models.memoryx.errors.TierError`, a bad budget :class:`~models.memoryx.errors.ConfigError`, and
a failing flash file :class:`~models.memoryx.errors.StorageError` naming the path.
"""

import os
import re
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .errors import ConfigError, StorageError, TierError
from .lock import DirectoryLock
from .staging import TierTransaction

__all__ = ["TieredStore", "TierCounters", "TENSOR_FILE"]

TENSOR_FILE = re.compile(r"t\d{6}\.bin")


class TierCounters(dict):
    """Counters of one tier (a dict of ints)."""

    def add(self, name, amount=1):
        self[name] = self.get(name, 0) + amount


class TieredStore:
    """DRAM cache (``dram_budget_bytes``, ``None`` = unlimited) over flash files in ``flash_dir``.

    With a budget but no ``flash_dir`` a private temporary directory is used (removed by
    :meth:`close`). Keys are strings; file names are derived from an internal index, so any
    key is allowed. The flash directory is locked until :meth:`close` (see the module docstring).
    """

    def __init__(self, dram_budget_bytes=None, flash_dir=None):
        if dram_budget_bytes is not None:
            if isinstance(dram_budget_bytes, bool) or not isinstance(dram_budget_bytes, (int, np.integer)) \
                    or dram_budget_bytes < 0:
                raise ConfigError(f"dram_budget_bytes must be a non-negative int or None, "
                                  f"got {dram_budget_bytes!r}")
            dram_budget_bytes = int(dram_budget_bytes)
        self.budget = dram_budget_bytes
        self._own_dir = False
        if flash_dir is None and dram_budget_bytes is not None:
            flash_dir = tempfile.mkdtemp(prefix="memoryx-flash-")
            self._own_dir = True
        self.flash_dir = Path(flash_dir) if flash_dir is not None else None
        self._lock = None
        self.closed = False
        if self.flash_dir is not None:
            try:
                self.flash_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StorageError(f"cannot create flash directory {self.flash_dir}: {e.strerror or e}") from None
            try:
                self._lock = DirectoryLock(self.flash_dir)     # refused before anything here is touched
                self._remove_leftovers()
            except BaseException:
                if self._lock is not None:
                    self._lock.release()
                if self._own_dir:
                    shutil.rmtree(self.flash_dir, ignore_errors=True)
                raise
        self._meta = {}            # key -> (shape, dtype, file name or None)
        self._cache = OrderedDict()  # key -> ndarray (LRU order: first = least recently used)
        self._dirty = set()
        self._pins = {}            # key -> pin count
        self._maps = {}            # key -> np.memmap (flash tier)
        self._next_file = 0
        self.cached_bytes = 0
        self.dram = TierCounters(hits=0, misses=0, evictions=0, bytes_in=0, bytes_out=0)
        self.flash = TierCounters(reads=0, writes=0, bytes_read=0, bytes_written=0, direct=0)

    def _remove_leftovers(self):
        """Remove tensor files of a store that held the directory before (this one holds the lock)."""
        path = self.flash_dir
        try:
            with os.scandir(self.flash_dir) as entries:
                for entry in entries:
                    if TENSOR_FILE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                        path = entry.path
                        os.unlink(path)
        except OSError as e:
            raise StorageError(f"cannot remove {path}, a tensor file left in flash directory {self.flash_dir} "
                               f"by a store that is gone: {e.strerror or e}") from None

    # -- tensors -------------------------------------------------------------------------------
    @property
    def has_flash(self):
        return self.flash_dir is not None

    def keys(self):
        return list(self._meta)

    def __contains__(self, key):
        return key in self._meta

    def shape(self, key):
        return self._meta[key][0]

    def dtype(self, key):
        return self._meta[key][1]

    def nbytes(self, key):
        shape, dtype, _ = self._meta[key]
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize

    def total_bytes(self):
        """Bytes of every tensor held (the capacity the store needs, all tiers together)."""
        return sum(self.nbytes(k) for k in self._meta)

    def _key(self, key):
        if self.closed:
            raise TierError(f"tensor {key!r}: the store is closed")
        if key not in self._meta:
            raise TierError(f"unknown tensor {key!r}")
        return key

    def _new_file_name(self):
        name = f"t{self._next_file:06d}.bin"
        self._next_file += 1
        return name

    def put(self, key, array):
        """Create tensor ``key`` holding a copy of ``array`` (its shape and dtype)."""
        array = np.ascontiguousarray(array)
        self.create(key, array.shape, array.dtype)
        if not self.has_flash:
            self._cache[key][...] = array
            return
        mm = self._map(key)
        mm[...] = array
        mm.flush()
        self.flash.add("writes")
        self.flash.add("bytes_written", array.nbytes)

    def create(self, key, shape, dtype):
        """Create tensor ``key`` of zeros. With a flash tier it is a new (sparse) file and nothing is
        cached; without one it is a DRAM array."""
        if key in self._meta:
            raise TierError(f"tensor {key!r} already exists")
        shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        if not self.has_flash:
            self._meta[key] = (shape, dtype, None)
            self._cache[key] = np.zeros(shape, dtype)
            self.cached_bytes += self._cache[key].nbytes
            return
        name = self._new_file_name()
        self._meta[key] = (shape, dtype, name)
        try:
            self._map(key, create=True)
        except BaseException:
            del self._meta[key]
            raise

    def iter_chunks(self, key, chunk_elems):
        """Yield read-only flat views of ``key``, ``chunk_elems`` elements each, in order: from DRAM when
        the tensor is cached (the current values, even if flash is stale), else from its memory map
        (not cached; counted as direct flash reads)."""
        self._key(key)
        cached = key in self._cache
        flat = (self._cache[key] if cached else self._map(key)).reshape(-1)
        for s in range(0, flat.size, chunk_elems):
            view = flat[s:s + chunk_elems].view(np.ndarray)
            view.flags.writeable = False
            if not cached:
                self.flash.add("reads")
                self.flash.add("bytes_read", view.nbytes)
                self.flash.add("direct")
            yield view

    def write_range(self, key, start, values):
        """Write ``values`` (flat, cast to the tensor's dtype) at element ``start`` of ``key``: into the
        DRAM copy when cached (marked dirty), else into the memory map (not cached; see :meth:`sync`)."""
        self._key(key)
        if key in self._cache:
            self._cache[key].reshape(-1)[start:start + values.size] = values
            if self.has_flash:
                self._dirty.add(key)
            return
        self._map(key).reshape(-1)[start:start + values.size] = values
        self.flash.add("writes")
        self.flash.add("bytes_written", values.size * np.dtype(self._meta[key][1]).itemsize)

    def sync(self, key):
        """Flush the memory map of ``key`` to its file (after :meth:`write_range`)."""
        mm = self._maps.get(self._key(key))
        if mm is not None and isinstance(mm, np.memmap):
            mm.flush()

    def transaction(self, what, outcome="the store is unchanged"):
        """A :class:`~models.memoryx.staging.TierTransaction`: new contents for several tensors, switched
        in all at once or not at all (``what`` names the operation in errors)."""
        if self.closed:
            raise TierError(f"{what}: the store is closed")
        return TierTransaction(self, what, outcome)

    def _install(self, staged):
        """Switch to staged contents: ``{key: (shape, dtype, flash file path or None, DRAM array or
        None)}`` (memory only, no I/O). Returns the paths of the files no longer used."""
        old = []
        for key, (shape, dtype, path, array) in staged.items():
            if key in self._meta:
                name = self._meta[key][2]
                if key in self._cache:
                    self.cached_bytes -= self._cache.pop(key).nbytes
                self._dirty.discard(key)
                self._maps.pop(key, None)
                if name is not None:
                    old.append(self.flash_dir / name)
            self._meta[key] = (shape, dtype, None if path is None else path.name)
            if array is not None:
                self._cache[key] = array
                self.cached_bytes += array.nbytes
        return old

    def delete(self, key):
        shape, dtype, name = self._meta.pop(self._key(key))
        if key in self._cache:
            self.cached_bytes -= self._cache.pop(key).nbytes
        self._dirty.discard(key)
        self._pins.pop(key, None)
        mm = self._maps.pop(key, None)
        del mm
        if name is not None:
            (self.flash_dir / name).unlink(missing_ok=True)

    def _map(self, key, create=False):
        mm = self._maps.get(key)
        if mm is None:
            shape, dtype, name = self._meta[key]
            path = self.flash_dir / name
            try:
                if create:
                    with open(path, "wb") as f:
                        f.truncate(max(1, int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize))
                if int(np.prod(shape, dtype=np.int64)) == 0:
                    mm = np.zeros(shape, dtype)
                else:
                    mm = np.memmap(path, dtype=dtype, mode="r+", shape=shape)
            except OSError as e:
                raise StorageError(f"flash tier file {path} (tensor {key!r}): {e.strerror or e}") from None
            self._maps[key] = mm
        return mm

    # -- access --------------------------------------------------------------------------------
    def acquire(self, key):
        """A writable array with the current value of ``key``, pinned until :meth:`release`."""
        self._key(key)
        self._pins[key] = self._pins.get(key, 0) + 1
        arr = self._fetch(key)
        if arr is None:
            self.flash.add("reads")
            self.flash.add("bytes_read", self.nbytes(key))
            self.flash.add("direct")
            return self._map(key)
        return arr

    def _fetch(self, key):
        """The cached array of ``key`` (loading it from flash on a miss), or None when it cannot be
        cached (then the caller works on the memory map)."""
        if key in self._cache:
            self._cache.move_to_end(key)
            self.dram.add("hits")
            return self._cache[key]
        # not cached: only possible with a flash tier
        self.dram.add("misses")
        nbytes = self.nbytes(key)
        if not self._make_room(nbytes):
            return None
        arr = np.array(self._map(key))  # copy flash -> DRAM
        self.flash.add("reads")
        self.flash.add("bytes_read", nbytes)
        self._cache[key] = arr
        self.cached_bytes += nbytes
        self.dram.add("bytes_in", nbytes)
        return arr

    def read_rows(self, key, start, stop):
        """A copy of rows ``[start, stop)`` of ``key`` viewed as 2-D (a 1-D tensor is one row).
        Served from DRAM (a miss caches the whole tensor); a tensor that cannot be cached is read
        from its memory map, and only the rows read are counted."""
        self._key(key)
        shape = self._meta[key][0]
        rows = shape[0] if len(shape) == 2 else 1
        arr = self._fetch(key)
        if arr is not None:
            return np.array(arr.reshape(rows, -1)[start:stop])
        out = np.array(self._map(key).reshape(rows, -1)[start:stop])
        self.flash.add("reads")
        self.flash.add("bytes_read", out.nbytes)
        self.flash.add("direct")
        return out

    def release(self, key, dirty=False):
        """Unpin ``key``; ``dirty`` = the array returned by :meth:`acquire` was modified."""
        n = self._pins.get(key, 0)
        if n <= 0:
            raise TierError(f"release of tensor {key!r} that is not acquired")
        if n == 1:
            del self._pins[key]
        else:
            self._pins[key] = n - 1
        if key in self._cache:
            if dirty and self.has_flash:
                self._dirty.add(key)
        elif dirty:
            self._maps[key].flush()
            self.flash.add("writes")
            self.flash.add("bytes_written", self.nbytes(key))

    def read(self, key):
        """A copy of the current value of ``key`` (goes through the cache like :meth:`acquire`)."""
        arr = self.acquire(key)
        try:
            return np.array(arr)
        finally:
            self.release(key)

    def write(self, key, value):
        """Overwrite tensor ``key`` with ``value`` (same shape; cast to the tensor's dtype)."""
        arr = self.acquire(key)
        try:
            arr[...] = value
        finally:
            self.release(key, dirty=True)

    def _make_room(self, nbytes):
        """Evict unpinned LRU tensors until ``nbytes`` more fit; False if they cannot."""
        if self.budget is None:
            return True
        if nbytes > self.budget:
            return False
        unpinned = sum(a.nbytes for k, a in self._cache.items() if k not in self._pins)
        if self.cached_bytes - unpinned + nbytes > self.budget:
            return False
        for k in list(self._cache):
            if self.cached_bytes + nbytes <= self.budget:
                break
            if k in self._pins:
                continue
            self._evict(k)
        return True

    def _evict(self, key):
        arr = self._cache.pop(key)
        self.cached_bytes -= arr.nbytes
        self.dram.add("evictions")
        if key in self._dirty:
            self._dirty.discard(key)
            self._write_back(key, arr)

    def _write_back(self, key, arr):
        mm = self._map(key)
        mm[...] = arr
        mm.flush()
        self.dram.add("bytes_out", arr.nbytes)
        self.flash.add("writes")
        self.flash.add("bytes_written", arr.nbytes)

    def flush(self):
        """Write every dirty cached tensor back to flash (keeps it cached)."""
        for key in list(self._dirty):
            self._write_back(key, self._cache[key])
        self._dirty.clear()

    def counters(self):
        return {"dram": dict(self.dram, cached_bytes=self.cached_bytes, budget_bytes=self.budget),
                "flash": dict(self.flash)}

    def destroy(self):
        """Delete every tensor (and its flash file), then :meth:`close`: used when a store being built
        (a restore) fails, so a user-given flash directory keeps no files of it."""
        if not self.closed:
            for key in list(self._meta):
                self.delete(key)
        self.close()

    def close(self):
        """Drop caches and maps, release the flash directory's lock (removing the lock file) and remove
        the directory if this store created it. Idempotent; the store cannot be used afterwards (its
        tensor files stay until another store takes the directory)."""
        self.closed = True
        self._cache.clear()
        self._maps.clear()
        self.cached_bytes = 0
        if self._lock is not None:
            self._lock.release()
        if self._own_dir and self.flash_dir is not None:
            shutil.rmtree(self.flash_dir, ignore_errors=True)

    def __del__(self):
        try:
            if self._own_dir:
                self.close()
        except Exception:
            pass


