"""Run the model (one forward pass for every backend) and judge counting."""

from verify.backends import get_backend
from verify.forward import LayerNormUndefined, explicit, reduced
from verify.judge import CountResult, counts_to

__all__ = ["get_backend", "explicit", "reduced", "counts_to", "CountResult", "LayerNormUndefined"]
