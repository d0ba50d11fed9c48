"""Run the model (one forward pass for every backend) and judge counting."""

from verify.backends import get_backend
from verify.forward import LayerNormUndefined, NormUndefined, explicit, reduced
from verify.judge import MAX_COUNTS, CountResult, check_cost, counts_to

__all__ = ["get_backend", "explicit", "reduced", "counts_to", "check_cost", "MAX_COUNTS", "CountResult",
           "NormUndefined", "LayerNormUndefined"]
