"""The public entry points: :func:`applies`, :func:`certify`, :func:`duals_cover`,
:func:`mvu_multipliers` and :func:`escape` (with :class:`Escape`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Certificate, _factor, _name, _no_cert
from .eigen import DENSE_BELOW, reuse_vectors
from .view import LAGRANGIAN_ONLY, MULTIPLIER_FIT, Minimisation, _constraint_op, minimisation
from .point import _Point
from .fit import _fit, _from_duals
from .shift import _diagonal_shift
from .lagrangian import _certify_lagrangian, _lagrangian, _remember
from .divergence import _certify_divergence


def applies(problem: Any) -> str | None:
    """``None`` when :func:`certify` covers ``problem``'s declaration, else the reason it does
    not (whether a trace bound holds for an instance is decided on the data by
    :func:`certify`)."""
    view = minimisation(problem.declaration)
    return view if isinstance(view, str) else None


@reuse_vectors()
def certify(problem: Any, K: Any, *, dense_below: int = DENSE_BELOW,
            multipliers: np.ndarray | None = None, duals: dict | None = None) -> Certificate:
    """Certify a kernel (factor ``V``, ``K = V V^T``) for a convex problem.

    Parameters
    ----------
    problem : any problem with a declaration (P1-P7, DeclaredProblem)
    K : LowRank, an (n, r) factor, or a dense PSD (n, n) matrix
    dense_below : int
        Problems with at most this many rows use a dense eigenvalue solve.
    multipliers : ndarray, optional
        Constraint multipliers to use instead of the ones fitted to ``K``, one per
        constraint row in the declaration's order (the centring row ``1^T K 1 = 0``
        excluded; for MVU: one per edge).  Any vector gives a valid bound (rows of the wrong
        sign are clipped to 0); a solver's own multipliers may give a tighter one.
    duals : dict, optional
        A conic solver's own multipliers (:meth:`kernelforms.formulations.base.Formulation.duals`):
        ``{"constraints": [...], "losses": [...]}``, one entry per constraint and per loss
        term of the declaration, in its order, each an array (one value per row, in the
        minimisation's sign: ``>= 0`` on ``<=`` rows, ``<= 0`` on ``>=`` rows; a loss's slopes
        ``u``) or None.  They are one more candidate beside the fitted multipliers (the best
        bound is kept); they are clipped to their sign and a loss's slope to its conjugate's
        domain (the hinge's box) first,
        so any values give a valid bound.  The certificate's ``note`` says which won.

    Returns
    -------
    Certificate
        ``lower_bound <= f(K*)`` (a maximisation: ``f(K*) <= upper_bound``);
        ``relative_gap`` is how far ``K`` can be from optimal.

    Raises
    ------
    NotApplicable
        When :func:`applies` rejects the declaration, or no trace bound holds for this
        instance (the message says which rule failed and why).
    """
    decl = problem.declaration
    view = minimisation(decl)
    if isinstance(view, str):
        raise _no_cert(f"no certificate for {_name(problem)}: {view}")
    n = decl.n
    y_given = None
    if multipliers is not None:
        if view.n_rows == 0:
            raise _no_cert(f"certify: 'multipliers' are constraint multipliers (MVU only among "
                           f"P1-P6 takes them); {_name(problem)} has no constraint rows")
        y_given = np.asarray(multipliers, dtype=float).ravel()
        if y_given.shape != (view.n_rows,) or not np.all(np.isfinite(y_given)):
            raise _no_cert(f"certify: 'multipliers' must be {view.n_rows} finite numbers, one per "
                           "constraint row in the declaration's order, the centring row excluded "
                           f"(MVU: one per edge); got shape {np.shape(multipliers)}")
    V = _factor(K, n)
    if view.divergence is not None:
        return _certify_divergence(view, V, y_given)
    if duals is not None and y_given is None:
        given = _from_duals(view, duals)
        if given is not None:
            cert, pt, us, y = _lagrangian(view, V, dense_below, None, solver=given)
            shifted = _diagonal_shift(view, pt, us, y, cert, dense_below)
            return cert if shifted is None else shifted
    return _certify_lagrangian(view, V, dense_below, y_given)


def duals_cover(problem: Any, duals: dict) -> bool:
    """Whether a solver's multipliers (:func:`certify`'s ``duals``) cover every constraint
    row and every term of a loss whose slope is not fixed (then the bound with them closes
    to about the solver's accuracy)."""
    view = minimisation(problem.declaration)
    if isinstance(view, str) or view.divergence is not None:
        return False
    got = _from_duals(view, duals)
    return got is not None and got[2]


def mvu_multipliers(problem: Any, V: np.ndarray) -> np.ndarray:
    """Constraint multipliers fitted to the point by least squares on stationarity ``H V = 0``
    (one per constraint row, the centring row excluded: for MVU one per edge).

    At an optimum of MVU, ``S = sum_e lam_e A_e - I (+ c 11^T)`` is PSD and ``S K = 0``;
    for a centred factor the ``11^T`` term drops out, so row ``i`` of ``S V = 0`` reads
    ``sum_{e = (i, j)} lam_e (v_i - v_j) = v_i``: ``n r`` linear equations in the edge
    multipliers, solved by LSQR (sparse, ``4 r`` non-zeros per edge).
    """
    view = minimisation(problem.declaration)
    if isinstance(view, str):
        raise _no_cert(f"mvu_multipliers: no certificate for {_name(problem)}: {view}")
    why = MULTIPLIER_FIT.reason(problem, "mvu_multipliers fits the multipliers of constraint rows "
                                         "to a Lagrangian certificate's point")
    if why is None and view.n_rows == 0:  # the centring row alone: the space keeps it
        why = (f"mvu_multipliers: {_name(problem)}'s only constraint row is the centring row "
               "1^T K 1 = 0, which carries no multiplier")
    if why is not None:
        raise _no_cert(why)
    V = _factor(V, view.n)
    pt = _Point(view, V)
    _, y, _ = _fit(view, pt, pt.base_u(), kinks=False)
    return y


@dataclass
class Escape:
    """The certificate at a factor and the directions that would lower its objective.

    ``values`` are the smallest eigenvalues of the certificate's matrix ``H`` (the
    Lagrangian's gradient with the multipliers that gave the best bound) over the form,
    ascending; ``vectors`` the matching unit directions in point space (``(n, j)``).  A
    negative value ``lambda`` means ``K + t v v^T`` lowers the Lagrangian at rate ``lambda``:
    the factor ``[V, sqrt(t) v]`` of one more column leaves the (non-optimal) point
    (Burer & Monteiro 2005).  ``values >= 0`` (to round-off) certify the point.
    """

    certificate: Certificate
    values: np.ndarray
    vectors: np.ndarray

    @property
    def gap_from_curvature(self) -> float:
        """The part of the relative gap that comes from the negative curvature,
        ``-min(0, lambda_min) tau / max(|f|, |bound|)``: what growing the rank can close."""
        c = self.certificate
        # no eigenpair computed (Lanczos did not converge): the certificate's own lambda_min
        # decides; an unknown one is not "no curvature"
        s = float(self.values[0]) if self.values.size else float(c.min_eig)
        if math.isnan(s):
            return math.inf
        s = min(0.0, s)
        if s == 0.0:
            return 0.0
        tau = c.trace_bound
        if not math.isfinite(tau):
            return math.inf
        return -s * tau / max(abs(c.objective), abs(c.bound) if math.isfinite(c.bound) else 0.0, 1e-12)


@reuse_vectors()
def escape(problem: Any, V: Any, *, multipliers: np.ndarray | None = None, k: int = 1,
           dense_below: int = DENSE_BELOW, start: np.ndarray | None = None) -> Escape:
    """The Lagrangian certificate at the factor ``V`` and the ``k`` directions of most
    negative curvature of its matrix (see :class:`Escape`).

    Used by the factored solvers to grow their rank only when the point is not optimal.
    ``start`` (a vector over the points, e.g. the sum of the previous step's directions)
    starts Lanczos near the directions sought.
    Raises :class:`~kernelforms.errors.NotApplicable` where :func:`certify` does, and for
    a divergence (its solvers have no rank to grow).
    """
    decl = problem.declaration
    view = minimisation(decl)
    if isinstance(view, str):
        raise _no_cert(f"no certificate for {_name(problem)}: {view}")
    if view.divergence is not None:
        raise _no_cert(LAGRANGIAN_ONLY.reason(problem, "escape grows the rank of the factor of a "
                                                       "Lagrangian certificate (a divergence's is "
                                                       "its dual function)"))
    y_given = None
    if multipliers is not None and view.n_rows:
        y_given = np.asarray(multipliers, dtype=float).ravel()
        if y_given.shape != (view.n_rows,) or not np.all(np.isfinite(y_given)):
            y_given = None
    Vf = _factor(V, view.n)
    pairs: list = []
    fitted: list = []
    cert, pt, us, y = _lagrangian(view, Vf, dense_below, y_given, want=k, start=start, pairs=pairs,
                                  fitted=fitted)
    if pairs:  # the certificate's Lanczos run gave the directions too (converged or not)
        vals, vecs = pairs[0], pairs[1]
    else:
        H = pt.gradient(us)
        if view.n_rows:
            H = H + _constraint_op(view, y)
        vals, vecs = view.space.lowest(H, k, dense_below, start=start)
    _remember(view, Vf, dense_below, y_given, cert, (us, y), (vals, vecs))
    if _kink_blind(view, cert, vals):
        # the best bound came from a minorant whose matrix is PSD but far below the point
        # (slopes at the least-magnitude end on the kinked rows, the hinge's 0: L itself):
        # it says nothing about the point.
        # The directions come from the slopes fitted to stationarity H V = 0 instead, the
        # minorant that touches the point (a 500-point digits NPKL-hinge at rank 8, whose
        # optimum has rank 9: best bound from a PSD matrix, relative gap 0.97, no curvature,
        # so the rank never grew and bcd ended 0.7% above the optimum; the fitted slopes'
        # matrix has lambda_min -1.4e-2)
        us_fit, y_fit = fitted if fitted else _fit(view, pt, pt.base_u())[:2]
        H = pt.gradient(us_fit)
        if view.n_rows:
            H = H + _constraint_op(view, y_fit)
        fvals, fvecs = view.space.lowest(H, k, dense_below, start=start)
        if fvals.size and float(fvals[0]) < 0:
            vals, vecs = fvals, fvecs
    return Escape(cert, vals, vecs)


#: a certificate looser than this whose best minorant has no negative curvature, on a
#: problem with a kinked loss (the hinge), takes its escape directions from the slopes
#: fitted at the kinks
BLIND_GAP = 1e-2


def _kink_blind(view: Minimisation, cert: Certificate, vals: np.ndarray) -> bool:
    """Whether the best bound's matrix is PSD while the bound is loose, on a problem with a
    kinked loss (a loss that is not ``smooth``; see :func:`escape`)."""
    if all(t.loss.smooth for t in view.terms):
        return False
    if vals.size and float(vals[0]) < 0:
        return False
    return not cert.relative_gap <= BLIND_GAP  # also when the gap is inf or NaN
