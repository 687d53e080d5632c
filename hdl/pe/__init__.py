"""The PE core (docs/pe.md): descriptor table, wavelet and store engines, vector unit, banked SRAM."""
