"""safetensors export/import: readable by the safetensors library, exact, all-or-nothing, streamed
within the DRAM budget plus a few chunks."""

import json

import ml_dtypes
import numpy as np
import pytest
from memoryx_helpers import assert_same_state, peak_heap
from safetensors.numpy import load_file, save_file

from models.memoryx import (
    SGD,
    Adam,
    AdamW,
    MemoryX,
    MemoryXError,
    SafetensorsError,
    StorageError,
    read_safetensors,
)
from models.numerics import bf16_bits

F = np.float32


def trained(opt=None):
    mx = MemoryX(opt or AdamW(lr=1e-2))
    mx.add_layer("enc.weight", (8, 6), "xavier_uniform", seed=1)
    mx.add_layer("enc.bias", (8,), "zeros")
    rng = np.random.default_rng(0)
    for _ in range(2):
        for n in mx.layer_names():
            mx.apply_gradient(n, rng.standard_normal(mx.shape(n), dtype=F))
    return mx


def test_export_fp32_is_read_by_the_safetensors_library(tmp_path):
    mx = trained()
    mx.export_safetensors(tmp_path / "w.safetensors", include_state=True)
    loaded = load_file(tmp_path / "w.safetensors")       # the library's own numpy reader
    assert set(loaded) == {"enc.weight", "enc.bias", "enc.weight.exp_avg", "enc.weight.exp_avg_sq",
                           "enc.bias.exp_avg", "enc.bias.exp_avg_sq"}
    np.testing.assert_array_equal(loaded["enc.weight"], mx.master("enc.weight"))
    np.testing.assert_array_equal(loaded["enc.bias.exp_avg_sq"], mx.state("enc.bias")["exp_avg_sq"])
    meta, _ = read_safetensors(tmp_path / "w.safetensors")
    assert meta["format"] == "weightstream.memoryx" and json.loads(meta["optimizer"])["kind"] == "adamw"


def test_export_bf16_holds_the_streamed_bits(tmp_path):
    mx = trained()
    mx.export_safetensors(tmp_path / "b.safetensors", dtype="bfloat16")
    raw = (tmp_path / "b.safetensors").read_bytes()
    hlen = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + hlen])
    assert header["enc.weight"]["dtype"] == "BF16"
    start, end = header["enc.weight"]["data_offsets"]
    bits = np.frombuffer(raw[8 + hlen + start:8 + hlen + end], np.uint16).reshape(8, 6)
    np.testing.assert_array_equal(bits, mx.bf16("enc.weight"))
    np.testing.assert_array_equal(bits, bf16_bits(mx.master("enc.weight")))


def test_round_trip_restores_weights_and_state(tmp_path):
    mx = trained(Adam(lr=1e-2))
    mx.export_safetensors(tmp_path / "w.safetensors", include_state=True)
    fresh = MemoryX(Adam(lr=1e-2))
    fresh.add_layer("enc.weight", (8, 6), "zeros")
    fresh.add_layer("enc.bias", (8,), "zeros")
    assert fresh.import_safetensors(tmp_path / "w.safetensors") == ["enc.weight", "enc.bias"]
    for n in mx.layer_names():
        np.testing.assert_array_equal(fresh.master(n), mx.master(n))
        np.testing.assert_array_equal(fresh.bf16(n), mx.bf16(n))
        for k, v in mx.state(n).items():
            np.testing.assert_array_equal(fresh.state(n)[k], v)


def test_import_from_other_tools_with_conversion_and_new_layers(tmp_path):
    w16 = np.linspace(-2, 2, 12, dtype=F).astype(ml_dtypes.bfloat16).reshape(3, 4)
    save_file({"head": w16, "emb": np.arange(6, dtype=np.float16).reshape(2, 3)}, tmp_path / "t.safetensors")
    mx = MemoryX(SGD(lr=0.1))
    assert sorted(mx.import_safetensors(tmp_path / "t.safetensors", create_missing=True)) == ["emb", "head"]
    np.testing.assert_array_equal(mx.master("head"), w16.astype(F))
    np.testing.assert_array_equal(mx.bf16("head"), w16.view(np.uint16))
    np.testing.assert_array_equal(mx.master("emb"), np.arange(6, dtype=F).reshape(2, 3))


