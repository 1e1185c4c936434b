"""The certificate's record (:class:`Certificate`), the relative gap and the helpers every
part shares (the factor of a kernel, the problem's name, the NotApplicable error)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..result import LowRank


@dataclass
class Certificate:
    """A bound on the optimum of a convex problem, from one point.

    Attributes
    ----------
    objective : float
        ``f`` at the certified point (the problem's own objective, in its own sense).
    lower_bound : float
        Minimisation problems: ``f(K*) >= lower_bound`` for the optimum ``K*``.
        Maximisation problems (MVU, RegMVU): ``nan``; the bound is ``upper_bound``.
    gap, relative_gap : float
        How far the point can be from the optimum: ``objective - lower_bound``
        (``upper_bound - objective`` for a maximisation), and the same divided by
        ``max(|objective|, |bound|, 1e-12)`` (:func:`relative`).  Negative only for an
        infeasible point that beats the optimum (see ``violation``).
    violation : float
        The point's largest constraint violation (``problem.violation``); the bound holds
        regardless, but ``objective`` is only attained by a feasible kernel.
    min_eig : float
        Smallest eigenvalue of the minorant's matrix ``H`` over the form (a lower estimate,
        see ``eig_method``); for a divergence, of the dual's ``I + S`` (Burg) or ``nan``.
    inner : float
        ``<H, K>`` at the point.
    trace_bound : float
        The bound ``tau >= tr(K*)`` used (``nan`` when none was needed).
    eig_method : str
        ``"dense"`` or ``"lanczos"``.
    note : str
        How the minorant and the trace bound were obtained.
    """

    objective: float
    lower_bound: float
    gap: float
    relative_gap: float
    min_eig: float
    inner: float
    trace_bound: float
    eig_method: str
    note: str = ""
    sense: str = "min"
    upper_bound: float = math.nan
    violation: float = 0.0

    @property
    def bound(self) -> float:
        """The certified bound on the optimum: lower for ``sense == "min"``, upper for ``"max"``."""
        return self.upper_bound if self.sense == "max" else self.lower_bound

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def relative(gap: float, objective: float, bound: float) -> float:
    """``gap / max(|objective|, |bound|, 1e-12)`` (the finite bound only).

    Dividing by ``|objective|`` alone blows up when the objective is near 0 and is
    meaningless when the objective and the bound have opposite signs.
    """
    den = max(abs(objective), abs(bound) if math.isfinite(bound) else 0.0, 1e-12)
    return gap / den if math.isfinite(gap) else math.inf


def _no_cert(msg: str):
    from ..errors import NotApplicable

    return NotApplicable(msg)


def _no_trace_bound(msg: str):
    from ..errors import NoTraceBound

    return NoTraceBound(msg)


def _name(problem: Any) -> str:
    return type(problem).__name__


def _factor(K: Any, n: int) -> np.ndarray:
    if isinstance(K, LowRank):
        return K.G
    A = np.asarray(K, dtype=float)
    if A.ndim == 2 and A.shape == (n, n) and n > 1 and np.allclose(A, A.T):
        from ..result import psd_factor

        return psd_factor(A)
    if A.ndim not in (1, 2) or A.shape[0] != n or A.size == 0:
        from ..errors import ProblemError

        raise ProblemError(f"certify: K must be a LowRank, an (n, r) factor or an (n, n) PSD "
                           f"matrix with n = {n}; got shape {A.shape}")
    return A.reshape(n, -1)
