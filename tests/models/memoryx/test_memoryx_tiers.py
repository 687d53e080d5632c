"""DRAM-over-flash tiers: LRU order, counters, direct access, bit-identical training across budgets."""

import numpy as np
import pytest

from models.memoryx import (
    Adam,
    AdamW,
    ConfigError,
    MemoryX,
    MemoryXError,
    Momentum,
    StorageError,
    TieredStore,
    TierError,
)

F = np.float32


def test_lru_eviction_order_and_counters(tmp_path):
    ts = TieredStore(dram_budget_bytes=3 * 400, flash_dir=tmp_path)
    for k in "abcd":
        ts.put(k, np.full(100, ord(k), F))                 # 400 bytes each
    assert ts.counters()["flash"]["bytes_written"] == 1600
    for k in "abc":
        ts.read(k)                                         # 3 misses, fills the budget
    c = ts.counters()["dram"]
    assert (c["misses"], c["hits"], c["bytes_in"], c["cached_bytes"]) == (3, 0, 1200, 1200)
    ts.read("a")                                           # hit; LRU order now b, c, a
    ts.write("c", np.zeros(100, F))                        # hit, dirty
    ts.read("d")                                           # miss: evicts b (clean, no write-back)
    assert list(ts._cache) == ["a", "c", "d"]
    c = ts.counters()["dram"]
    assert (c["hits"], c["misses"], c["evictions"], c["bytes_out"]) == (2, 4, 1, 0)
    ts.read("b")                                           # evicts a (clean)
    ts.read("a")                                           # evicts c: dirty -> written back
    c = ts.counters()
    assert c["dram"]["evictions"] == 3 and c["dram"]["bytes_out"] == 400
    assert c["flash"]["bytes_written"] == 1600 + 400
    np.testing.assert_array_equal(np.fromfile(tmp_path / ts._meta["c"][2], F), np.zeros(100, F))
    np.testing.assert_array_equal(ts.read("c"), np.zeros(100, F))
    assert ts.cached_bytes <= 1200


def test_pinned_tensors_are_not_evicted_and_oversize_goes_direct(tmp_path):
    ts = TieredStore(dram_budget_bytes=800, flash_dir=tmp_path)
    ts.put("big", np.arange(1000, dtype=F))                # 4000 B > budget: direct map access
    ts.put("x", np.ones(100, F))
    ts.put("y", np.ones(100, F))
    big = ts.acquire("big")
    assert isinstance(big, np.memmap)
    big[:10] = -1
    ts.release("big", dirty=True)
    assert ts.counters()["flash"]["direct"] == 1
    np.testing.assert_array_equal(np.fromfile(tmp_path / ts._meta["big"][2], F)[:11], [-1] * 10 + [10])
    x = ts.acquire("x")
    y = ts.acquire("y")                                    # both pinned: budget 800 full
    ts.put("z", np.ones(100, F))
    z = ts.acquire("z")                                    # cannot evict pinned x, y -> direct
    assert isinstance(z, np.memmap) and not isinstance(x, np.memmap) and not isinstance(y, np.memmap)
    for k in "xyz":
        ts.release(k)
    with pytest.raises(TierError, match="'x' that is not acquired"):
        ts.release("x")
    with pytest.raises(TierError, match="unknown tensor 'nope'"):
        ts.acquire("nope")
    with pytest.raises(TierError, match="'x' already exists"):
        ts.put("x", np.ones(1, F))


def test_tier_errors_are_memoryx_errors_naming_the_field_or_path(tmp_path):
    with pytest.raises(ConfigError, match="dram_budget_bytes"):
        TieredStore(dram_budget_bytes=-1)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(StorageError, match="file") as e:
        TieredStore(dram_budget_bytes=0, flash_dir=tmp_path / "file" / "sub")
    assert isinstance(e.value, MemoryXError) and isinstance(e.value, OSError)


