"""Verify a reformulation without a solver: :func:`verify`.

A correct reformulation has both inclusions: every problem point is a program point with
the same objective, and every program point maps back (``recover``) to a problem point
whose objective is no worse (the program is no relaxation).  ``kf.verify(problem, "sqlp")``
compiles the problem (no solve), draws random kernels in the declaration's form, maps each
to the program's variables with the formulation's own
:meth:`~kernelforms.formulations.base.Formulation.lift` (auxiliary epigraph variables set
tight), and checks, on every point:

``objective``
    the program's objective (CVXPY ``.value``, constants included) equals the problem's
    own objective (``problem.declaration``), times the scale the formulation states (1,
    or ``1/s`` for the von Neumann full SDP);
``cones``
    every PSD and second-order cone constraint of the program holds at the lifted point;
``constraint rows``
    every linear row of the program either holds exactly at every point (an auxiliary
    definition such as ``u_1 + u_2 = 1``) or is, as an affine function of K, a positive
    multiple of one of the problem's constraint rows with the same sense (a nonzero
    multiple for an equality), and every problem row is matched by one: the random points
    are generic, not feasible, so a dropped, mis-scaled or mis-signed row shows;
``recovery``
    ``recover()`` on the lifted variables gives back the same K;

and the converse:

``auxiliaries``
    with K fixed, the auxiliary variables (those ``recover`` does not read, found by moving
    each variable and recovering again) are moved along directions that keep every equality row and improve
    the objective (the projected gradient and random directions of the rows' null space);
    each move must leave a cone by more than round-off (or break an inequality row) before
    the objective improves by 0.3 % of its scale.  An epigraph cone that is not tight
    (``2 u_1 >= ||u_{2:}||``, a Schur LMI ``[[I, a], [a^T, 2 nu]]``, a dropped
    ``u_1 + u_2 = 1``) lets the program go below the problem's objective over the same K,
    and shows here;
``kernel domain``
    an indefinite kernel of the form (the largest eigenvalue of its inner matrix negated),
    lifted, must violate a cone or be refused by a PSD variable: a dropped PSD block shows.

Together with the rows (matched to the problem's, so no row is looser), these say that no
program point over a kernel has an objective below the problem's at that kernel.  ``deep=True`` adds a
check with a solver, for small instances (each is a full conic solve):

``extreme points``
    the program is solved (Clarabel), then twice more with its objective tilted by a random
    linear term on the kernel variables within a ball around the optimum; at each solution
    ``recover()`` must be problem-feasible with an objective no worse than the program's
    value.

Points: ``K = G G^T`` for the PSD form, ``K = Q Y Q^T`` (Y random PSD) for a basis,
``K = V0 W V0^T`` for the Range form; when equality constraints force points equal (hard
PCP's must-links) ``K = P K' P^T`` with K' random, the subspace the formulations compile.

The dual (``"dual"``) is checked from outside: its variables are multipliers, not a
function of K.  Multipliers are drawn per coordinate from ``N(0, (2 w)^2)`` (``N(0, 1)``
for a constraint row's), a distribution that does not depend on the dual program's
constraints, and:

``multiplier domain``
    the program (its constraints other than ``M PSD``) accepts every point whose
    conjugates are finite (the draws conditioned on ``l*(-c / w) < inf``, and on
    ``nu_q (a_q . K - b_q) >= 0`` wherever row q holds: ``nu <= 0`` on ``<=`` rows) and
    refuses every point with one coordinate outside (three per block and point): a dropped
    hinge box ``Q <= w`` or swapped row signs show;
``dual value``
    at the accepted points the program's objective equals the dual function
    ``-sum_k w_k sum_p l_p*(-c_p / w_k) + b . nu`` computed from the declaration's conjugates;
``lagrangian``
    at those points and random K, the program's value ``D`` and its matrix ``M`` satisfy

        f(K) - D = <M, K> + sum_k w_k sum_p [l_p(z_p) + l_p*(-c_p / w_k) + c_p z_p / w_k]
                         + sum_q nu_q (a_q . K - b_q)

    (``z = A(K)``, ``c`` the multipliers' coefficients in ``Phi``);
``weak duality``
    every Fenchel-Young gap is >= 0 at the accepted points, so (with the domain's signs)
    ``f(K) >= D`` whenever K is feasible and M is PSD.

The dual's recovery needs a solve (the reduced primal) and is not checked; ``deep=True``
adds ``strong duality``: the dual's optimum equals the full SDP's (both solved by Clarabel).

A failed check is a finding: :func:`verify` returns a :class:`VerifyResult` whose
``passed`` is False and whose text says which check and by how much; it raises only on bad
arguments (before any work).

The package: :mod:`.checks` (the results, the random points, the shared checks),
:mod:`.primal` (the lift, the converse, ``deep`` on a primal program), :mod:`.dual` (the
Lagrangian identity, ``deep`` on the dual); :func:`verify` is here.
"""

