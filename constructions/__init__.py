"""Parameter constructions for every architecture cell, built symbolically and evaluated at any precision."""

__version__ = "0.2.0"

from constructions.cell import ATTENTIONS, NORMS, READOUTS, Cell, Params

__all__ = ["__version__", "ATTENTIONS", "NORMS", "READOUTS", "Cell", "Params"]
