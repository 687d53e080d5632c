"""The RTL's types and register words are built from arch: the Amaranth layouts equal the arch
bit layouts field for field, and arch (like models) imports neither amaranth nor cocotb."""

import pkgutil
import subprocess
import sys

from amaranth import Const
from amaranth.lib import data

import arch
from arch.pe_map import DESCRIPTOR, FAULT_STATUS
from arch.router_map import ERROR_STATUS
from arch.wavelet import TAGGED, WAVELET
from hdl.layouts import cat_fields
from hdl.pe.core import Descriptor
from hdl.wavelet import TaggedWord, Wavelet
from sim.harness.rtl_system import CFG_WRITE, CfgWrite, cfg_word


def _fields(shape):
    return [(name, f.offset, f.width) for name, f in data.Layout.cast(shape)]


def _arch_fields(layout):
    return [(name, layout.offset(name), width) for name, width in layout]


def test_struct_layouts_equal_arch_layouts():
    for shape, layout in ((Wavelet, WAVELET), (TaggedWord, TAGGED), (Descriptor, DESCRIPTOR),
                          (CfgWrite, CFG_WRITE)):
        assert _fields(shape) == _arch_fields(layout), layout.name
        assert data.Layout.cast(shape).size == layout.width


def test_struct_constants_equal_arch_packing():
    fields = {"data": 0xDEADBEEF, "color": 0x15, "ctrl": 1}
    assert Wavelet.const(fields).as_value().value == WAVELET.pack(**fields)
    assert TaggedWord.const({"data": 9, "last": 1}).as_value().value == TAGGED.pack(data=9, last=1)
    assert CfgWrite.const({"addr": 0x1234, "data": 0xCAFEF00D}).as_value().value == \
        cfg_word(0x1234, 0xCAFEF00D)


def test_cat_fields_is_the_arch_packing():
    v = cat_fields(ERROR_STATUS, flag=Const(1, 1), code=Const(4, 3), port=Const(3, 3),
                   color=Const(21, 5))
    assert len(v) == ERROR_STATUS.width
    assert Const.cast(v).value == ERROR_STATUS.pack(flag=1, code=4, port=3, color=21)
    v = cat_fields(FAULT_STATUS, flag=Const(1, 1), code=Const(8, 4), index=Const(31, 5))
    assert Const.cast(v).value == FAULT_STATUS.pack(flag=1, code=8, index=31)


def test_arch_imports_no_rtl_or_sim_framework():
    names = [m.name for m in pkgutil.walk_packages(arch.__path__, "arch.")]
    code = ("import importlib, sys\n"
            f"for n in {names!r}: importlib.import_module(n)\n"
            "bad = sorted({m.split('.')[0] for m in sys.modules} & {'amaranth', 'cocotb', 'hdl', 'models', 'sim'})\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert len(names) >= 7
    assert out.stdout.strip() == "", f"arch imports {out.stdout.strip()}"
