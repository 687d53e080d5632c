"""Simulation: ``kit`` (cocotb runner, stream drivers/monitors, scoreboards), ``harness`` (test-harness
RTL: players, recorders, plain-Verilog testbenches), ``benches`` (one bench per block), ``pe_fuzz`` (differential
fuzzing of the PE core), ``formal`` (proofs over several blocks), ``mutate`` (mutation testing of the RTL)
and ``system`` (the system simulation application, ``make sim``)."""
