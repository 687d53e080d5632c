"""What ``make mutate`` mutates, and which tests must notice.

:data:`TARGETS` maps every RTL source that builds circuits to the tests of its block (pytest paths,
run with ``-x`` under Icarus where the bench allows it) and the tops elaborated to tell a mutant
that cannot elaborate (stillborn) from one that changes the circuit. The rest of ``hdl/`` (the
configuration object, Verilog generation and module merging, formal helpers, the top registry)
builds no circuit and is not mutated.
"""

__all__ = ["TARGETS", "Target"]

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    tests: tuple        # pytest paths or node ids, relative to the project root, in the order run
    tops: tuple         # names of hdl.tops.TOPS elaborated at the tiny preset by the probe


# The fuzzer first: two builds, 300 programs, it kills most PE mutants in seconds.
_PE = Target(("tests/sim/pe_fuzz/test_rtl.py", "tests/hdl/pe/test_pe_core.py"), ("pe_core",))
_FP = Target(("tests/hdl/fp",), ("fp32_add", "bf16_mul"))
# The router's credit outputs and its place in a mesh are exercised by the mesh's tests.
_ROUTER = Target(("tests/hdl/test_router.py", "tests/hdl/test_mesh.py"), ("router",))

TARGETS = {
    "hdl/skid_buffer.py": Target(("tests/hdl/test_skid_buffer.py",), ("skid_buffer",)),
    "hdl/fp/bf16_mul.py": _FP,
    "hdl/fp/fp32_add.py": _FP,
    "hdl/fp/pipeline.py": _FP,
    "hdl/pe/core.py": _PE,
    "hdl/pe/descriptor_table.py": _PE,
    "hdl/pe/sram.py": _PE,
    "hdl/pe/store_engine.py": _PE,
    "hdl/pe/vector_unit.py": _PE,
    "hdl/pe/wavelet_engine.py": _PE,
    "hdl/router.py": _ROUTER,
    "hdl/router_parts.py": _ROUTER,
    "hdl/mesh.py": Target(("tests/hdl/test_mesh.py",), ("mesh4x4",)),
    "hdl/swarmx.py": Target(("tests/hdl/test_swarmx.py",), ("swarmx",)),
    "hdl/tile.py": Target(("tests/hdl/test_tile.py",), ("tile",)),
    # The wafer's tests on its pipelined 2 x 3 build (about 70 s under Icarus).
    "hdl/wafer.py": Target(tuple(f"tests/hdl/test_wafer.py::{t}" for t in (
        "test_wafer_forward[hardware-2-3-13-13-0.2-0.3]", "test_wafer_forward_last_layer",
        "test_wafer_backward_weight[hardware-2-3-7-24-lanes]", "test_wafer_backward_data",
        "test_wafer_multicast_configuration_and_next_input_stream",
        "test_gradient_link_block_restarts_when_its_count_is_written")), ("wafer",)),
    "hdl/system.py": Target(("tests/hdl/test_system_flags.py",
                             "tests/sim/system/test_rtl_host.py::test_small_system_under_icarus"), ("system",)),
}
