"""Benches for the floating-point stream tops ``fp32_add`` and ``bf16_mul`` (docs/fp_units.md).

Two paths, both bit-exact against ``models.numerics``:

* Bulk (no cocotb, Python off the per-cycle path): :func:`run_harness` writes operand pairs and
  their golden results to a hex file and runs ``sim/harness/fp_stream_harness.v`` on the top under
  Icarus or Verilator (``sim.kit.testbench``) with random valid gaps and back-pressure driven from
  Verilog; the harness compares every result in order.
* cocotb (this module's ``@cocotb.test``s, parameters from ``sim.kit.params()``): the special and
  boundary pairs with random gaps and back-pressure, the cycle of every transfer checked against
  a closed-loop replay of the pipeline's cycle model, and latency / throughput at full rate.

Vector sets: :func:`special_values` (signed zeros, subnormal and normal boundaries, 1 and its
neighbours, largest normals, infinities, quiet and signalling NaNs, rounding ties, cancellation
and large exponent gaps), :func:`random_pairs` (half uniform bit patterns, half close exponents
for the adder / result exponents at the subnormal and overflow boundaries for the multiplier).
"""

import fcntl
import json
import os
import random
import re
import time
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from hdl.verilog import write_verilog
from models import numerics as nx
from models.skid_buffer import SkidBufferModel
from sim.kit import params
from sim.kit.clocking import reset
from sim.kit.runner import BUILD, ROOT
from sim.kit.scoreboard import InOrderScoreboard
from sim.kit.stream import StreamDriver, StreamMonitor, recorded, replay_closed_loop

UNITS = {
    # unit: (operand width, golden function on bit patterns)
    "fp32_add": (32, nx.fp32_add_bits),
    "bf16_mul": (16, nx.bf16_mul_bits),
}
HARNESS = ROOT / "sim" / "harness" / "fp_stream_harness.v"
CORE_HARNESS = ROOT / "sim" / "harness" / "fp_core_harness.v"

__all__ = ["UNITS", "special_values", "special_pairs", "random_pairs", "golden", "hex_lines",
           "HarnessJob", "HarnessResult", "prepare_harness", "run_harness", "run_core_harness",
           "FpStreamCycleModel"]


# ----------------------------------------------------------------------------------------------
# vector sets

_FP32_SPECIALS = [
    0x00000000,                                     # zero
    0x00000001, 0x00000002, 0x00000003,             # smallest subnormals
    0x00400000, 0x007FFFFE, 0x007FFFFF,             # mid / largest subnormals
    0x00800000, 0x00800001, 0x00FFFFFF, 0x01000000, # smallest normals
    0x3F800000, 0x3F800001, 0x3F7FFFFF, 0x3F7FFFFE, # 1 and its neighbours
    0x3FC00000, 0x40000000, 0x40400000, 0x3F000000, # 1.5, 2, 3, 0.5
    0x33800000, 0x33800001, 0x337FFFFF, 0x33000000, # half an ulp of 1 (ties against 1), nearby
    0x34000000, 0x33C00000,                         # one ulp of 1, 1.5 half-ulps
    0x4B800000, 0x4B800001, 0x4B7FFFFF, 0x4B000001, # 2**24 (ties with 1: odd and even)
    0x7F7FFFFF, 0x7F7FFFFE, 0x7F000000, 0x7F7FFFFD, # largest normals (overflow on add)
    0x73800000, 0x73000000,                         # half an ulp of the largest normal, below
    0x0D000000, 0x50000000, 0x1A2B3C4D, 0x6E5D4C3B, # very large exponent differences
    0x7F800000,                                     # infinity
    0x7FC00000, 0x7FC00001, 0x7FFFFFFF,             # quiet NaNs
    0x7F800001, 0x7FBFFFFF, 0x7FA00000,             # signalling NaNs
]