from __future__ import annotations

import numbers
import time
from typing import Any

import numpy as np

from .checks import (  # noqa: F401 - re-exported
    CHOLESKY_FROM,
    RTOL,
    Check,
    VerifyResult,
    _cone_violation,
    _flip,
    _match_rows,
    _normalise,
    _problem_rows,
    _program_rows,
    _psd,
    _psd_within,
    _term_scale,
    _value,
    _value_rec,
    draw_kernels,
)
from .dual import (  # noqa: F401 - re-exported
    DRAW_ROUNDS,
    OUT_TRIES,
    _Block,
    _accepts,
    _deep_dual,
    _program_rows_of,
    _verify_dual,
)
from .primal import (  # noqa: F401 - re-exported
    AUX_DECADES,
    AUX_STEP,
    DEEP_RTOL,
    DEEP_TILTS,
    HUGE_SCALE,
    ROUNDOFF,
    _AuxiliaryMoves,
    _deep_primal,
    _flat,
    _jacobian,
    _kernel_domain,
    _set_flat,
    _verify_primal,
    auxiliary_variables,
)

#: most random points :func:`verify` accepts (rows are matched over them; a few suffice)
MAX_POINTS = 1000
#: most bytes the random kernels (dense n x n each, kept for the row matching) may take
MAX_POINT_BYTES = 2**30
#: largest ``rtol``: the lifted values are exact up to round-off, so a looser tolerance only
#: lets real bugs pass (a weight off by 0.1 % moves the objective by about 1e-3)
MAX_RTOL = 1e-3


