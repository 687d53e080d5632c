"""The answers command: configuration file in, tables + JSON + PNG plots out, bad files named."""

import json

import pytest

from models.pipeline.scaling import DEFAULT_CONFIG, ConfigFileError, load_config, main
from models.pipeline.timing import TimingParams, step_timing

TINY = """
[params]
mesh_rows = 4
mesh_cols = 4
lanes = 2
[utilization]
layer_sizes = [16, 64]
layers = 2
meshes = [2, 4]
batch = 8
batches = [4, 16]
batch_layer = 32
[scaling]
systems = [1, 4, 5, 192]
[[scaling.network]]
name = "toy"
dims = [32, 64, 10]
batch = 8
global_batch = 192
[[variants]]
name = "fmac dW"
params = { dw_dot_product = false }
"""


def test_command_writes_tables_json_and_plots(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY)
    assert main(["--config", str(cfg), "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "pipeline.json").read_text())
    for name in ("utilization.png", "scaling_weak.png", "scaling_strong.png", "throughput.png"):
        data = (tmp_path / "out" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    tp = TimingParams(mesh_rows=4, mesh_cols=4, lanes=2)
    net = result["scaling"][0]
    assert [r["systems"] for r in net["weak"]] == [1, 4, 5, 192]
    for r in net["weak"]:
        assert r["step_cycles"] == step_timing((32, 64, 10), 8, r["systems"], tp).cycles
    assert [r["batch_per_system"] for r in net["strong"]] == [192, 48, 39, 1]
    assert result["utilization"]["grid"][1][0] == step_timing(
        (64, 64, 64), 8, 1, tp.replace(mesh_rows=2, mesh_cols=2)).utilization
    assert "toy [32, 64, 10]: scaling over N systems" in capsys.readouterr().out
    assert result["variants"] == [["fmac dW", round(step_timing((32, 64, 10), 8, 1, tp.replace(
        dw_dot_product=False)).utilization, 4)]]


def test_reference_configuration_loads():
    params, cfg = load_config(DEFAULT_CONFIG)
    assert params.mesh_rows == 64 and max(cfg["scaling"]["systems"]) == 192
    assert any(12288 in net["dims"] for net in cfg["scaling"]["network"])


@pytest.mark.parametrize("edit,match", [
    (lambda s: s + "\n[extra]\n", "unknown section"),
    (lambda s: s.replace("lanes = 2", "lanes = 99"), "lanes"),
    (lambda s: s.replace("lanes = 2", "lane = 2"), "lane"),
    (lambda s: s.replace("systems = [1, 4, 5, 192]", "systems = [1, 193]"), "192"),
    (lambda s: s.replace("dims = [32, 64, 10]", "dims = [32]"), "dims"),
    (lambda s: s.replace("batch = 8\nglobal", "batch = 0\nglobal"), "batch"),
    (lambda s: s.replace("meshes = [2, 4]", "meshes = []"), "meshes"),
    (lambda s: s.replace("[[scaling.network]]", "[[scaling.nets]]"), "network"),
    (lambda s: s.replace("[params]", "[params"), "c.toml"),
    (lambda s: s.replace("dw_dot_product = false", "dw_dot_product = 0"), "fmac dW"),
])
def test_bad_configuration_is_named(tmp_path, edit, match, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(edit(TINY))
    with pytest.raises((ConfigFileError, ValueError), match=match):
        load_config(cfg)
    assert main(["--config", str(cfg), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    assert "error:" in capsys.readouterr().err
