import re

import pytest

from hdl.generate import main
from hdl.tops import TOPS


def test_writes_every_top(tmp_path, capsys):
    # The tiny preset keeps this quick (the default 4x4 mesh of 24-color routers takes ~20 s to
    # elaborate); each block's own tests generate its top at the sizes they verify.
    assert main(["--out", str(tmp_path), "--preset", "tiny"]) == 0
    for name in TOPS:
        text = (tmp_path / f"{name}.v").read_text()
        assert re.search(rf"^module {name}\(", text, re.M), name
        assert "clk" in text and "rst" in text


def test_stream_port_naming(tmp_path):
    main(["--out", str(tmp_path), "skid_buffer"])
    text = (tmp_path / "skid_buffer.v").read_text()
    for port in ("i__payload", "i__valid", "i__ready", "o__payload", "o__valid", "o__ready"):
        assert re.search(rf"\b(input|output) (\[\d+:0\] )?{port};", text), port
    assert "input [37:0] i__payload;" in text


def test_unknown_top(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "no_such_top"])
    assert "unknown top(s) no_such_top" in capsys.readouterr().err


@pytest.mark.parametrize("arg,message", [
    ("mesh_rows=0", "mesh_rows must be >= 1"),
    ("bogus=1", "unknown configuration field"),
    ("lanes=four", "not an integer"),
    ("lanes", "expects field=value"),
])
def test_bad_parameter(tmp_path, capsys, arg, message):
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--set", arg])
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir()), "nothing may be written on a bad parameter"
