"""The fuzzed configurations of the PE core, and the random words programs carry."""

import numpy as np

# The ``tiny`` preset with these changes. ``tiny``: lanes 2, 256 words in 2 banks, 4 tasks, 4 colors;
# ``pipe``: the hardware preset's fp stages (acc_rows 5); ``wide``: 4 lanes in 4 banks, 8 tasks, 8 colors;
# ``odd``: 3 lanes in 4 banks, 6 tasks and colors, mul 1 add 2; ``one``: one lane in 2 banks.
CONFIGS = {
    "tiny": {},
    "pipe": {"mul_stages": 4, "add_stages": 4},
    "wide": {"lanes": 4, "sram_banks": 4, "num_tasks": 8, "num_colors": 8},
    "odd": {"lanes": 3, "sram_banks": 4, "num_tasks": 6, "num_colors": 6, "mul_stages": 1, "add_stages": 2},
    "one": {"lanes": 1, "sram_banks": 2},
}


def make_config(spec):
    """The ``hdl.config.Config`` of a program's ``config`` (a name of :data:`CONFIGS` or a dict of
    changes to the ``tiny`` preset)."""
    from hdl.config import preset
    return preset("tiny", **(CONFIGS[spec] if isinstance(spec, str) else spec))


def config_name(spec):
    """The name of :data:`CONFIGS` a ``config`` is, else its changes as ``k=v,...``."""
    if isinstance(spec, str):
        return spec
    for name, changes in CONFIGS.items():
        if changes == spec:
            return name
    return ",".join(f"{k}={v}" for k, v in sorted(spec.items())) or "tiny"


def drain_cycles(cfg):
    """Idle cycles the bench waits after the core is quiet: the last row or store word on its way to
    SRAM, the pipelined vector unit's last words (words an RTL sends beyond the model's show up here
    or in a later step)."""
    return 6 + 2 * (cfg.mul_stages + cfg.add_stages)


_SPECIAL32 = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x80000001],
                      dtype=np.uint32)
_SPECIAL16 = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x8005, 0x3F80, 0xBF80], dtype=np.uint32)


def rand_words(rng, n, kind=None):
    """``n`` random words: ``bf16`` (upper halves of mixed sign and scale with specials, garbage low
    halves, many of them rounding ties), ``act`` (clean bf16, a third of them zero), ``fp32``, or a
    kind drawn at random."""
    if kind is None:
        kind = ("bf16", "bf16", "act", "fp32")[int(rng.integers(4))]
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))).astype(np.float32).view(np.uint32)
    exact = rng.random(n) < 0.03                 # whole special words: +-0, +-inf, NaN, +-subnormal
    special = rng.choice(_SPECIAL32, n)
    if kind == "fp32":
        w = np.where(rng.random(n) < 0.05, rng.choice(_SPECIAL16, n) << 16, v)
        return [int(x) for x in np.where(exact, special, w)]
    hi = v >> 16
    hi = np.where(rng.random(n) < 0.08, rng.choice(_SPECIAL16, n), hi)
    if kind == "act":
        hi = np.where(rng.random(n) < 0.33, 0, hi)
        return [int(x) << 16 for x in hi]
    lo = rng.integers(0, 1 << 16, n, dtype=np.uint32)
    lo = np.where(rng.random(n) < 0.4, rng.choice(np.array([0x8000, 0x7FFF, 0x8001], dtype=np.uint32), n), lo)
    return [int(x) for x in np.where(exact, special, (hi << 16) | lo)]
