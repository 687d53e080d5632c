"""One Verilog module per distinct block: structurally identical modules of a design are merged.

Amaranth writes a module for every instance of a component, so a P x Q wafer holds P x Q copies of
the PE core and every simulator compiles each one. :func:`merge_identical_modules` keeps the first
of each set of modules whose text is the same up to the names Amaranth and Yosys number design-wide
(escaped identifiers holding ``$``: ``\\port$67$0``, ``\\$auto$...$3``), and points every instance of
the others at it. Instance names, and so hierarchical paths, waves and ``$readmemh`` targets, do not
change.

The input is the text of :func:`hdl.verilog.verilog_text` (Yosys ``write_verilog``): modules start
at ``module`` and end at ``endmodule``, each preceded by its ``(* ... *)`` attribute lines; a
submodule instance is ``  <module> <instance> (`` followed by ``    .<port>(<net>)`` lines and
``  );``.
"""

import re

__all__ = ["merge_identical_modules"]

_ESCAPED = r"\\\S+ "
_IDENT = rf"(?:{_ESCAPED}|[A-Za-z_][\w$]*)"
_HEADER = re.compile(rf"^module ({_IDENT}) ?\((.*)\);$", re.S)
_INSTANCE = re.compile(rf"^  ({_IDENT}) ?({_IDENT}) ?\($")
_CONNECTION = re.compile(rf"^    \.({_IDENT}) ?\(")
_DECLARATION = re.compile(r"^  (?:input|output|inout|wire|reg)\b.*;$")
_NUMBERED = re.compile(r"\\\S*\$\S* ")       # escaped names holding a design-wide number


class _Module:
    def __init__(self, attrs, lines):
        self.attrs = attrs
        self.lines = lines
        end = next((i for i, line in enumerate(lines) if line.endswith(");")), 0)
        self.header = end + 1                      # Yosys wraps long port lists
        header = _HEADER.match("\n".join(lines[:self.header]))
        if not header:
            raise ValueError(f"not a Yosys module header: {lines[0][:80]!r}")
        self.name = header.group(1).strip()
        self.ports = [p.strip() for p in header.group(2).split(",")]

    def children(self, names):
        """Names of the modules in ``names`` this one instantiates."""
        found = []
        for line in self.lines:
            inst = _INSTANCE.match(line)
            if inst and inst.group(1).strip() in names:
                found.append(inst.group(1).strip())
        return found

    def retarget(self, kept, port_maps):
        """Point instances of merged modules at the kept ones (``kept[name]``), their connections
        renamed by ``port_maps[name]`` (the merged module's port -> the kept module's)."""
        out, ports = [], None
        for line in self.lines:
            inst = _INSTANCE.match(line)
            if inst and inst.group(1).strip() in kept:
                child = inst.group(1).strip()
                ports = port_maps[child]
                line = f"  {_spell(kept[child])} {_spell(inst.group(2).strip())} ("
            elif ports is not None:
                conn = _CONNECTION.match(line)
                if conn:
                    port = conn.group(1).strip()
                    line = f"    .{_spell(ports.get(port, port))}({line[conn.end():]}"
                else:
                    ports = None
            out.append(line)
        self.lines = out

    def shape(self):
        """``(text, numbering)``: the module's text up to what does not change its meaning (its
        name, the order of its port list, of its declarations and of an instance's connections),
        numbered names replaced in order of first use (``numbering``: name -> replacement)."""
        items, decls, attrs, conns = [], [], [], None
        for line in self.lines[self.header:]:
            if conns is not None:
                if line == "  );":
                    items += sorted(conns) + [line]
                    conns = None
                else:
                    conns.append(line.rstrip(","))
            elif line.startswith("  (*"):
                attrs.append(line)
            elif _DECLARATION.match(line):
                decls.append("\n".join(attrs + [line]))
                attrs = []
            else:
                items += attrs + [line]
                attrs = []
                if _INSTANCE.match(line):
                    conns = []
        numbering = {}

        def rename(text):
            return _NUMBERED.sub(lambda m: numbering.setdefault(m.group(0), f"\\#{len(numbering)} "), text)

        body = rename("\n".join(items))
        return body + "\n" + "\n".join(sorted(rename(d) for d in decls)), numbering

    def text(self):
        return "".join(a + "\n" for a in self.attrs) + "".join(line + "\n" for line in self.lines)


def _spell(name):
    """``name`` as written in Verilog (escaped identifiers end with a space)."""
    return name + " " if name.startswith("\\") else name


def _parse(text):
    """``(preamble, [_Module])``: the lines before the first module's attributes, then every
    module."""
    lines = text.splitlines()
    preamble, modules, attrs, current = [], [], [], None
    for line in lines:
        if current is not None:
            current.append(line)
            if line == "endmodule":
                modules.append(_Module(attrs, current))
                attrs, current = [], None
        elif line.startswith("module "):
            current = [line]
        elif line.startswith("(*"):
            attrs.append(line)
        elif not modules and not attrs:
            preamble.append(line)
        elif line.strip() and not line.startswith("/*"):      # a concatenated file's header
            raise ValueError(f"unexpected line between modules: {line[:80]!r}")
    if current is not None:
        raise ValueError(f"module {current[0][:60]!r} has no endmodule")
    return preamble, modules


def merge_identical_modules(text):
    """``text`` (Yosys-written Verilog) with each set of identical modules written once; see the
    module docstring. The kept module of a set is its first in ``text``."""
    preamble, modules = _parse(text)
    by_name = {m.name: m for m in modules}
    kept, port_maps, shapes, numberings, order, done = {}, {}, {}, {}, [], set()

    def visit(module):
        if module.name in done:
            return
        done.add(module.name)
        for child in module.children(by_name):
            visit(by_name[child])
        module.retarget(kept, port_maps)
        shape, numberings[module.name] = module.shape()
        twin = shapes.setdefault(shape, module)
        if twin is module:
            order.append(module)
        else:
            kept[module.name] = twin.name
            ours, theirs = numberings[module.name], numberings[twin.name]
            spelled = {token: name for name, token in theirs.items()}
            port_maps[module.name] = {p: spelled[ours[p + " "]].strip() for p in module.ports
                                      if p + " " in ours}

    for module in modules:
        visit(module)
    position = {m.name: i for i, m in enumerate(modules)}
    order.sort(key=lambda m: position[m.name])
    return "".join(line + "\n" for line in preamble) + "\n".join(m.text() for m in order)
