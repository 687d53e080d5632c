"""Simulation: ``kit`` (cocotb runner, stream drivers/monitors, scoreboards), ``harness`` (test-harness
RTL: players, recorders, plain-Verilog testbenches), ``benches`` (one bench per block) and ``system``
(the system simulation application, ``make sim``)."""
