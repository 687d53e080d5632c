"""Replay files: a program that showed differences, written (:func:`write_replay`) to be run again on the
RTL (:func:`replay`, ``python -m bench.pe_fuzz --replay FILE``); :func:`describe` lists a program.

A replay file is JSON ``{"format": REPLAY_FORMAT, "diffs": [...], "program": {...}}``; the model's
expectations are recomputed when it runs.
"""

import json
from pathlib import Path

from arch.pe_map import DESC_STRIDE, DESC_WORDS, STATUS, Op, VecMode, decode, status_base
from sim.pe_fuzz.comparison import compare
from sim.pe_fuzz.configs import config_name, make_config
from sim.pe_fuzz.model import expect, validate
from sim.pe_fuzz.rtl import WORK, run_rtl

REPLAY_FORMAT = "weightstream pe_fuzz replay 1"


def write_replay(prog, diffs, path=None):
    """Write ``prog`` and the differences it showed to ``path`` (default
    ``build/pe_fuzz/replays/<config>-<seed>.json``); returns ``(path, the command that replays it)``."""
    if path is None:
        path = WORK / "replays" / f"{config_name(prog['config'])}-{prog['seed']}.json"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": REPLAY_FORMAT, "diffs": list(diffs), "program": prog}, indent=1))
    return path, f"python -m bench.pe_fuzz --replay {path}"


def read_replay(path):
    """The program of replay file ``path``; ``ValueError`` if it is not one."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != REPLAY_FORMAT:
        raise ValueError(f"{path}: not a pe_fuzz replay file ({REPLAY_FORMAT!r})")
    return data["program"]


def replay(path):
    """Run the program of replay file ``path`` on the RTL; ``(program, differences)`` (``invalid: ...``
    ones, without a run, for a program that is not valid)."""
    prog = read_replay(path)
    exp = expect(prog)
    problems = validate(prog)
    if problems:
        return prog, [f"invalid: {p}" for p in problems]
    res = run_rtl([prog], [exp], name="replay")[0]
    return prog, compare(prog, exp, res)[0]


def describe(prog):
    """A program as text: per step its writes (descriptor commits decoded), wavelets and reads."""
    cfg = make_config(prog["config"])
    S, base = cfg.sram_words, status_base(cfg.sram_words, cfg.num_tasks)
    names = {base + v: k for k, v in STATUS.items()}
    lines = [f"config {config_name(prog['config'])} ({prog['config']}), seed {prog['seed']}, {prog['kind']}"
             f"{', timed' if prog.get('timed') else ''}, gap {prog['gap']} gap2 {prog['gap2']} stall {prog['stall']}"]
    for s, step in enumerate(prog["steps"]):
        lines.append(f"step {s}:")
        pending = {}
        for a, w in step["writes"]:
            if a < S:
                lines.append(f"  write SRAM[{a}] = {w:#010x}")
            elif a < base:
                t, k = divmod(a - S, DESC_STRIDE)
                pending.setdefault(t, [0] * DESC_WORDS)
                if k < DESC_WORDS:
                    pending[t][k] = w
                if k == 0:
                    full = decode(pending.pop(t))
                    f = {n: v for n, v in full.items() if v or (n == "next" and full["chain"])}
                    if "op" in f:
                        f["op"] = Op(f["op"]).name
                    if f.get("op") == "VEC":
                        f["vmode"] = VecMode(f.get("vmode", 0)).name
                    lines.append(f"  commit descriptor {t}: {f}")
                else:
                    lines.append(f"  write descriptor {t} word {k} = {w:#010x}")
            else:
                lines.append(f"  write {names.get(a, hex(a))} = {w:#x}")
        for key in ("wavelets", "wavelets2"):
            if step[key]:
                ws = ", ".join(f"({c}, {d:#010x}{', ctrl' if x and x[0] else ''})" for c, d, *x in step[key])
                lines.append(f"  {'rx' if key == 'wavelets' else 'rx2'}: {ws}")
        if step["reads"]:
            lines.append("  read " + ", ".join(names.get(a, str(a)) if a >= S else f"SRAM[{a}]" for a in step["reads"]))
    return "\n".join(lines)