def _check_args(n_points: Any, seed: Any, rtol: Any, deep: Any) -> None:
    from ..errors import ProblemError

    if isinstance(n_points, bool) or not isinstance(n_points, numbers.Integral) or not 3 <= n_points <= MAX_POINTS:
        raise ProblemError(f"The 'n_points' parameter of verify must be an integer in [3, {MAX_POINTS}] "
                           f"(rows are matched over the points; a few suffice). Got {n_points!r} instead.")
    if seed is not None and not isinstance(seed, np.random.Generator) and (
            isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise ProblemError(f"The 'seed' parameter of verify must be a nonnegative integer, a numpy "
                           f"Generator or None. Got {seed!r} instead.")
    if (isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not np.isfinite(float(rtol))
            or not 0.0 < float(rtol) <= MAX_RTOL):
        raise ProblemError(f"The 'rtol' parameter of verify must be a float in (0, {MAX_RTOL:g}] (the "
                           f"lifted values are exact up to round-off; a looser tolerance lets real bugs "
                           f"pass). Got {rtol!r} instead.")
    if not isinstance(deep, (bool, np.bool_)):
        raise ProblemError(f"The 'deep' parameter of verify must be True or False. Got {deep!r} instead.")


def _check_problem(problem: Any, n_points: int) -> None:
    """An empty problem has nothing to verify, and the points must fit in memory (both
    refused before any work)."""
    from ..errors import ProblemError
    from ..util import format_bytes

    decl = getattr(problem, "declaration", None)
    if decl is None:
        return  # compile_for says what a problem is
    n = int(decl.n)
    if n < 1:
        raise ProblemError(f"verify: the problem has n = {n} points; there is no kernel to check "
                           "(give a problem with at least one point)")
    need = 8.0 * n_points * n * n
    if 8.0 * 3 * n * n > MAX_POINT_BYTES:
        raise ProblemError(f"verify: the problem is too large to verify ({n} points): verify draws dense "
                           f"{n} x {n} kernels, and even 3 take {format_bytes(24.0 * n * n)}, over "
                           f"{format_bytes(MAX_POINT_BYTES)}; verify the formulation on a smaller instance "
                           "of the same problem (the check is structural)")
    if need > MAX_POINT_BYTES:
        raise ProblemError(f"The 'n_points' parameter of verify is too large for this problem: "
                           f"{n_points} random {n} x {n} kernels take {format_bytes(need)}, over "
                           f"{format_bytes(MAX_POINT_BYTES)}; use n_points <= "
                           f"{int(MAX_POINT_BYTES // (8 * n * n))} (the default 4 is enough)")


def verify(problem: Any, method: Any, *, n_points: int = 4, seed: Any = 0,
           rtol: float = RTOL, deep: bool = False) -> VerifyResult:
    """Check that ``method`` is a correct reformulation of ``problem`` on random points,
    without a solver (see the module docstring for every check).

    Parameters
    ----------
    problem : a kernelforms problem
    method : str
        A formulation (``"sdp"``, ``"scsdp"``, ``"scsdp_factor"``, ``"sqlp"``, ``"dual"``; a
        ``":solver"`` suffix is ignored) or a Formulation instance.
    n_points : int
        Random points (3 to 1000; at most 1 GiB of random n x n kernels).
    seed : int, numpy Generator or None
    rtol : float
        Relative tolerance of every check, in (0, 1e-3].
    deep : bool
        Also solve the program a few times (its own optimum and randomly tilted objectives
        within a ball around it; for the dual, its optimum against the full SDP's) and check
        the solutions map back to problem points no better than the program says.  For
        small instances: each solve is a full conic solve.

    Returns
    -------
    VerifyResult
        ``passed`` False is a finding (which check, by how much), not an exception.

    Raises
    ------
    SolverNotFound, NotApplicable, ProblemError
        Unknown method or a hand-written solver; a formulation that does not apply (the
        reason); a bad ``n_points``, ``seed``, ``rtol`` or ``deep``, an empty problem.
    """
    from ..explain import _label, compile_for

    _check_args(n_points, seed, rtol, deep)
    _check_problem(problem, int(n_points))
    rtol = float(rtol)
    t0 = time.perf_counter()
    form, compiled = compile_for(problem, method, "verify")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    decl = problem.declaration
    points, how = draw_kernels(decl, int(n_points), rng)
    res = VerifyResult(form.name, _label(problem), int(n_points),
                       seed if not isinstance(seed, np.random.Generator) else "generator")
    res.notes.append(f"points: {how}")
    if hasattr(form, "draw_multipliers"):
        _verify_dual(form, compiled, decl, points, rng, rtol, res)
        if deep:
            _deep_dual(form, compiled, problem, res)
    elif compiled.inverse.conflict is not None:
        viol = [decl.violation(K) for K in points]
        ok = all(v > 0 for v in viol)
        res.checks.append(Check("contradiction", ok, 0.0, 0.0,
                                f"the program is 0 == 1 ({compiled.notes[0] if compiled.notes else ''}); "
                                f"the problem's constraints are violated at every point (min violation "
                                f"{min(viol):.3g})" if ok else "a drawn point satisfies the constraints "
                                "the compile proved contradictory"))
    else:
        _verify_primal(form, compiled, decl, points, rng, rtol, res)
        if deep:
            _deep_primal(form, compiled, decl, points, rng, res)
    res.seconds = time.perf_counter() - t0
    return res
