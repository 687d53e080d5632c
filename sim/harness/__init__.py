"""Test-harness RTL: memory-backed stream players/recorders, the system harness tops and the
plain-Verilog testbenches (``*.v``)."""
