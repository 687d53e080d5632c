"""safetensors export/import: readable by the safetensors library, exact, all-or-nothing."""

import json

import ml_dtypes
import numpy as np
import pytest
from memoryx_helpers import assert_same_state
from safetensors.numpy import load_file, save_file

from models.memoryx import SGD, Adam, AdamW, MemoryX, MemoryXError, read_safetensors
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
