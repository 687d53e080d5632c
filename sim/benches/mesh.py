"""Plain-Verilog traffic harness for the router and mesh tops (run with ``sim.kit.runner.run_vvp``),
and the checks that compare its log with the golden model (models/fabric.py).

Python is off the per-cycle path: it writes the stimulus as hex files (per-input wavelet lists
tagged with a phase, per-cycle driver gaps and output ``ready`` bitmaps, per-output accept masks,
a program of configuration operations), the harness replays them cycle by cycle and logs every
transfer; Python then checks the log against the model (cycle-exact) and against an independent
scoreboard built by walking the route tables (nothing lost, nothing duplicated, order per
(source, color), every multicast copy delivered).

Program operations (one per line, ``{op[3:0], addr[ADDR_BITS-1:0], data[WORD_BITS-1:0]}`` in hex):
``1`` write ``data`` to ``addr`` (one cycle); ``2`` read ``addr`` (logs ``R addr data``);
``3`` traffic phase ``addr`` until ``data`` output transfers happened, then ``TAIL`` quiet cycles;
``0`` end. A phase in which no transfer (input or output) happens for ``WATCHDOG`` cycles before
its count is reached is a deadlock: the harness reads every router's status registers through
the configuration bus, logs them (``D ...``) and stops.

Log lines: ``I phase cycle input``, ``O phase cycle output payload``, ``R addr data``,
``P phase cycles`` (end of a phase), ``D ...`` (deadlock dump), ``E`` (end). Cycles count from 0
at the start of each phase.
"""

from collections import Counter, defaultdict
from pathlib import Path

from arch.config_bus import ADDR_BITS, WORD_BITS
from arch.layout import BitLayout
from arch.ports import NUM_OUTPUTS, NUM_PORTS, RAMP2, Port, output_name
from arch.router_map import ADDR_ERROR, ADDR_OUT_BLOCKED, ADDR_RAMP2, ADDR_VC_BUSY, route_addr
from arch.tile_map import DEFAULT_TILE_ADDR_BITS, tile_address
from arch.wavelet import WAVELET_BITS, pack_wavelet, unpack_wavelet
from models.fabric import boundary_ports, walk

__all__ = ["FabricPorts", "Program", "harness_text", "run_harness", "parse_log", "Traffic",
           "scoreboard", "random_flows", "random_traffic", "random_timing"]

WATCHDOG = 2000
TAIL = 16
INPUT_WORD = BitLayout("harness input word", ("wavelet", WAVELET_BITS), ("phase", 8))
PROGRAM_WORD = BitLayout("harness program word", ("data", WORD_BITS), ("addr", ADDR_BITS), ("op", 4))


def _bits(layout, name=None):
    """Verilog part select ``[msb:lsb]`` of field ``name`` of ``layout`` (the whole word: None)."""
    if name is None:
        return f"[{layout.width - 1}:0]"
    s = layout.field_slice(name)
    return f"[{s.stop - 1}:{s.start}]"


class FabricPorts:
    """Boundary ports of a top and their Verilog names: ``inputs`` (the boundary ports, each an
    input and an output) and ``ports`` (those and every router's ``RAMP2``, an output only).

    ``mesh=True``: a :class:`~hdl.mesh.Mesh` (arrays ``n_in__<q>``, ``ramp_in__<r>__<q>``);
    otherwise a standalone :class:`~hdl.router.Router` (``n_in``, ``ramp_in``).
    """

    def __init__(self, rows, cols, colors, *, mesh=True, tile_addr_bits=DEFAULT_TILE_ADDR_BITS):
        self.rows, self.cols, self.colors = rows, cols, colors
        self.mesh = mesh
        self.tile_addr_bits = tile_addr_bits
        self.inputs = boundary_ports(rows, cols)
        # In the model's order (router by router, outputs in index order), as the log lists them.
        self.ports = sorted(self.inputs + [(r, q, RAMP2) for r in range(rows) for q in range(cols)],
                            key=lambda p: (p[0], p[1], int(p[2])))
        self.index = {p: i for i, p in enumerate(self.ports)}

    def name(self, port, direction):
        r, q, p = port
        base = output_name(p)
        if not self.mesh:
            return f"{base}_{direction}"
        if p in (Port.RAMP, RAMP2):
            return f"{base}_{direction}__{r}__{q}"
        return f"{base}_{direction}__{q if p in (Port.N, Port.S) else r}"

    def accept_name(self, port):
        return self.name(port, "accept")

    def addr(self, r, q, local):
        if not self.mesh:
            return local
        return tile_address(self.cols, r, q, local, self.tile_addr_bits)


