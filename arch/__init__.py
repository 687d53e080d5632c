"""The architecture's shared contracts: plain Python, imported by hdl, models, sim, compiler and
bench; imports nothing from them (and neither amaranth nor cocotb).

One concept per module: :mod:`arch.layout` (the bit-layout packer every word format uses),
:mod:`arch.ports` (router ports, mesh directions), :mod:`arch.wavelet` (wavelet and tagged word),
:mod:`arch.config_bus` (bus widths), :mod:`arch.router_map` (router address map, status words,
error codes), :mod:`arch.pe_map` (PE descriptor format and address map), :mod:`arch.tile_map`
(tile and mesh addresses), :mod:`arch.wafer_map` (wafer adapter registers).
"""
