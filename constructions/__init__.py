"""Parameter constructions for every architecture cell, built symbolically and evaluated at any precision."""

from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell, Params

__all__ = ["ATTENTIONS", "NORMS", "READOUTS", "Cell", "Params"]