class Program:
    """Configuration operations and traffic phases for one harness run."""

    def __init__(self, ports):
        self.ports = ports
        self.ops = []
        self.phases = 0

    def write(self, addr, data):
        self.ops.append((1, addr, data))

    def read(self, addr):
        self.ops.append((2, addr, 0))

    def write_routes(self, routes):
        """Write every non-zero entry of ``routes[(r, q)][color][port]``."""
        for (r, q), table in sorted(routes.items()):
            for c, masks in enumerate(table):
                for p, mask in enumerate(masks):
                    if mask:
                        self.write(self.ports.addr(r, q, route_addr(c, p)), mask)

    def phase(self, expected_outputs):
        self.ops.append((3, self.phases, expected_outputs))
        self.phases += 1
        return self.phases - 1


class Traffic:
    """Stimulus of all phases: wavelets per input per phase, gap/ready bitmaps, accept masks."""

    def __init__(self, ports, cycles):
        self.ports = ports
        self.cycles = cycles
        self.inputs = defaultdict(list)          # port -> [(phase, (data, color, ctrl))]
        self.gap = {}                            # port -> list of bool per cycle
        self.stall = {}                          # port -> list of bool per cycle (ready low)
        self.accept = {}                         # port -> mask

    def add(self, phase, port, words):
        self.inputs[port].extend((phase, w) for w in words)

    def phase_inputs(self, phase):
        out = {}
        for port, items in self.inputs.items():
            ws = [w for ph, w in items if ph == phase]
            if ws:
                out[port] = ws
        return out

    def gaps_fn(self):
        return {p: (lambda t, g=g: g[t] if t < len(g) else False) for p, g in self.gap.items()}

    def ready_fn(self):
        return {p: (lambda t, s=s: not s[t] if t < len(s) else True) for p, s in self.stall.items()}


def fabric_verilog(name, cfg):
    """Path of the Verilog of fabric top ``name`` (``router``, ``mesh4x4`` from the registry, or
    ``mesh``: ``Mesh(cfg)`` at ``cfg``'s size), generated once per (sources, config) and shared by
    every bench (:func:`sim.kit.runner.config_verilog`)."""
    from hdl.mesh import Mesh
    from hdl.tops import build_top
    from sim.kit.runner import config_verilog
    return config_verilog(name, cfg, lambda cfg: Mesh(cfg) if name == "mesh" else build_top(name, cfg))


WORDS_MAX = 1 << 18
CYCLES_MAX = 1 << 16
PROG_MAX = 1 << 14