@pytest.mark.parametrize("tensors, kw, match", [
    ({"enc.weight": np.ones((6, 8), F), "enc.bias": np.ones(8, F)}, {}, r"shape \(6, 8\), expected \(8, 6\)"),
    ({"enc.weight": np.ones((8, 6), F)}, {}, r"no tensor for layer\(s\) \['enc.bias'\]"),
    ({"enc.weight": np.ones((8, 6), F), "enc.bias": np.ones(8, F), "dec": np.ones(2, F)}, {},
     "'dec' matches no layer"),
    ({"enc.weight": np.full((8, 6), np.nan, F), "enc.bias": np.ones(8, F)}, {}, "NaN or Inf"),
    ({"enc.weight": np.ones((8, 6), F), "enc.bias": np.ones(8, np.int32)}, {}, "dtype I32"),
    ({"enc.weight": np.ones((8, 6), F), "enc.bias": np.ones(8, F), "x": np.ones((2, 2, 2), F)},
     {"create_missing": True}, "1-D or 2-D"),
])
def test_bad_import_is_named_and_changes_nothing(tmp_path, tensors, kw, match):
    mx = trained()
    save_file(tensors, tmp_path / "bad.safetensors")
    before = mx.snapshot()
    with pytest.raises(MemoryXError, match=match):
        mx.import_safetensors(tmp_path / "bad.safetensors", **kw)
    assert_same_state(before, mx.snapshot())


def test_garbage_file_is_named(tmp_path):
    (tmp_path / "g").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    mx = trained()
    with pytest.raises(MemoryXError, match="not a valid safetensors file"):
        mx.import_safetensors(tmp_path / "g")
    with pytest.raises(MemoryXError, match="export dtype"):
        mx.export_safetensors(tmp_path / "x", dtype="float16")


def test_errors_name_the_path_and_tensor(tmp_path):
    mx = trained()
    with pytest.raises(SafetensorsError, match=r"cannot read safetensors file .*missing"):
        mx.import_safetensors(tmp_path / "missing")
    with pytest.raises(StorageError, match=r"cannot write .*nodir/w\.safetensors"):
        mx.export_safetensors(tmp_path / "nodir" / "w.safetensors")
    clash = MemoryX(Adam())
    clash.add_layer("a", (2,), "zeros")
    clash.add_layer("a.exp_avg", (2,), "zeros")         # a layer named like a's state tensor
    with pytest.raises(SafetensorsError, match="'a.exp_avg' collides"):
        clash.export_safetensors(tmp_path / "c.safetensors", include_state=True)
    save_file({"enc.weight": np.ones((8, 6), F), "enc.bias": np.ones(8, F)}, tmp_path / "ok.safetensors")
    raw = bytearray((tmp_path / "ok.safetensors").read_bytes())
    (tmp_path / "short.safetensors").write_bytes(bytes(raw[:-4]))
    with pytest.raises(SafetensorsError, match="not a valid safetensors file"):
        mx.import_safetensors(tmp_path / "short.safetensors")



@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_store_8x_its_budget_exports_and_imports_within_budget_plus_chunks(tmp_path, dtype):
    budget, chunk = 1 << 20, 1 << 14
    kw = dict(dram_budget_bytes=budget, chunk_elems=chunk)
    mx = MemoryX(AdamW(lr=1e-3), flash_dir=tmp_path / "a", **kw)
    for i in range(9):
        mx.add_layer(f"l{i}", (256, 256), "normal", seed=i)
    rng = np.random.default_rng(0)
    for n in mx.layer_names():
        mx.apply_gradient(n, rng.standard_normal((256, 256), dtype=F))
    assert mx.stored_bytes() >= 8 * budget
    path = tmp_path / "w.safetensors"
    _, export_peak = peak_heap(lambda: mx.export_safetensors(path, dtype=dtype, include_state=dtype == "float32"))
    fresh = MemoryX(AdamW(lr=1e-3), flash_dir=tmp_path / "b", **kw)
    for n in mx.layer_names():
        fresh.add_layer(n, (256, 256), "zeros")
    _, import_peak = peak_heap(lambda: fresh.import_safetensors(path))
    assert export_peak <= budget + 8 * 4 * chunk, export_peak
    assert import_peak <= budget + 8 * 4 * chunk, import_peak
    loaded = load_file(path)                               # the library reads what was streamed out
    for n in mx.layer_names():
        want = mx.master(n) if dtype == "float32" else mx.bf16(n).view(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(loaded[n], want)
        np.testing.assert_array_equal(fresh.bf16(n), mx.bf16(n))
        if dtype == "float32":
            np.testing.assert_array_equal(fresh.master(n), mx.master(n))
            for k, v in mx.state(n).items():
                np.testing.assert_array_equal(fresh.state(n)[k], v)
