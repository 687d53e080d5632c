"""Cycle-level golden model of ``hdl.skid_buffer.SkidBuffer``."""

__all__ = ["SkidBufferModel"]


class SkidBufferModel:
    """Two-slot registered stream stage (output register + skid slot).

    Call :meth:`cycle` once per clock with the input offer and output ready *of that cycle*;
    it returns ``(in_ready, accepted, emitted)`` where ``accepted`` tells whether the input word
    transferred and ``emitted`` is the word that left on the output (``None`` if none).
    """

    def __init__(self):
        self.out = None
        self.skid = None

    @property
    def in_ready(self):
        return self.skid is None

    @property
    def out_valid(self):
        return self.out is not None

    def cycle(self, in_valid, in_payload, out_ready):
        in_ready = self.in_ready
        accepted = bool(in_valid and in_ready)
        emitted = self.out if (self.out is not None and out_ready) else None
        if out_ready or self.out is None:
            if self.skid is not None:
                self.out, self.skid = self.skid, None
            else:
                self.out = in_payload if in_valid else None
        elif accepted:
            self.skid = in_payload
        return in_ready, accepted, emitted