def test_without_flash_everything_stays_in_dram():
    ts = TieredStore()
    ts.put("a", np.ones(4, F))
    assert ts.flash_dir is None and ts.counters()["dram"]["cached_bytes"] == 16


def train(mx, steps, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for n in reversed(mx.layer_names()):
            mx.apply_gradient(n, rng.standard_normal(mx.shape(n), dtype=F))
    return mx


def build(opt, **kw):
    mx = MemoryX(opt, **kw)
    for i, shape in enumerate([(64, 48), (32, 64), (10, 32), (10,)]):
        mx.add_layer(f"l{i}", shape, "xavier_uniform", seed=i)
    return mx


@pytest.mark.parametrize("opt", [Momentum(lr=0.05, nesterov=True), Adam(lr=1e-3), AdamW(lr=1e-3)],
                         ids=lambda o: o.kind)
def test_model_larger_than_dram_trains_bit_identically(opt, tmp_path):
    ref = train(build(opt), 4)
    total = ref.stored_bytes()
    # budgets: a third of the model; smaller than one layer's tensors (direct access); zero
    for i, budget in enumerate([total // 3, 3000, 0]):
        mx = train(build(opt, dram_budget_bytes=budget, flash_dir=tmp_path / f"b{i}", chunk_elems=500), 4)
        c = mx.counters()
        assert c["dram"]["cached_bytes"] <= budget
        assert c["dram"]["misses"] > 0 and c["flash"]["bytes_read"] > 0
        if budget == 0:
            assert c["flash"]["direct"] == c["dram"]["misses"]
        elif i == 0:
            assert c["dram"]["evictions"] > 0 and c["dram"]["bytes_out"] > 0
        else:
            assert c["flash"]["direct"] > 0 and c["dram"]["hits"] > 0
        for n in ref.layer_names():
            np.testing.assert_array_equal(mx.master(n), ref.master(n))
            np.testing.assert_array_equal(mx.bf16(n), ref.bf16(n))
            for k, v in ref.state(n).items():
                np.testing.assert_array_equal(mx.state(n)[k], v)
            np.testing.assert_array_equal(np.concatenate(list(mx.stream(n, rows_per_chunk=7))),
                                          ref.bf16(n).reshape(len(np.atleast_2d(ref.bf16(n))), -1))
        mx.close()


def test_flash_files_hold_the_state_after_flush(tmp_path):
    mx = train(build(AdamW(lr=1e-3), dram_budget_bytes=10**9, flash_dir=tmp_path), 2)
    mx.flush()
    ts = mx.tiers
    for n in mx.layer_names():
        name = ts._meta[(n, "master")][2]
        np.testing.assert_array_equal(np.fromfile(tmp_path / name, F).reshape(mx.shape(n)), mx.master(n))


def test_temporary_flash_dir_is_removed_on_close():
    mx = build(AdamW(), dram_budget_bytes=1000)
    d = mx.tiers.flash_dir
    names = sorted(p.name for p in d.iterdir())         # the lock file and the layers' tensor files
    assert d.is_dir() and names == [".memoryx.lock"] + [f"t{i:06d}.bin" for i in range(4 * 5)]
    mx.close()
    assert not d.exists()


def test_streaming_a_layer_larger_than_dram_reads_only_its_rows(tmp_path):
    mx = MemoryX(AdamW(), dram_budget_bytes=1000, flash_dir=tmp_path)
    mx.add_layer("big", (40, 50), "normal")            # bf16 copy: 4000 B > budget
    ref = mx.tiers.read_rows(("big", "bf16"), 0, 40)
    before = mx.counters()["flash"]
    chunks = list(mx.stream("big", rows_per_chunk=16))
    after = mx.counters()["flash"]
    assert [c.shape for c in chunks] == [(16, 50), (16, 50), (8, 50)]
    np.testing.assert_array_equal(np.concatenate(chunks), ref)
    assert after["bytes_read"] - before["bytes_read"] == 4000
    assert after["direct"] - before["direct"] == 3