def harness_text(top, ports):
    """Verilog of the harness module ``fabric_tb`` driving module ``top`` with ``ports``.

    Synchronous, so Icarus and Verilator give the same log byte for byte: one ``always @(posedge
    clk)`` runs the program as a state machine; it drives the top's inputs with non-blocking
    assignments and reads its outputs at the edge (their values in the cycle that ends, ``ready``
    after the payload settled), never after a delay. An operation's first cycle follows the edge
    that ended the previous one; a read presents its address for one cycle and logs the data in
    the next (``rdata`` is registered). Data files are read from the folder given with
    ``+data=<dir>``."""
    P = ports.ports
    n = len(P)
    C = ports.colors
    wavelet, phase = _bits(INPUT_WORD, "wavelet"), _bits(INPUT_WORD, "phase")
    op_op, op_addr, op_data = (_bits(PROGRAM_WORD, f) for f in ("op", "addr", "data"))
    dumps = []                     # (address, log format, argument) of the deadlock dump's reads
    for r in range(ports.rows):
        for q in range(ports.cols):
            for o in range(NUM_OUTPUTS):
                labels = ((ADDR_VC_BUSY, "vc_busy"), (ADDR_OUT_BLOCKED, "out_blocked")) if o < NUM_PORTS \
                    else ((ADDR_OUT_BLOCKED, "out_blocked"),)
                for base, label in labels:
                    dumps.append((ports.addr(r, q, base + o),
                                  f"D router {r} {q} {label} port {output_name(o)} colors %b", f"cfg_rdata[{C - 1}:0]"))
            dumps.append((ports.addr(r, q, ADDR_ERROR), f"D router {r} {q} error_status %h", "cfg_rdata"))
    L = [
        "`timescale 1ns/1ps",
        "module fabric_tb;",
        "  localparam BOOT = 0, RUN = 1, PHASE = 2, READ = 3, READ_DATA = 4, DUMP = 5, DUMP_DATA = 6, DONE = 7;",
        "  reg clk = 0; reg rst = 1;",
        f"  reg [{ADDR_BITS - 1}:0] cfg_addr = 0; reg [{WORD_BITS - 1}:0] cfg_wdata = 0; reg cfg_we = 0;",
        f"  wire [{WORD_BITS - 1}:0] cfg_rdata; wire error;",
        f"  reg [{n - 1}:0] in_valid = 0; wire [{n - 1}:0] in_ready;",
        f"  reg [{n - 1}:0] took, xfer, more, cand, held, shadow;   // shadow: in_valid after this edge",
        f"  reg {wavelet} in_payload [0:{n - 1}];",
        f"  wire [{n - 1}:0] out_valid; reg [{n - 1}:0] out_ready = 0;",
        f"  wire {wavelet} out_payload [0:{n - 1}];",
        f"  reg [{C - 1}:0] accept [0:{n - 1}];",
        f"  reg {_bits(INPUT_WORD)} words [0:{WORDS_MAX - 1}];   // {{phase[{INPUT_WORD.field_width('phase') - 1}:0], "
        f"wavelet{wavelet}}}",
        f"  reg [31:0] first [0:{n - 1}]; reg [31:0] count [0:{n - 1}]; reg [31:0] ptr [0:{n - 1}];",
        f"  reg [{n - 1}:0] gaps [0:{CYCLES_MAX - 1}]; reg [{n - 1}:0] stalls [0:{CYCLES_MAX - 1}];",
        f"  reg {_bits(PROGRAM_WORD)} prog [0:{PROG_MAX - 1}];",
        "  reg [8*512-1:0] dir, fname;",
        f"  integer i, pc, phase, cyc, got, quiet, f, want, state, boot, dump_i; reg {_bits(PROGRAM_WORD)} op;",
        "  always #5 clk = ~clk;",
        f"  {top} dut (.clk(clk), .rst(rst), .cfg__addr(cfg_addr), .cfg__wdata(cfg_wdata),",
        "    .cfg__we(cfg_we), .cfg__rdata(cfg_rdata), .error(error)",
    ]
    for i, p in enumerate(P):
        a, b = ports.name(p, "in"), ports.name(p, "out")
        if p[2] != RAMP2:
            L.append(f"    , .{a}__valid(in_valid[{i}]), .{a}__ready(in_ready[{i}]), "
                     f".{a}__payload(in_payload[{i}])")
        L.append(f"    , .{b}__valid(out_valid[{i}]), .{b}__ready(out_ready[{i}]), "
                 f".{b}__payload(out_payload[{i}]), .{ports.accept_name(p)}(accept[{i}])")
    L.append("  );")
    L += [f"  assign in_ready[{i}] = 0;   // {ports.name(p, 'out')}: an output only"
          for i, p in enumerate(P) if p[2] == RAMP2]
    L += [
        "  // Drives for cycle cyc of the phase: new wavelets where an input is free and not gapped.",
        "  task offer; begin",
        f"    cand = more & ~held & ~(cyc < {CYCLES_MAX} ? gaps[cyc] : {n}'d0);",
        f"    for (i = 0; i < {n}; i = i + 1) if (cand[i]) in_payload[i] <= words[ptr[i]]{wavelet};",
        "    in_valid <= held | cand; shadow = held | cand;",
        f"    out_ready <= cyc < {CYCLES_MAX} ? ~stalls[cyc] : ~{n}'d0;",
        "  end endtask",
        "  // Start operation prog[pc]: its drives hold in the cycle after this edge.",
        "  task issue; begin",
        "    op = prog[pc]; cfg_we <= 0;",
        f"    if (op{op_op} == 0) begin $fwrite(f, \"E\\n\"); $fclose(f); state = DONE; $finish; end",
        f"    else if (op{op_op} == 1) begin",
        f"      cfg_addr <= op{op_addr}; cfg_wdata <= op{op_data}; cfg_we <= 1; pc = pc + 1; state = RUN; end",
        f"    else if (op{op_op} == 2) begin cfg_addr <= op{op_addr}; state = READ; end",
        f"    else if (op{op_op} == 3) begin",
        f"      phase = op{op_addr}; want = op{op_data}; got = 0; quiet = 0; cyc = 0; held = shadow;",
        f"      for (i = 0; i < {n}; i = i + 1)",
        f"        more[i] = ptr[i] < first[i] + count[i] && words[ptr[i]]{phase} == phase;",
        "      offer; state = PHASE; end",
        "  end endtask",
        "  task dump_addr; begin",
        "    case (dump_i)",
    ]
    for k, (addr, _, _) in enumerate(dumps):
        L.append(f"      {k}: cfg_addr <= {addr};")
    L += [
        "    endcase",
        "  end endtask",
        "  task dump_data; begin",
        "    case (dump_i)",
    ]
    for k, (_, fmt, arg) in enumerate(dumps):
        L.append(f"      {k}: if (cfg_rdata != 0) $fwrite(f, \"{fmt}\\n\", {arg});")
    L += [
        "    endcase",
        "  end endtask",
        "  initial begin",
        "    if (!$value$plusargs(\"data=%s\", dir)) dir = \".\";",
        "    $sformat(fname, \"%0s/fabric.log\", dir); f = $fopen(fname, \"w\");",
    ]
    for arr, fn in (("words", "words"), ("prog", "prog"), ("gaps", "gaps"), ("stalls", "stalls"),
                    ("first", "first"), ("count", "count"), ("accept", "accept")):
        L.append(f"    $sformat(fname, \"%0s/{fn}.hex\", dir); $readmemh(fname, {arr});")
    L += [
        f"    for (i = 0; i < {n}; i = i + 1) ptr[i] = first[i];",
        "    pc = 0; state = BOOT; boot = 0; shadow = 0;",
        "  end",
        "  always @(posedge clk) begin",
        "    case (state)",
        "      BOOT: begin",
        f"        for (i = 0; i < {n}; i = i + 1) in_payload[i] <= 0;",
        "        boot = boot + 1;",
        "        if (boot == 2) begin rst <= 0; issue; end",
        "      end",
        "      RUN: issue;",
        "      READ: state = READ_DATA;",
        "      READ_DATA: begin",
        f"        $fwrite(f, \"R %0d %0d %0d\\n\", op{op_addr}, cfg_rdata, error);",
        "        pc = pc + 1; issue; end",
        "      PHASE: begin",
        "        took = in_valid & in_ready; xfer = out_valid & out_ready;",
        f"        for (i = 0; i < {n}; i = i + 1) begin",
        "          if (took[i]) begin",
        "            $fwrite(f, \"I %0d %0d %0d\\n\", phase, cyc, i); ptr[i] = ptr[i] + 1;",
        f"            more[i] = ptr[i] < first[i] + count[i] && words[ptr[i]]{phase} == phase; end",
        "          if (xfer[i]) begin",
        "            $fwrite(f, \"O %0d %0d %0d %h\\n\", phase, cyc, i, out_payload[i]);",
        "            got = got + 1; end",
        "        end",
        "        held = in_valid & ~took;",
        "        if ((took | xfer) != 0) quiet = 0; else quiet = quiet + 1;",
        "        cyc = cyc + 1;",
        f"        if ((got < want || quiet < {TAIL}) && quiet < {WATCHDOG}) offer;",
        "        else begin",
        "          $fwrite(f, \"P %0d %0d\\n\", phase, cyc);",
        "          in_valid <= held; shadow = held; out_ready <= 0;",
        "          if (got < want) begin",
        "            $fwrite(f, \"D deadlock phase %0d cycle %0d delivered %0d of %0d\\n\", phase, cyc, got, want);",
        "            in_valid <= 0; shadow = 0; dump_i = 0; dump_addr; state = DUMP;",
    ]
    for i, p in enumerate(P):
        L.append(f"            if (ptr[{i}] < first[{i}] + count[{i}]) $fwrite(f, "
                 f"\"D input {ports.name(p, 'in')} sent %0d of %0d\\n\", ptr[{i}] - first[{i}], "
                 f"count[{i}]);")
        L.append(f"            if (out_valid[{i}]) $fwrite(f, \"D output {ports.name(p, 'out')} "
                 f"holds %h\\n\", out_payload[{i}]);")
    L += [
        "          end",
        "          else begin pc = pc + 1; issue; end",
        "        end",
        "      end",
        "      DUMP: state = DUMP_DATA;",
        "      DUMP_DATA: begin",
        "        dump_data; dump_i = dump_i + 1;",
        f"        if (dump_i < {len(dumps)}) begin dump_addr; state = DUMP; end",
        "        else begin $fwrite(f, \"E\\n\"); $fclose(f); state = DONE; $finish; end",
        "      end",
        "      default: ;",
        "    endcase",
        "  end",
        "endmodule",
    ]
    return "\n".join(L) + "\n"


