"""The address maps and register formats of arch.router_map, arch.pe_map, arch.tile_map and
arch.wafer_map: the values the RTL, models, benches and compiler share."""

import numpy as np
import pytest

from arch.config_bus import ADDR_BITS
from arch.pe_map import (
    COMMIT_ORDER,
    DESC_STRIDE,
    DESC_WORDS,
    DESCRIPTOR,
    FAULT_STATUS,
    PE_PARAMS,
    STATUS,
    Fault,
    Op,
    core_span,
    decode,
    desc_addr,
    descriptor_writes,
    done_addr,
    encode,
    status_base,
)
from arch.ports import OPPOSITE, PORT_NAMES, SIDES, STEP, Port
from arch.router_map import (
    ADDR_ERROR,
    ERROR_STATUS,
    ROUTER_ADDR_SPAN,
    ROUTER_PARAMS,
    ErrorCode,
    route_addr,
    route_mask,
)
from arch.tile_map import CORE_BASE, mesh_tile_addr_bits, tile_address
from arch.wafer_map import ADAPTER, ADAPTER_SPAN, MAX_ADAPTER_COLUMNS, adapter_base


def test_ports_and_directions():
    assert [int(p) for p in Port] == [0, 1, 2, 3, 4] and PORT_NAMES == ("n", "e", "s", "w", "ramp")
    for p in SIDES:
        assert OPPOSITE[OPPOSITE[p]] == p
        assert tuple(-x for x in STEP[p]) == STEP[OPPOSITE[p]]
    assert STEP[Port.S] == (1, 0) and STEP[Port.E] == (0, 1)     # row 0 north, column 0 west


def test_router_map():
    assert route_addr(3, Port.W) == 3 * 8 + 3 and route_addr(31, Port.RAMP) == 0xFC < ADDR_ERROR
    assert route_mask(["RAMP", "S"]) == route_mask([Port.S, Port.RAMP]) == 0b10100
    assert route_mask(Port) == 0x1F
    with pytest.raises(ValueError):
        route_addr(32, 0)
    assert ERROR_STATUS.pack(flag=1, code=ErrorCode.BAD_ROUTE, port=Port.W, color=3) == \
        1 | (4 << 1) | (3 << 4) | (3 << 8)
    assert ROUTER_PARAMS.pack(num_colors=24, vc_depth=4) == 24 | (4 << 8)
    assert ROUTER_ADDR_SPAN == CORE_BASE == 0x200


def test_descriptor_encode_decode_round_trip():
    assert DESCRIPTOR.width == 192 and DESC_WORDS == 6 and DESC_STRIDE == 8
    rng = np.random.default_rng(0)
    for _ in range(50):
        fields = {n: int(rng.integers(0, 1 << w)) for n, w in DESCRIPTOR}
        words = encode(**fields)
        assert len(words) == DESC_WORDS and all(0 <= w < 1 << 32 for w in words)
        assert decode(words) == fields
    with pytest.raises(ValueError, match="count"):
        encode(count=1 << 16)
    with pytest.raises(ValueError, match="bogus"):
        encode(bogus=1)


def test_descriptor_word_layout():
    """Word 0: op:2 vmode:2 flags:8 color:5 next:5 dep_a:5 dep_b:5; words 1..5: 16-bit pairs."""
    w = encode(op=Op.VEC, vmode=3, enable=1, dep_b_en=1, color=17, next=2, dep_a=3, dep_b=31,
               a_base=0x1234, a_stride=0x5678, hi=0xBEEF, group=1)
    assert w[0] == 3 | (3 << 2) | (1 << 4) | (1 << 11) | (17 << 12) | (2 << 17) | (3 << 22) | (31 << 27)
    assert w[1] == 0x1234 | (0x5678 << 16) and w[5] == 0xBEEF | (1 << 16)


def test_commit_order_and_writes():
    assert COMMIT_ORDER == (1, 2, 3, 4, 5, 0)
    words = encode(op=Op.FMAC, enable=1, count=3, reps=2)
    writes = descriptor_writes(desc_addr(256, 3), words)
    assert writes == [(256 + 24 + w, words[w]) for w in (1, 2, 3, 4, 5, 0)]


def test_pe_address_map():
    S, T = 2048, 8
    assert desc_addr(S, 5, 2) == S + 8 * 5 + 2
    assert status_base(S, T) == S + 8 * T
    assert [status_base(S, T) + STATUS[n] for n in ("FAULT", "PARAMS", "PACK", "STOP")] == \
        [S + 64, S + 70, S + 71, S + 72]
    assert done_addr(S, T, 3) == S + 8 * T + 16 + 3 and core_span(S, T) == S + 8 * T + 16 + T
    assert FAULT_STATUS.pack(flag=1, code=Fault.RANGE, index=3) == 1 | (5 << 1) | (3 << 5)
    assert PE_PARAMS.pack(lanes=4, num_tasks=8, num_colors=24) == 4 | (8 << 8) | (24 << 16)
    assert max(Fault) < 1 << FAULT_STATUS.field_width("code")


def test_tile_and_wafer_maps():
    assert mesh_tile_addr_bits(256, 4) == 10 and mesh_tile_addr_bits(2048, 8) == 12
    assert tile_address(4, 1, 2, 0x205, 12) == (6 << 12) | 0x205
    assert tile_address(2, 0, 1, 5) == (1 << 10) | 5
    assert adapter_base() == 0xFFC0 == (1 << ADDR_BITS) - ADAPTER_SPAN
    assert max(ADAPTER.values()) + MAX_ADAPTER_COLUMNS <= ADAPTER_SPAN
    assert MAX_ADAPTER_COLUMNS == ADAPTER_SPAN - ADAPTER["G_COUNT"] == 48
