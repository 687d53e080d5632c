"""The floating-point units (docs/fp_units.md): bf16 multiplier, fp32 adder, their stream pipeline."""
