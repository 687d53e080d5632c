"""Verilog generator: ``python -m hdl.generate [options] [TOP ...]``.

Writes ``<out>/<top>.v`` (module ``<top>``, ports ``clk``, ``rst`` and Amaranth's
``<port>__payload/__valid/__ready`` naming) for each named top, or every registered top.
Configuration comes from a preset plus ``--set field=value`` overrides (validated).
"""

import argparse
import sys
from pathlib import Path

from .config import PRESETS, ConfigError, preset
from .tops import TOPS, build_top
from .verilog import write_verilog


def _parse_override(text):
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ConfigError(f"--set expects field=value, got {text!r}")
    try:
        return name.strip(), int(value, 0)
    except ValueError:
        raise ConfigError(f"--set {name}: {value!r} is not an integer") from None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m hdl.generate", description=__doc__.splitlines()[0])
    ap.add_argument("tops", nargs="*", metavar="TOP", help=f"tops to write (default all: {', '.join(TOPS)})")
    ap.add_argument("--out", default="build/verilog", help="output folder (default build/verilog)")
    ap.add_argument("--preset", default="default", help=f"configuration preset: {', '.join(PRESETS)}")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override one configuration field (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the tops and exit")
    args = ap.parse_args(argv)

    if args.list:
        for name in TOPS:
            print(name)
        return 0
    unknown = [t for t in args.tops if t not in TOPS]
    if unknown:
        ap.error(f"unknown top(s) {', '.join(unknown)}; known: {', '.join(TOPS)}")
    try:
        cfg = preset(args.preset, **dict(_parse_override(s) for s in args.set))
    except ConfigError as e:
        ap.error(str(e))

    out = Path(args.out)
    for name in args.tops or list(TOPS):
        path = write_verilog(build_top(name, cfg), name, out)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