_BF16_SPECIALS = [
    0x0000,                                         # zero
    0x0001, 0x0002, 0x0003, 0x0040, 0x007E, 0x007F, # subnormals (smallest, mid, largest)
    0x0080, 0x0081, 0x00FF, 0x0100,                 # smallest normals
    0x3F80, 0x3F81, 0x3F7F, 0x3FFF,                 # 1 and its neighbours, just below 2
    0x3FC0, 0x4000, 0x4040, 0x3F00, 0x3FA0,         # 1.5, 2, 3, 0.5, 1.25
    0x3780, 0x3700, 0x3740, 0x36C0, 0x3600, 0x3500, # 2**-16 .. 2**-21 (products land subnormal)
    0x33C0, 0x3380, 0x3400, 0x2000, 0x1F80, 0x1FFF, # 2**-24 neighbourhood, 2**-63, 2**-64
    0x5F80, 0x5F7F, 0x5FFF, 0x6000, 0x4780, 0x4B00, # 2**64 neighbourhood (products overflow)
    0x7F7F, 0x7F7E, 0x7F00,                         # largest normals
    0x7F80,                                         # infinity
    0x7FC0, 0x7FC1, 0x7FFF,                         # quiet NaNs
    0x7F81, 0x7FBF,                                 # signalling NaNs
]


def special_values(unit):
    """The special and boundary operands of ``unit`` (both signs), as ``uint32``/``uint16``."""
    width, _ = UNITS[unit]
    base = np.array(_FP32_SPECIALS if width == 32 else _BF16_SPECIALS, dtype=np.uint64)
    values = np.concatenate([base, base | (1 << (width - 1))])
    return values.astype(np.uint32 if width == 32 else np.uint16)


def special_pairs(unit):
    """Every ordered pair ``(a, b)`` of :func:`special_values`, plus, for the adder, each value
    against its negation's neighbours (cancellation to one or two ulps)."""
    v = special_values(unit)
    a, b = np.meshgrid(v, v, indexing="ij")
    a, b = a.ravel(), b.ravel()
    if unit == "fp32_add":
        finite = v[(v & 0x7F800000) != 0x7F800000].astype(np.int64)
        near = [((finite ^ 0x80000000) + d) & 0xFFFFFFFF for d in (-2, -1, 1, 2)]
        keep = [(n & 0x7FFFFFFF) <= 0x7F7FFFFF for n in near]
        a = np.concatenate([a] + [finite[k] for k in keep]).astype(np.uint32)
        b = np.concatenate([b] + [n[k] for n, k in zip(near, keep, strict=True)]).astype(np.uint32)
    return a, b