def _write_hex(path, values, width):
    digits = (width + 3) // 4
    Path(path).write_text("".join(f"{v:0{digits}x}\n" for v in values))


def run_harness(top_verilog, top, ports, program, traffic, data_dir, *, timeout=600, simulator=None):
    """Write the stimulus into ``data_dir``, run the harness on ``top_verilog`` (module ``top``)
    under ``simulator`` (``icarus``, ``verilator``; default :func:`fabric_simulator`) and return
    the parsed log (:func:`parse_log`, with ``cpu_seconds`` and ``cycles`` of the run)."""
    from sim.kit.testbench import Testbench
    data_dir = Path(data_dir).resolve()     # vvp runs in the Verilog's folder
    data_dir.mkdir(parents=True, exist_ok=True)
    P = ports.ports
    n = len(P)
    words, first, count = [], [], []
    for p in P:
        items = traffic.inputs.get(p, [])
        first.append(len(words))
        count.append(len(items))
        words += [INPUT_WORD.pack(phase=ph, wavelet=pack_wavelet(*w)) for ph, w in items]
    if len(words) > WORDS_MAX or traffic.cycles > CYCLES_MAX or len(program.ops) >= PROG_MAX:
        raise ValueError("stimulus larger than the harness memories")
    _write_hex(data_dir / "words.hex", words or [0], INPUT_WORD.width)
    _write_hex(data_dir / "first.hex", first, 32)
    _write_hex(data_dir / "count.hex", count, 32)
    gaps, stalls = [], []
    for t in range(traffic.cycles):
        g = s = 0
        for i, p in enumerate(P):
            if p in traffic.gap and traffic.gap[p][t]:
                g |= 1 << i
            if p in traffic.stall and traffic.stall[p][t]:
                s |= 1 << i
        gaps.append(g)
        stalls.append(s)
    _write_hex(data_dir / "gaps.hex", gaps or [0], n)
    _write_hex(data_dir / "stalls.hex", stalls or [0], n)
    full = (1 << ports.colors) - 1
    _write_hex(data_dir / "accept.hex", [traffic.accept.get(p, full) for p in P], ports.colors)
    _write_hex(data_dir / "prog.hex", [PROGRAM_WORD.pack(op=op, addr=a, data=d) for op, a, d in program.ops] + [0],
               PROGRAM_WORD.width)
    top_verilog = Path(top_verilog)
    harness = top_verilog.parent / f"fabric_tb_{top}.v"
    text = harness_text(top, ports)
    if not harness.exists() or harness.read_text() != text:
        harness.write_text(text)
    tb = Testbench([top_verilog, harness], "fabric_tb", simulator=simulator or fabric_simulator())
    run = tb.run([f"+data={data_dir}"], cwd=data_dir, timeout=timeout)
    log = parse_log(data_dir / "fabric.log", ports)
    log.simulator, log.cpu_seconds = tb.simulator, run.cpu_seconds
    return log


