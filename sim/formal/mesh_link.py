"""Formal top of the mesh links (docs/verification.md#formal): the two routers of a 1 x 2
:class:`~hdl.mesh.Mesh`, joined by the mesh's own wiring (a :class:`~hdl.router.CreditLink` each
way), its boundary ports and configuration bus the top's ports (free inputs; boundary inputs hold
their words until taken).

Per direction (sender ``A``, receiver ``B``) and color ``c``: a wavelet that leaves ``A`` on the
link is in ``B``'s channel of its color from the next cycle until ``B`` pops it and returns its
credit: the words sent and not yet credited back equal that channel's count, so none is lost or
duplicated on the way; ``A`` sends only while the channel has room, so a receiver that
back-pressures (its outputs stalled, its channels full) drops nothing; credits are conserved:
``A``'s credits + the channel's count = ``vc_depth`` (the link is wires, nothing is in flight).
Order within a color is the channel's (a FIFO, written in the cycle the word is sent). Both
routers' own properties hold too, each link input's rules (a sender with a credit, a credit only
for a word sent) asserted of the other router instead of assumed.
"""

from amaranth import Module, Shape
from amaranth.lib import wiring

from hdl.formal import Properties, active
from hdl.mesh import Mesh

__all__ = ["MeshLink"]


class MeshLink(wiring.Component):
    """``Mesh(cfg)`` with ``mesh_rows = 1``, ``mesh_cols = 2`` and the mesh's ports."""

    def __init__(self, cfg):
        self._cfg = cfg.replace(mesh_rows=1, mesh_cols=2)
        self.mesh = Mesh(self._cfg)
        super().__init__(self.mesh.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mesh = self.mesh
        inner = dict((path, value) for path, _, value in self.mesh.signature.flatten(self.mesh))
        for path, member, value in self.signature.flatten(self):
            if member.flow == wiring.In:
                m.d.comb += inner[path].eq(value)
            else:
                m.d.comb += value.eq(inner[path])
        if active(platform):
            self._formal(m, platform)
        return m

    def _formal(self, m, platform):
        """Boundary inputs held (assumed); per link and color: words sent and not credited back =
        the receiving channel's count, the sender's credits + that count = ``vc_depth``, a word
        sent only into a channel with room."""
        f = Properties(m, platform, self)
        C, D = self._cfg.num_colors, self._cfg.vc_depth
        cw = Shape.cast(range(D + 1)).width
        for side, n in (("n", 2), ("s", 2), ("w", 1), ("e", 1)):
            for k in range(n):
                f.input_stream(getattr(self, f"{side}_in")[k], f"{side}{k}_in")
        for q in range(2):
            f.input_stream(self.ramp_in[0][q], f"ramp{q}_in")
        west, east = self.mesh.routers[0]
        sending = []
        for name, a, b, a_port, b_port in (("we", west, east, "e", "w"), ("ew", east, west, "w", "e")):
            out = getattr(a, f"{a_port}_out")
            for c in range(C):
                sent = out.valid & (out.payload.color == c)
                back = out.credit[c]
                credit = platform.probe(a, f"{a_port}_out_credit{c}", cw)
                count = platform.probe(b, f"{b_port}_in_count{c}", cw)
                away = f.counter(f"{name}_away{c}", 8, sent, back)     # sent, not yet credited
                f.check(f"{name}_sent_words_in_channel{c}", away == count)
                f.check(f"{name}_credits_conserved{c}", credit + count == D)
                f.check(f"{name}_sent_with_room{c}", ~sent | (count < D))
                if c == 0:
                    f.cover(f"{name}_color0_out_of_credit_while_another_is_sent",
                            (credit == 0) & out.valid & (out.payload.color != 0))
            f.cover(f"{name}_send_as_credit_returns", out.valid & out.credit.any())
            sending.append(out.valid)
        f.cover("both_ways_at_once", sending[0] & sending[1])