def random_pairs(unit, n, seed, kind="mixed"):
    """``n`` random operand pairs of ``kind``:

    * ``"uniform"``: uniform over all bit patterns (NaNs, infinities and subnormals included);
    * ``"close"``: adder: exponents at most 2 apart, random signs, so that cancellation and
      renormalization are common; multiplier: the product's exponent near the subnormal
      (2**-152 .. 2**-125) or overflow (2**125 .. 2**129) boundary, where it is rounded;
    * ``"mixed"``: the first half uniform, the second half close.
    """
    if kind not in ("uniform", "close", "mixed"):
        raise ValueError(f"kind must be 'uniform', 'close' or 'mixed', got {kind!r}")
    width, _ = UNITS[unit]
    rng = np.random.default_rng(seed)
    dtype = np.uint32 if width == 32 else np.uint16
    a = rng.integers(0, 1 << width, n, dtype=np.uint64).astype(dtype)
    b = rng.integers(0, 1 << width, n, dtype=np.uint64).astype(dtype)
    start = {"uniform": n, "close": 0, "mixed": n // 2}[kind]
    m = n - start
    if m == 0:
        return a, b
    if unit == "fp32_add":
        ea = rng.integers(0, 255, m)
        eb = np.clip(ea + rng.integers(-2, 3, m), 0, 254)
        a[start:] = (a[start:] & 0x807FFFFF) | (ea.astype(np.uint32) << 23)
        b[start:] = (b[start:] & 0x807FFFFF) | (eb.astype(np.uint32) << 23)
    else:
        # unbiased product exponent (ea - 127) + (eb - 127) near -126 (60 %) or +127 (40 %)
        target = np.where(rng.random(m) < 0.6, rng.integers(-152, -124, m), rng.integers(125, 130, m))
        ea = rng.integers(0, 255, m)
        eb = np.clip(target + 254 - ea, 0, 254)
        a[start:] = (a[start:] & 0x807F) | (ea.astype(np.uint16) << 7)
        b[start:] = (b[start:] & 0x807F) | (eb.astype(np.uint16) << 7)
    return a, b


def golden(unit, a, b):
    """Golden results (``uint32``) of ``unit`` on operand bit patterns."""
    return UNITS[unit][1](a, b).astype(np.uint32)


# ----------------------------------------------------------------------------------------------
# bulk path: plain Verilog harness under Icarus

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_lines(*columns):
    """One text line per row: the hex of each ``(array, digits)`` column, concatenated."""
    n = len(columns[0][0])
    total = sum(d for _, d in columns)
    out = np.empty((n, total + 1), dtype=np.uint8)
    pos = 0
    for arr, digits in columns:
        arr = np.asarray(arr, dtype=np.uint64)
        for k in range(digits):
            out[:, pos + k] = _HEX[(arr >> np.uint64(4 * (digits - 1 - k))) & np.uint64(15)]
        pos += digits
    out[:, -1] = ord("\n")
    return out.tobytes()


class HarnessResult(dict):
    """Parsed ``RESULT`` line of the harness (``n, errors, extra, cycles, first_in, first_out,
    sent``) plus ``mismatches`` (the harness's first ten ``MISMATCH`` lines)."""


class HarnessJob:
    """One prepared bulk run: Verilog ``sources``, harness ``toplevel``, ``run_dir`` holding
    ``vectors.hex``, and the simulator ``plusargs`` / ``defines``."""

    def __init__(self, sources, toplevel, run_dir, plusargs, defines, lock):
        self.sources, self.toplevel, self.run_dir = sources, toplevel, run_dir
        self.plusargs, self.defines = plusargs, defines
        self._lock = lock

    def cleanup(self):
        """Remove the vector file (it can be tens of MB) and release the folder."""
        (self.run_dir / "vectors.hex").unlink(missing_ok=True)
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def prepare_harness(unit, a, b, *, target="stream", expected=None, gap=0, stall=0, seed=1, tag="bulk",
                    latency=2):
    """Write the Verilog and the vector file for a bulk run and return its :class:`HarnessJob`.

    ``target="stream"``: the stream top ``unit`` in ``fp_stream_harness.v`` with ``gap`` /
    ``stall`` percent random valid gaps / back-pressure; ``target="core"``: its combinational core
    (``Fp32AddCore`` / ``Bf16MulCore``) in ``fp_core_harness.v``, one vector per time unit.
    ``latency`` is the stream top's ``Config.fp_latency``.
    ``expected`` defaults to the golden model's results. The run folder stays locked (other
    sessions wait) until :meth:`HarnessJob.cleanup`."""
    from hdl.config import Config
    from hdl.fp.bf16_mul import Bf16MulCore
    from hdl.fp.fp32_add import Fp32AddCore
    from hdl.tops import build_top

    if unit not in UNITS:
        raise KeyError(f"unknown fp unit {unit!r}; known: {', '.join(UNITS)}")
    if target not in ("stream", "core"):
        raise ValueError(f"target must be 'stream' or 'core', got {target!r}")
    if not (0 <= gap < 100 and 0 <= stall < 100):
        raise ValueError(f"gap and stall are percentages in [0, 100), got {gap} and {stall}")
    width, _ = UNITS[unit]
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"need equally long, non-empty operand arrays, got {len(a)} and {len(b)}")
    expected = golden(unit, a, b) if expected is None else np.asarray(expected, dtype=np.uint32)
    if len(expected) != len(a):
        raise ValueError(f"{len(expected)} expected results for {len(a)} pairs")
    # One folder per tag and pytest-xdist worker, reused across runs (the compiled harness is
    # cached there), locked from here until cleanup() so that concurrent sessions queue.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    run_dir = BUILD / f"harness-{unit}" / f"{target}-{tag}-L{latency}-{worker}"
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = open(run_dir / ".run.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    if target == "stream":
        verilog = write_verilog(build_top(unit, Config(fp_latency=latency)), unit, run_dir)
        harness, toplevel, dut = HARNESS, "fp_stream_harness", unit
        plusargs = [f"+gap={gap}", f"+stall={stall}", f"+seed={seed}"]
    else:
        core = Fp32AddCore() if unit == "fp32_add" else Bf16MulCore()
        verilog = write_verilog(core, f"{unit}_core", run_dir)
        harness, toplevel, dut = CORE_HARNESS, "fp_core_harness", f"{unit}_core"
        plusargs = []
    digits = width // 4
    (run_dir / "vectors.hex").write_bytes(hex_lines((a, digits), (b, digits), (expected, 8)))
    return HarnessJob([verilog, harness], toplevel, run_dir, ["+vectors=vectors.hex", *plusargs],
                      {"DUT": dut, "WA": width, "WB": width, "NVEC": len(a)}, lock)


def run_harness(unit, a, b, *, target="stream", expected=None, gap=0, stall=0, seed=1, tag="bulk", latency=2,
                simulator=None):
    """Run the pairs ``(a[k], b[k])`` through ``unit`` in the plain-Verilog harness under
    ``simulator`` (default :func:`sim.kit.testbench.harness_simulator` for ``len(a)`` vectors), see
    :func:`prepare_harness`; returns the parsed :class:`HarnessResult`."""
    from sim.kit.testbench import Testbench, harness_simulator

    job = prepare_harness(unit, a, b, target=target, expected=expected, gap=gap, stall=stall,
                          seed=seed, tag=tag, latency=latency)
    try:
        tb = Testbench(job.sources, job.toplevel, simulator=harness_simulator(simulator, len(a)),
                       defines=job.defines)
        out = tb.run(job.plusargs, cwd=job.run_dir).stdout
    finally:
        job.cleanup()
    return _parse(out)


def run_core_harness(unit, a, b, *, expected=None, tag="core"):
    """:func:`run_harness` on the combinational core of ``unit`` (``target="core"``)."""
    return run_harness(unit, a, b, target="core", expected=expected, tag=tag)


def _parse(out):
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT")), None)
    if line is None:
        raise AssertionError(f"harness printed no RESULT line:\n{out}")
    result = HarnessResult((k, int(v)) for k, v in re.findall(r"(\w+)=(-?\d+)", line))
    result["mismatches"] = [ln for ln in out.splitlines() if ln.startswith("MISMATCH")]
    return result


# ----------------------------------------------------------------------------------------------
# cycle model of the stream tops (hdl.fp.pipeline.FpStreamUnit)

class FpStreamCycleModel:
    """Cycle model of :class:`hdl.fp.pipeline.FpStreamUnit`: operand :class:`SkidBufferModel`,
    the arithmetic function ``fn(payload) -> result`` with ``latency - 2`` register stages that
    advance together while the result stage's (registered) ``in_ready`` is high, result
    :class:`SkidBufferModel`.

    :meth:`cycle` takes the input offer and output ready of one clock and returns
    ``(in_ready, accepted, emitted)`` like :class:`models.skid_buffer.SkidBufferModel`.
    """

    def __init__(self, fn, latency=2):
        self.fn = fn
        self.operands = SkidBufferModel()
        self.stages = [None] * (latency - 2)     # results in flight inside the core (None: empty)
        self.result = SkidBufferModel()

    def cycle(self, in_valid, in_payload, out_ready):
        advance = self.result.in_ready
        entering = self.fn(self.operands.out) if self.operands.out_valid else None
        if self.stages:
            leaving = self.stages[-1]
            if advance:
                self.stages = [entering] + self.stages[:-1]
        else:
            leaving = entering
        in_ready, accepted, _ = self.operands.cycle(in_valid, in_payload, advance)
        _, _, emitted = self.result.cycle(leaving is not None, leaving if leaving is not None else 0, out_ready)
        return in_ready, accepted, emitted


# ----------------------------------------------------------------------------------------------
# cocotb tests (parameters: unit, vectors = "special" | "random", n, kind, gap_prob, stall_prob,
# latency = the top's documented LATENCY)


def _operands(p, seed):
    unit = p["unit"]
    if p.get("vectors", "special") == "special":
        a, b = special_pairs(unit)
    else:
        a, b = random_pairs(unit, p.get("n", 2000), seed, p.get("kind", "mixed"))
    return unit, a, b


async def _output_protocol(dut, violations):
    """Every cycle: once ``o.valid`` is offered and not taken, the next cycle must offer it
    again with the same payload (``o.valid`` never waits for, nor is withdrawn without, ready)."""
    held = None
    while True:
        await RisingEdge(dut.clk)
        valid, ready = int(dut.o__valid.value), int(dut.o__ready.value)
        payload = int(dut.o__payload.value) if valid else None
        if held is not None and (not valid or payload != held):
            violations.append(f"o.valid/payload changed while stalled: held {held:#010x}, now "
                              f"valid={valid} payload={payload if payload is None else hex(payload)}")
        held = payload if valid and not ready else None


async def _run(dut, p, gap_prob, stall_prob, seed):
    rng = random.Random(seed)
    unit, a, b = _operands(p, seed)
    width = UNITS[unit][0]
    expected = [int(y) for y in golden(unit, a, b)]
    words = [int(x) | (int(y) << width) for x, y in zip(a, b, strict=True)]
    n = len(words)
    gap_log, stall_log, violations = [], [], []
    await reset(dut)
    board = InOrderScoreboard(f"{unit}.o")
    board.expect(expected)
    drv = StreamDriver(dut.clk, dut, "i", gaps=recorded(gap_prob, rng, gap_log))
    mon = StreamMonitor(dut.clk, dut, "o", stall=recorded(stall_prob, rng, stall_log),
                        callback=lambda w, c: board.got(w))
    cocotb.start_soon(_output_protocol(dut, violations))
    drv.send(words)
    await mon.wait_for(n)
    await ClockCycles(dut.clk, 8)
    board.check_done()
    assert len(mon.words) == n, f"{len(mon.words) - n} extra result(s) after the last expected one"
    assert not violations, violations[:3]
    model = FpStreamCycleModel(lambda k: expected[k], p["latency"])
    accepts, emits, model_words = replay_closed_loop(model, list(range(n)), gap_log, stall_log, len(stall_log))
    assert model_words[:n] == expected
    assert drv.accepted == accepts[:len(drv.accepted)], "input accept cycles differ from the model"
    assert mon.cycles == emits[:n], "output transfer cycles differ from the model"
    return drv, mon


@cocotb.test()
async def stream_traffic(dut):
    """Special pairs (or random pairs) with random valid gaps and random back-pressure:
    bit-exact in order, nothing extra, handshake protocol, every transfer cycle as modelled."""
    p = params()
    start = time.perf_counter()
    drv, mon = await _run(dut, p, p.get("gap_prob", 0.3), p.get("stall_prob", 0.3), cocotb.RANDOM_SEED)
    Path("stats.json").write_text(json.dumps({
        "results": len(mon.words), "cycles": mon.cycles[-1] - drv.accepted[0] + 1,
        "seconds": time.perf_counter() - start}))


@cocotb.test()
async def full_rate(dut):
    """No gaps, no back-pressure: one pair accepted and one result delivered every cycle, each
    result exactly ``latency`` cycles after its pair (the documented LATENCY and the model)."""
    p = dict(params(), vectors="random", n=512)
    latency = p["latency"]
    drv, mon = await _run(dut, p, 0.0, 0.0, cocotb.RANDOM_SEED + 1)
    n = len(drv.accepted)
    assert drv.accepted == list(range(drv.accepted[0], drv.accepted[0] + n)), "input stalled"
    assert mon.cycles == [c + latency for c in drv.accepted], (
        f"latency is not {latency}: first result {mon.cycles[0] - drv.accepted[0]} cycles after its pair")
    span = mon.cycles[-1] - drv.accepted[0] + 1
    Path("stats.json").write_text(json.dumps({"results": n, "cycles": span, "latency": latency,
                                              "results_per_cycle": n / (mon.cycles[-1] - mon.cycles[0] + 1)}))


@cocotb.test()
async def valid_without_ready(dut):
    """With ``o.ready`` low, the first result still appears ``latency`` cycles after its pair and
    stays offered, unchanged; the pipeline then fills to its capacity of ``latency + 2`` and
    ``i.ready`` drops."""
    p = dict(params(), vectors="random", n=params()["latency"] + 4)
    latency = p["latency"]
    unit, a, b = _operands(p, cocotb.RANDOM_SEED)
    width = UNITS[unit][0]
    expected = [int(y) for y in golden(unit, a, b)]
    await reset(dut)
    dut.o__ready.value = 0
    accepted, offered = [], []
    k = 0
    for cycle in range(20):
        dut.i__valid.value = int(k < len(a))
        if k < len(a):
            dut.i__payload.value = int(a[k]) | (int(b[k]) << width)
        await RisingEdge(dut.clk)
        if int(dut.i__valid.value) and int(dut.i__ready.value):
            accepted.append(cycle)
            k += 1
        offered.append(int(dut.o__payload.value) if int(dut.o__valid.value) else None)
    assert accepted == list(range(latency + 2)), (
        f"expected {latency + 2} pairs accepted back to back, got cycles {accepted}")
    assert offered[:latency] == [None] * latency
    assert offered[latency:] == [expected[0]] * (20 - latency), "o.valid/payload not held while stalled"
    dut.i__valid.value = 0
    dut.o__ready.value = 1
    got = []
    for _ in range(2 * (latency + 2)):
        await RisingEdge(dut.clk)
        if int(dut.o__valid.value):
            got.append(int(dut.o__payload.value))
    assert got == expected[:latency + 2], "the buffered results must drain in order"


# ---- functional coverage (sim.kit.coverage): IEEE class pairs and rounding cases ---------------

FP_CLASSES = ("zero", "subnormal", "normal", "inf", "qnan", "snan")
ROUNDING = ("exact", "down", "up", "tie_down_even", "tie_up_even", "overflow", "underflow_subnormal",
            "underflow_zero", "invalid")


def fp_class(unit, values):
    """IEEE class names of operand bit patterns (fp32, or bf16 for the multiplier)."""
    width = UNITS[unit][0]
    v = np.asarray(values).astype(np.uint64)
    mbits = 23 if width == 32 else 7
    exp = (v >> mbits) & 0xFF
    man = v & ((1 << mbits) - 1)
    quiet = (man >> (mbits - 1)) & 1
    out = np.full(v.shape, "normal", dtype=object)
    out[(exp == 0) & (man == 0)] = "zero"
    out[(exp == 0) & (man != 0)] = "subnormal"
    out[(exp == 0xFF) & (man == 0)] = "inf"
    out[(exp == 0xFF) & (man != 0) & (quiet == 1)] = "qnan"
    out[(exp == 0xFF) & (man != 0) & (quiet == 0)] = "snan"
    return out


def rounding_case(unit, a, b):
    """How each result was rounded: ``exact``; inexact ``down``/``up`` in magnitude (remainder
    below/above half an ulp) or a tie to even (``tie_down_even``/``tie_up_even``); ``overflow``
    (finite operands, infinite result), ``underflow_subnormal``/``underflow_zero`` (inexact,
    result subnormal or zero); ``invalid`` (a NaN from non-NaN operands). NaN operands and
    infinite operands are classed ``exact`` (no rounding)."""
    y = golden(unit, a, b)
    with np.errstate(all="ignore"):
        return _rounding_case(unit, a, b, y)


def _rounding_case(unit, a, b, y):
    if unit == "fp32_add":
        fa = a.view(np.float32).astype(np.float64)
        fb = b.view(np.float32).astype(np.float64)
        with np.errstate(all="ignore"):
            exact = fa + fb                      # exact when the exponents are at most 28 apart
        _, ea = np.frexp(fa)
        _, eb = np.frexp(fb)
        far = (fa != 0) & (fb != 0) & (np.abs(ea - eb) > 28)
    else:
        fa = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        fb = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        with np.errstate(all="ignore"):
            exact = fa * fb                      # 8 x 8-bit significands: exact in float64
        far = np.zeros(len(a), dtype=bool)
    r = y.view(np.float32).astype(np.float64)
    out = np.full(len(a), "exact", dtype=object)
    finite_in = np.isfinite(fa) & np.isfinite(fb)
    with np.errstate(all="ignore"):
        diff = np.abs(exact) - np.abs(r)         # > 0: rounded down in magnitude
        rbits = y.astype(np.int64) & 0x7FFFFFFF
        ulp = np.where((rbits >> 23) == 0, 2.0 ** -149, np.ldexp(1.0, ((rbits >> 23) - 150).astype(int)))
        half = ulp / 2
    inexact = finite_in & np.isfinite(r) & (exact != r)
    down = inexact & (diff > 0)
    tie = inexact & (np.abs(diff) == half)
    out[down] = "down"
    out[inexact & ~down] = "up"
    out[tie & down] = "tie_down_even"
    out[tie & ~down] = "tie_up_even"
    big = far & finite_in                                  # the smaller operand is far below half an ulp
    same_sign = np.signbit(fa) == np.signbit(fb)
    out[big & same_sign] = "down"
    out[big & ~same_sign] = "up"
    sub = inexact & ((rbits >> 23) == 0)
    out[sub & (rbits != 0)] = "underflow_subnormal"
    out[sub & (rbits == 0)] = "underflow_zero"
    out[finite_in & np.isinf(r)] = "overflow"
    nan_in = np.isnan(fa) | np.isnan(fb)
    out[~nan_in & np.isnan(r)] = "invalid"
    return out


def fp_coverage(unit, a, b):
    """Coverage reports of ``unit`` for operand pairs ``(a, b)`` that went through the RTL."""
    from sim.kit.coverage import Coverage

    ca, cb = fp_class(unit, a), fp_class(unit, b)
    pairs = Coverage(f"{unit} IEEE class pairs", {"a": FP_CLASSES, "b": FP_CLASSES})
    keys, counts = np.unique(np.stack([ca, cb]).astype(str), axis=1, return_counts=True)
    for (x, y), n in zip(keys.T, counts, strict=True):
        pairs.hit(int(n), a=x, b=y)

    # Unreachable by arithmetic, not by stimulus: a sum whose result is subnormal is exact (both
    # operands are multiples of the smallest subnormal); a bf16 product has at most 16 significant
    # bits, so it is rounded only when it underflows or overflows.
    never = {"fp32_add": ("underflow_subnormal", "underflow_zero"),
             "bf16_mul": ("down", "up", "tie_down_even", "tie_up_even")}[unit]
    rnd = Coverage(f"{unit} rounding", {"rounding": ROUNDING}, lambda b_: b_["rounding"] not in never,
                   note=f"unreachable: {', '.join(never)}")
    keys, counts = np.unique(rounding_case(unit, a, b).astype(str), return_counts=True)
    for k, n in zip(keys, counts, strict=True):
        rnd.hit(int(n), rounding=k)
    return [pairs.report(), rnd.report()]