def fabric_simulator():
    """The fabric benches' simulator: ``WS_FABRIC_SIM`` (``icarus`` or ``verilator``), else Icarus
    when installed (no build to wait for; each fabric configuration would be a Verilator build of
    its own), else Verilator."""
    import os

    from sim.kit.testbench import harness_simulator
    return harness_simulator(os.environ.get("WS_FABRIC_SIM"))


class Log:
    """Parsed harness log."""

    def __init__(self):
        self.accepted = defaultdict(lambda: defaultdict(list))   # phase -> port -> [cycle]
        self.delivered = defaultdict(list)    # phase -> [(cycle, port, (data, color, ctrl))]
        self.reads = []                       # [(addr, data, error pin)]
        self.phase_cycles = {}
        self.dump = []
        self.ended = False
        self.simulator, self.cpu_seconds = None, 0.0

    @property
    def cycles(self):
        """Cycles of every traffic phase (configuration operations not counted)."""
        return sum(self.phase_cycles.values())

    @property
    def deadlocked(self):
        return bool(self.dump)


def parse_log(path, ports):
    log = Log()
    P = ports.ports
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "I":
            log.accepted[int(f[1])][P[int(f[3])]].append(int(f[2]))
        elif f[0] == "O":
            log.delivered[int(f[1])].append((int(f[2]), P[int(f[3])], unpack_wavelet(int(f[4], 16))))
        elif f[0] == "R":
            log.reads.append((int(f[1]), int(f[2]), int(f[3])))
        elif f[0] == "P":
            log.phase_cycles[int(f[1])] = int(f[2])
        elif f[0] == "D":
            log.dump.append(line[2:])
        elif f[0] == "E":
            log.ended = True
    if not log.ended:
        raise AssertionError(f"harness log {path} is truncated (simulator crashed?)")
    return log


