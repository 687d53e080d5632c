"""One bench per RTL block: cocotb test modules and plain-Verilog harness drivers, each checked
against its golden model."""
