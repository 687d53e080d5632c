"""Weight-streaming pipeline golden model (DESIGN.md 5.7 and 6).

* :mod:`.mapping` — partition of a dense layer's K and B over a P x Q wafer.
* :mod:`.kernels` — the exact forward / backward-data / backward-weight kernels and the host loss
  (the decisions the RTL implements are documented at the top of that module).
"""
