"""Weight-streaming pipeline golden model (docs/pipeline.md, docs/architecture.md#layer-mapping).

* :mod:`.mapping` — partition of a dense layer's K (over the Q columns) and B (over the P rows).
* :mod:`.kernels` — the exact forward / backward-data / backward-weight kernels, ReLU and mask, the
  host loss; the decisions the RTL implements are documented at the top of that module.
* :mod:`.training` — data-parallel training through the kernels (SwarmX tree sum, MemoryX
  optimizer) and the plain float32 reference; :mod:`.digits` — the ``load_digits`` check.
* :mod:`.timing` — the cycle-level timing model (:class:`~.timing.TimingParams`, ``step_timing``,
  ``scaling``); :mod:`.scaling` — ``python -m models.pipeline``, the answers command.
"""
