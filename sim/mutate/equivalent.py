"""Surviving mutants explained: why no test can kill them (``key -> reason``).

A mutant listed here survives because it does not change what the block does for any input its
contract allows (an equivalent mutant), said in one sentence. ``make mutate`` counts it apart
from the survivors; a listed mutant that is killed is reported, so the list stays true.
"""

__all__ = ["EQUIVALENT"]

EQUIVALENT = {
    "hdl/pe/core.py:PeCore.elaborate#14:+->-":
        "STATUS['FAULT'] is offset 0: STAT + 0 and STAT - 0 are one address",
    "hdl/pe/core.py:PeCore.elaborate#34:+->-":
        "STATUS['FAULT'] is offset 0: STAT + 0 and STAT - 0 are one address",
    "hdl/pe/vector_unit.py:VectorUnit.elaborate#1:-->+":
        "the done counters' Array padded to MAX_TASKS + T entries instead of MAX_TASKS: a dependency index "
        "is TASK_BITS wide (< MAX_TASKS), so the entries past MAX_TASKS are never read, and the others are "
        "the same",
    "hdl/pe/sram.py:PeSram.elaborate#10:>->>=":
        "at NB == L (the only case `>=` adds) the mask is Cat(row_mask, Const(0, 0)), which is row_mask",
    "hdl/pe/sram.py:PeSram.elaborate.line#2:<-><=":
        "for the last bank (the only case `<=` adds) `lo > NB - 1` is 0 for every bank index lo: hi + 0 is hi",
    "hdl/pe/sram.py:PeSram.elaborate.line#3:-->+":
        "b < NB + 1 holds for every bank, so the last bank takes the first branch too, where `lo > NB - 1` is 0",
    "hdl/mesh.py:Mesh.elaborate#20:<-><=":
        "a read of tile P * Q (the one `<=` adds) indexes one past the tiles' read-data Arrays, which read 0 "
        "(Amaranth's Array: a case without that index), as the mesh's out-of-range read does",
    "hdl/router_parts.py:ChannelBuffers.elaborate#25:>->>=":
        "the channel buffers are built with the router's vc_depth, which Config requires >= 2: there "
        "`D > 1` and `D >= 1` are both true",
    "hdl/router.py:Router.elaborate#42:<-><=":
        "at num_colors = MAX_COLORS (the only case `<=` adds) in_range is the constant 1, so the BAD_COLOR "
        "event the mutant adds is `take & ~1`, never raised",
    "hdl/fp/fp32_add.py:Fp32AddCore.elaborate#21:>->>=":
        "the exponent distance is clamped to 27: at 27 both `d > 27` and `d >= 27` give 27",
    "hdl/fp/fp32_add.py:fp32_round_pack#3:>=->>":
        "the left shift of a subnormal result, exp - 1 when exp >= 1 else 0: at exp == 1, the only case "
        "`>` changes, exp - 1 is 0 too",
    "hdl/fp/fp32_add.py:Fp32AddCore.elaborate#12:<-><=":
        "swapping operands of equal magnitude: with equal signs they are the same value, with opposite "
        "signs the sum is exactly zero and its sign comes from both_neg, and a NaN is canonical, so the "
        "result does not depend on which one is the bigger",
    "hdl/fp/fp32_add.py:_leading_zeros#0:-->+":
        "the search's level count (width -/+ 1).bit_length() is 5 either way for the two widths it is used "
        "at (26 in bf16_mul, 28 in fp32_add): the same circuit",
    "hdl/fp/fp32_add.py:_leading_zeros#4:+->-":
        "range(width +/- 1) needs 5 bits either way for widths 26 and 28: the same signal",
    "hdl/fp/pipeline.py:FpStreamUnit.elaborate#0:+->-":
        "changes a signal's name (stage{k + 1}_valid), not the circuit",
}