def scoreboard(routes, rows, cols, inputs, delivered, ramp2=None):
    """Independent check of one phase (no timing): every wavelet of ``inputs`` (``{port:
    [(data, color, ctrl)]}``) reaches exactly the boundary outputs the route tables (and the
    RAMP2 registers ``ramp2``) lead to, once each, in order per (source, color) at every output,
    and nothing else arrives. Returns the number of copies checked; raises ``AssertionError``
    with the first problem."""
    expected = defaultdict(list)   # (out port, src, color) -> [word]
    for src, words in inputs.items():
        dests = {}                 # color -> where the tables lead (the same for every wavelet)
        for w in words:
            if w[1] not in dests:
                dests[w[1]] = walk(routes, rows, cols, *src, w[1], ramp2=ramp2)
            for dst in dests[w[1]]:
                expected[(dst, src, w[1])].append(w)
    # Sources are identified by the data field (the benches put a source id in the top bits).
    got = defaultdict(list)
    for _, port, w in delivered:
        got[(port, w[0] >> 24, w[1])].append(w)
    exp_by_id = {}
    for (dst, _src, color), ws in expected.items():
        sid = ws[0][0] >> 24
        exp_by_id[(dst, sid, color)] = ws
    for key, ws in exp_by_id.items():
        have = got.get(key, [])
        if have != ws:
            lost = [w for w in ws if w not in have]
            extra = [w for w in have if w not in ws]
            raise AssertionError(
                f"output {key[0]} source id {key[1]} color {key[2]}: expected {len(ws)} "
                f"wavelets, got {len(have)}; lost {lost[:3]}, unexpected {extra[:3]}"
                + ("; order differs" if not lost and not extra else ""))
    unexpected = set(got) - set(exp_by_id)
    if unexpected:
        key = sorted(unexpected)[0]
        raise AssertionError(f"wavelets arrived where no route leads: {key}: {got[key][:3]}")
    return sum(len(ws) for ws in exp_by_id.values())


