"""Search, bound, fit and report: B_min(L) by certified bisection, rate fits, the sweep command."""
