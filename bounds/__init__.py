"""Search, bound, fit and report: B_min(L) by certified bisection, rate fits, the sweep command."""

import constructions  # noqa: E402,F401  (first: its start-up signal handling covers the imports)