def random_flows(rng, rows, cols, colors, *, max_sources=3, max_dests=4):
    """Random flows ``[(color, src, [dsts])]`` (every color used; unicast and multicast), routed
    X then Y; returns ``(flows, routes)``. Sources and destinations are boundary ports."""
    from models.fabric import xy_routes
    ports = boundary_ports(rows, cols)
    while True:
        flows = []
        for c in range(colors):
            for src in rng.sample(ports, rng.randint(1, min(max_sources, len(ports)))):
                ndst = 1 if rng.random() < 0.5 else rng.randint(2, min(max_dests, len(ports)))
                flows.append((c, src, rng.sample(ports, ndst)))
        routes = xy_routes(rows, cols, colors, flows)
        try:
            for c, src, _ in flows:
                walk(routes, rows, cols, *src, c)
        except ValueError:
            continue
        return flows, routes


def random_traffic(rng, ports, flows, phase, words_per_source, traffic, *, sid_base=0):
    """Add random wavelets of ``flows`` to ``traffic`` for ``phase``: each source sends
    ``words_per_source`` wavelets on a random mix of its colors; data = ``sid << 24 | seq``.
    Returns ``{src: [wavelets]}``."""
    colors_of = defaultdict(set)
    for c, src, _ in flows:
        colors_of[src].add(c)
    sent = {}
    for k, src in enumerate(sorted(colors_of)):
        sid = sid_base + k
        cs = sorted(colors_of[src])
        ws = [((sid << 24) | i, rng.choice(cs), rng.getrandbits(1)) for i in range(words_per_source)]
        traffic.add(phase, src, ws)
        sent[src] = ws
    return sent


def random_timing(rng, ports, traffic, *, max_gap=0.7, max_stall=0.5):
    """Random per-port injection rates and per-output back-pressure, on every boundary port."""
    for p in ports.ports:
        g, s = rng.uniform(0, max_gap), rng.uniform(0, max_stall)
        traffic.gap[p] = [rng.random() < g for _ in range(traffic.cycles)]
        traffic.stall[p] = [rng.random() < s for _ in range(traffic.cycles)]


