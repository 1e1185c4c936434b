"""The Lagrangian bound: the candidate minorants at a point, each bounded by ``c +
min(0, lambda_min) tau``, the best kept; the memo of the last escape's certificate."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..result import LowRank

from .base import Certificate, _no_cert, _no_trace_bound, relative
from .view import Minimisation, _bounds_vec, _clip_sign, _constraint_op, _senses
from .point import _Point, _below_the_point, _point_direction
from .fit import _fit, _kink_rows
from .trace import _Trace
from .shift import SHIFT_PAIR_RULE, SHIFT_PAIRS, _diagonal_shift, _may_shift
from .eigen import PLAIN_LANCZOS_ABOVE


def _certify_lagrangian(view: Minimisation, V: np.ndarray, dense_below: int,
                        y_given: np.ndarray | None) -> Certificate:
    key = _memo_key(view, V, dense_below, y_given)
    hit = _MEMO.get("cert") if _MEMO.get("key") == key and _MEMO.get("decl")() is view.decl else None
    pairs = None
    krylov: list = []  # the best minorant's Lanczos run, for the diagonal shift to continue
    if hit is not None:
        cert, (us, y), pairs = hit, _MEMO["uy"], _MEMO["pairs"]
        pt = _Point(view, V)
    else:
        # where the shift may follow on a large form, one plain Lanczos run gives both the
        # bound's lambda_min and the shift's eigenpairs (the Ritz vectors summed once, not
        # once for lambda_min's residual and again for the pairs)
        want = SHIFT_PAIRS if view.space.k >= PLAIN_LANCZOS_ABOVE and _may_shift(view) else 0
        got: list = []
        cert, pt, us, y = _lagrangian(view, V, dense_below, y_given, want=want, pairs=got,
                                      krylov=krylov, pair_rule=SHIFT_PAIR_RULE)
        pairs = tuple(got) if got else None
    shifted = _diagonal_shift(view, pt, us, y, cert, dense_below, pairs, krylov=krylov)
    return cert if shifted is None else shifted


#: the last certificate :func:`escape` computed (the factored solvers' rank growth ends with
#: one at the point they return, which :func:`certify` would otherwise compute again: 30 s
#: at a million points)
_MEMO: dict[str, Any] = {}


def _memo_key(view: Minimisation, V: np.ndarray, dense_below: int, y: np.ndarray | None) -> tuple:
    import hashlib

    def digest(a: np.ndarray | None) -> str:
        if a is None:
            return ""
        a = np.ascontiguousarray(a, dtype=float)
        return f"{a.shape}:" + hashlib.blake2b(a.tobytes(), digest_size=16).hexdigest()

    return (id(view.decl), digest(V), int(dense_below), digest(y))


def _remember(view: Minimisation, V: np.ndarray, dense_below: int, y: np.ndarray | None,
              cert: Certificate, uy: tuple, pairs: tuple | None = None) -> None:
    import weakref

    try:
        ref = weakref.ref(view.decl)
    except TypeError:  # pragma: no cover - a declaration without weak references
        return
    _MEMO.clear()
    # uy: the minorant's multipliers; pairs: the eigenpairs of its matrix, when escape's
    # Lanczos run gave them (for the diagonal shift of a later certify at the same point)
    _MEMO.update(key=_memo_key(view, V, dense_below, y), decl=ref, cert=cert, uy=uy, pairs=pairs)


def _lagrangian(view: Minimisation, V: np.ndarray, dense_below: int,
                y_given: np.ndarray | None, want: int = 0, start: np.ndarray | None = None,
                pairs: list | None = None,
                fitted: list | None = None,
                solver: tuple | None = None,
                krylov: list | None = None,
                pair_rule: dict | None = None) -> tuple[Certificate, _Point, list, np.ndarray]:
    """The best Lagrangian certificate at ``V``, with the point and the loss and constraint
    multipliers ``(us, y)`` of the minorant that gave it (and, with ``want``, the ``want``
    lowest eigenpairs of its matrix in ``pairs`` when one Lanczos run gave both; ``fitted``
    receives ``(us, y)`` of the multipliers fitted to ``H V = 0`` when they were a
    candidate; ``krylov`` the plain Lanczos run of the best minorant's matrix, when one gave
    its ``lambda_min``; ``pair_rule``: the plain recurrence's rule for the ``want`` pairs
    after the smallest, ``tol_rest`` and ``enough`` of
    :func:`~kernelforms.certificate.eigen.lanczos_lowest`)."""
    decl = view.decl
    sp_ = view.space
    pt = _Point(view, V)
    sgn = view.sign
    # the point the certificate is for: its projection onto a basis / range form
    f = view.objective(pt.Vp if sp_.basis is not None else V)
    viol = float(decl.violation(LowRank(V)))
    trace = _Trace(view, pt, dense_below)
    base = pt.base_u()
    exact = [True] * len(view.terms)
    cands: list[tuple[list, np.ndarray, list, str]] = []
    y0 = np.zeros(view.n_rows)
    if y_given is not None:
        cands.append((base, _clip_sign(view, y_given), exact, "given multipliers"))
    else:
        kink_rows = [_kink_rows(t.loss, z) for t, z in zip(view.terms, pt.z)]
        kinked = any(r[0].size for r in kink_rows)
        kinked_loss = not all(t.loss.smooth for t in view.terms)
        if view.n_rows == 0 or not np.any(_senses(view) == 0):
            cands.append((base, y0, [t.loss.smooth for t in view.terms],
                          "kink multiplier minorant" if kinked_loss else "gradient minorant"))
        if kinked:
            for a in (1.0, 0.0):
                us = [u.copy() for u in base]
                for k, (kink, e0, e1) in enumerate(kink_rows):
                    us[k][kink] = e0 + a * (e1 - e0)
                cands.append((us, y0, [False] * len(us), "kink multiplier minorant"))
        if kinked or view.n_rows:
            us, y, how = _fit(view, pt, base)
            if fitted is not None:
                fitted[:] = [us, y]
            ex = [t.loss.smooth for t in view.terms]
            what = ("kink multipliers" if kinked else "") + \
                (" and " if kinked and view.n_rows else "") + \
                ("constraint multipliers" if view.n_rows else "")
            cands.append((us, y, ex, f"{what} fitted to H V = 0 ({how})"))
            Vdom = pt.dominant()
            if Vdom is not None:
                # an interior-point solution carries many directions of eigenvalue ~1e-8
                # that the optimal H need not annihilate: fit on the dominant ones too
                us, y, how = _fit(view, pt, base, Vfit=Vdom)
                cands.append((us, y, ex, f"{what} fitted to H V = 0 on the dominant "
                                         f"{Vdom.shape[1]} directions of K ({how})"))
            if view.n_rows and any(np.any(b.sense != 0) for b in view.rows):
                # far from the optimum every inequality row may be inactive; a fit over all
                # rows (sign-constrained) still tightens the bound there
                us, y, how = _fit(view, pt, base, active_only=False)
                cands.append((us, y, ex, f"{what} fitted to H V = 0 on every row ({how})"))
    if solver is not None:
        # a conic solver's own multipliers (see :func:`_from_duals`): one more candidate
        s_us, s_y, complete = solver
        us = [u if su is None else su for u, su in zip(base, s_us)]
        ex = [su is None and t.loss.smooth for t, su in zip(view.terms, s_us)]
        cands.append((us, _clip_sign(view, s_y), ex,
                      "the solver's own multipliers" + ("" if complete else " (partial)")))
    best = best_uy = None
    mine: list = []
    # one candidate (no constraints, no kinks): its Lanczos run also gives the escape's
    # directions; several: each takes one eigenvalue, the escape one run for the best
    want = want if len(cands) == 1 else 0
    solver_cert = None
    for us, y, ex, how in cands:
        runs: list | None = [] if krylov is not None else None
        cert = _bound(view, pt, trace, us, y, ex, how, f, viol, dense_below, want, start, mine,
                      keep=runs, pair_rule=pair_rule)
        if solver is not None and how.startswith("the solver's own"):
            solver_cert = cert
        if best is None or cert.lower_bound > best.lower_bound:
            best, best_uy = cert, (us, y)
            if pairs is not None:
                pairs[:] = list(mine)
            if krylov is not None:
                krylov[:] = runs[-1:]  # only the best one's run is kept (its vectors are large)
    if solver_cert is not None and best is not solver_cert and \
            solver_cert.min_eig < 0 and (best.min_eig or 0) > 0:
        # the solver's minorant has lambda_min ~ -accuracy (its Z is PSD with zero
        # eigenvalues on range(K)), the best other one lambda_min > 0: a convex combination of
        # the two (valid: slopes and signs stay in their convex domains; its bound is at least
        # the combination of theirs, lambda_min concave) can have both a tight constant and
        # lambda_min >= 0, which needs no trace bound
        s_us, s_y = cands[-1][0], cands[-1][1]
        b_us, b_y = best_uy
        for th in (0.99, 0.9, 0.5):
            same = [np.array_equal(a, b) for a, b in zip(s_us, b_us)]
            us = [a if eq else th * a + (1 - th) * b for a, b, eq in zip(s_us, b_us, same)]
            y = th * s_y + (1 - th) * b_y
            # a term both give the same slopes keeps them exactly (a linear loss's conjugate
            # is finite at its one slope only); the others are bounded by their conjugates
            ex = [eq and t.loss.smooth for eq, t in zip(same, view.terms)]
            runs = [] if krylov is not None else None
            cert = _bound(view, pt, trace, us, y, ex,
                          f"the solver's own multipliers blended ({th:g}) with the {best.note.split(';')[0]}",
                          f, viol, dense_below, 0, start, None, keep=runs)
            if cert.lower_bound > best.lower_bound:
                best, best_uy = cert, (us, y)
                if krylov is not None:
                    krylov[:] = runs[-1:]
    if not math.isfinite(best.lower_bound) and best.lower_bound < 0 and view.kappa == 0:
        raise _no_trace_bound(f"no certificate: lambda_min of the minorant is {best.min_eig:.3g} < 0 and "
                       f"no bound on tr(K*) holds for this instance: {trace.reason()}")
    if sgn < 0:
        ub = view.chain.invert_value(best.lower_bound)  # the minimisation's bound, negated back
        gap = ub - f
        best = Certificate(objective=f, lower_bound=math.nan, gap=gap,
                           relative_gap=relative(gap, f, ub), min_eig=best.min_eig,
                           inner=best.inner, trace_bound=best.trace_bound,
                           eig_method=best.eig_method, note=best.note, sense="max",
                           upper_bound=ub, violation=viol)
    return best, pt, best_uy[0], best_uy[1]


def _bound(view, pt, trace, us, y, exact, how, f, viol, dense_below, want=0, start=None,
           pairs=None, keep=None, pair_rule=None) -> Certificate:
    """One candidate: ``F* >= c + min(0, s) tau`` (and ``kappa c / (kappa + s)``).

    With ``want > 0`` (an escape), one Lanczos run gives both ``s`` and the ``want`` lowest
    eigenpairs, stored in ``pairs`` (a list) for the caller.  ``keep`` (a list) receives the
    plain Lanczos runs that gave ``s`` (:meth:`_Space.min_eig`), the last one last."""
    G = pt.gradient(us)
    if view.n_rows:
        G = G + _constraint_op(view, y)
    c = pt.constant(us, exact) - float(y @ _bounds_vec(view)) if view.n_rows else \
        pt.constant(us, exact)
    s = None
    if pairs is not None:
        pairs[:] = []
    if want > 0 and view.space.k > dense_below:
        # the pairs are kept even when Lanczos did not converge: they are what `lowest`
        # would return from the same run (before, escape repeated it: a1a, 2 x 18,044 products)
        vals, vecs, s = view.space.lowest_with_bound(G, want, dense_below, start=start,
                                                     **(pair_rule or {}))
        if pairs is not None:
            pairs[:] = [vals, vecs]
        eig_how = "lanczos"
    if s is None:
        s, eig_how = view.space.min_eig(G, dense_below, keep=keep)
    GV = np.asarray(G @ pt.Vp)
    inner = float(np.sum(pt.Vp * GV))
    notes = [how]
    if not _below_the_point(s, pt, GV):
        # the run missed the bottom: again, started from the point's own direction of least
        # curvature (the escape's pairs too), then from a random start
        x = _point_direction(pt, GV)
        again = None
        if want > 0 and view.space.k > dense_below:
            vals, vecs, again = view.space.lowest_with_bound(G, want, dense_below, start=x,
                                                             **(pair_rule or {}))
            if pairs is not None:
                pairs[:] = [vals, vecs]
        for start_again in (x, None):
            if again is not None and _below_the_point(again, pt, GV):
                break
            again, eig_how = view.space.min_eig(G, dense_below, start=start_again, keep=keep)
        notes.append(f"lambda_min read {s:.3g}, above the point's own <H, K> / tr K; "
                     f"computed again: {again:.3g}")
        s = again
        if not _below_the_point(s, pt, GV):
            notes.append("still above it: no bound from these multipliers")
            s = -math.inf
    lb, tau = -math.inf, math.nan
    if s >= 0:
        lb = c
        notes.append("lambda_min >= 0: no trace bound needed")
    if view.kappa > 0 and view.kappa + s > 0:
        # -kappa tr(K') = <G, K'> + c >= s tr(K') + c on the feasible set, for s of either
        # sign: tr(K*) (kappa + s) <= -c (with s > 0 this is below c's bound)
        k = view.kappa
        imp = k * c / (k + s)
        if imp > lb:
            lb, tau = imp, -c / (k + s)
            notes.append("F = -kappa tr(K): tr(K*) (kappa + s) <= -c")
    if s < 0 and not (view.kappa > 0 and view.kappa + s > 0):
        t = trace.get()
        if math.isfinite(t):
            cand = c + s * t
            if cand > lb:
                lb, tau = cand, t
                notes.append(trace.note)
        elif view.kappa > 0:
            notes.append("s <= -kappa: no bound from these multipliers")
    F = view.sign * f  # the minimisation's value at the point
    gap = F - lb
    return Certificate(objective=f, lower_bound=lb, gap=gap, relative_gap=relative(gap, F, lb),
                       min_eig=s, inner=inner, trace_bound=tau, eig_method=eig_how,
                       note="; ".join(notes), violation=viol)