class Scenario:
    """A harness run and its model run built side by side: route writes and traffic phases go
    to both, :meth:`run` executes the harness and checks every phase against the model
    (cycle-exact: input accept cycles and output transfers) and the scoreboard."""

    def __init__(self, name, cfg, rows, cols, cycles, *, mesh=True):
        self.name, self.cfg = name, cfg
        self.rows, self.cols = rows, cols
        self.ports = FabricPorts(rows, cols, cfg.num_colors, mesh=mesh)
        self.program = Program(self.ports)
        self.traffic = Traffic(self.ports, cycles)
        self.routes = {(r, q): [[0] * NUM_PORTS for _ in range(cfg.num_colors)]
                       for r in range(rows) for q in range(cols)}
        self.ramp2 = {key: 0 for key in self.routes}
        self.steps = []        # ("routes", [...]) / ("ramp2", {...}) / ("phase", phase, inputs, copies, stuck_ok)

    def set_routes(self, routes):
        """Write the entries that differ from the current tables (fabric idle)."""
        changes = []
        for key, table in routes.items():
            for c, masks in enumerate(table):
                for p, mask in enumerate(masks):
                    if self.routes[key][c][p] != mask:
                        changes.append((key, c, p, mask))
                        self.routes[key][c][p] = mask
                        self.program.write(self.ports.addr(*key, route_addr(c, p)), mask)
        self.steps.append(("routes", changes))

    def set_ramp2(self, masks):
        """Write the RAMP2 register (colors of the RAMP's second channel) of routers ``{(r, q):
        mask}`` (fabric idle)."""
        for key, mask in masks.items():
            self.ramp2[key] = mask
            self.program.write(self.ports.addr(*key, ADDR_RAMP2), mask)
        self.steps.append(("ramp2", dict(masks)))

    def phase(self, inputs, *, copies=None, stuck_ok=False):
        """Add a traffic phase; ``copies`` (default: every copy the tables lead to) is the
        number of output transfers that ends it."""
        if copies is None:
            copies = sum(len(walk(self.routes, self.rows, self.cols, *src, color, ramp2=self.ramp2)) * n
                         for src, ws in inputs.items()
                         for color, n in Counter(w[1] for w in ws).items())
        ph = self.program.phase(copies)
        for src, ws in inputs.items():
            self.traffic.add(ph, src, ws)
        self.steps.append(("phase", ph, {k: list(v) for k, v in inputs.items()}, copies, stuck_ok))
        return ph

    def run(self, data_dir, *, top=None, check_model=True, simulator=None):
        from models.fabric import FabricModel
        top = top or self.name
        import time
        verilog = fabric_verilog(top, self.cfg)
        start = time.perf_counter()
        log = run_harness(verilog, top, self.ports, self.program, self.traffic, data_dir,
                          simulator=simulator)
        self.harness_seconds = time.perf_counter() - start
        self.log = log
        if log.deadlocked:
            return log
        model = FabricModel(self.rows, self.cols, self.cfg.num_colors, self.cfg.vc_depth)
        self.model = model
        self.model_results = {}
        for step in self.steps:
            if step[0] == "routes":
                for (r, q), c, p, mask in step[1]:
                    assert model.write_route(r, q, c, p, mask) == 0, "model refused a route"
                continue
            if step[0] == "ramp2":
                for (r, q), mask in step[1].items():
                    model.write_ramp2(r, q, mask)
                continue
            _, ph, inputs, copies, stuck_ok = step
            if not stuck_ok:
                scoreboard(model.routes, self.rows, self.cols, inputs, log.delivered[ph],
                           ramp2=model.ramp2)
            if not check_model:
                continue
            model.cycle = 0
            acc, dl = model.run(inputs, gaps=self.traffic.gaps_fn(), ready=self.traffic.ready_fn(),
                                accept=self.traffic.accept, stuck_ok=stuck_ok,
                                stall_limit=WATCHDOG)
            self.model_results[ph] = (acc, dl)
            limit = log.phase_cycles[ph]
            dl = [x for x in dl if x[0] < limit]
            acc = {p: [t for t in ts if t < limit] for p, ts in acc.items()}
            acc = {p: ts for p, ts in acc.items() if ts}
            assert dict(log.accepted[ph]) == acc, f"phase {ph}: input accept cycles differ from the model"
            if log.delivered[ph] != dl:
                for a, b in zip(log.delivered[ph], dl):
                    if a != b:
                        raise AssertionError(f"phase {ph}: first output difference: RTL {a}, model {b}")
                raise AssertionError(f"phase {ph}: RTL delivered {len(log.delivered[ph])}, "
                                     f"model {len(dl)}")
        return log
