"""Optimality certificates for factorised results, without an SDP solve.

One Lagrangian bound, built from the problem's declaration (``problem.declaration``, the
vocabulary of :mod:`kernelforms.model`) as the chain of reductions leaves it
(:func:`kernelforms.model.chain`): a minimisation (a maximisation is ``min -f``) of ``F(K) = <C, K> + sum_k w_k sum_p l_k(A_k(K)_p)`` over the
kernel's form, subject to ``A(K) {<=, ==, >=} b``.  At a point ``K = V V^T``:

* each loss row gets a slope ``u_p`` (its gradient; at a kink, where the loss's
  ``subdifferential`` is an interval (a kinked loss: the hinge), a multiplier fitted in it),
  and ``l(z) >= u z - l*(u)`` for every ``z`` (Fenchel);
* each constraint row gets a multiplier ``y_p`` of the right sign (``>= 0`` for ``<=``,
  ``<= 0`` for ``>=``, free for ``==``; zero on inactive rows), fitted to the point by
  least squares on stationarity ``H V = 0``;

so for every feasible ``K'`` in the form ``F(K') >= c + <H, K'>`` with
``H = C + sum_k A_k*(w_k u_k) + A*(y)`` and ``c = -sum_k w_k sum_p l*(u_p) - y.b``, and

    F(K*) >= c + min(0, lambda_min(H on the form)) * tau,     tau >= tr(K*).

``lambda_min`` is over the form: ``B^T H B`` for ``K = B Y B^T`` (and ``V0^T H V0`` for a
range), on the centred subspace when the declaration has ``1^T K 1 = 0``, on the merged
points when equality rows force ``v_i = v_j`` (hard must-links).  ``tau`` is derived from
the declaration (docs/certificate.md lists the rules): diagonal or trace upper bounds,
squared losses on the diagonal or on distances, a positive definite linear term, distance
bounds on a connected graph with centring, or ``F = -tr(K)`` alone (then the bound holds
implicitly, MVU).  A divergence (Bregman, P7) is handled by its Lagrange dual function in
closed form instead, with no trace bound.  What the certificate covers is data
(:data:`CAPABILITIES`, :data:`DIVERGENCE_ONLY`: :class:`~kernelforms.model.Capabilities`);
when a declaration does not fit, :func:`applies` and :func:`certify`
(:class:`~kernelforms.errors.NotApplicable`) give the sentence generated from the mismatch
(:func:`why_not`); whether a trace bound holds for an instance is decided on the data.

``lambda_min`` comes from Lanczos (:func:`scipy.sparse.linalg.eigsh`) above
:data:`DENSE_BELOW` rows, and nothing ``n x n`` is ever dense at large ``n``.

The package, by part (each name is also importable from ``kernelforms.certificate``):

* ``base``: :class:`Certificate`, :func:`relative`;
* ``eigen``: the eigenvalue engine (:func:`min_eigenvalue`, :func:`lanczos_min`,
  :func:`lanczos_lowest`, :func:`lanczos_bottom`, rigorous cheap lower bounds);
* ``space``: the form ``K = B Z B^T`` and its eigenvalue queries;
* ``view``: what the certificate accepts (:data:`CAPABILITIES`, :func:`why_not`) and the
  chain's minimisation of a declaration on its form (:class:`Minimisation`);
* ``point``: the point on the form; ``fit``: the multiplier fit;
* ``trace``: the trace rules; ``shift``: the diagonal shift;
* ``lagrangian``: the Lagrangian bound; ``divergence``: the divergences' dual functions;
* ``api``: :func:`applies`, :func:`certify`, :func:`duals_cover`, :func:`mvu_multipliers`,
  :func:`escape`.
"""

from __future__ import annotations

from .base import (  # noqa: F401
    Certificate, relative, _factor, _name, _no_cert,
)
from .eigen import (  # noqa: F401
    ARPACK_RUNS, DENSE_BELOW, DENSE_FALLBACK, FLOOR_MARGIN, FLOOR_TOL, GHOST_GAP,
    LANCZOS_KEEP_BYTES, LANCZOS_KEEP_MAX, LANCZOS_RESTARTS, keep_budget,
    LANCZOS_TOL, Krylov,
    PLAIN_LANCZOS_ABOVE, PLAIN_LANCZOS_STEPS, lanczos_bottom, lanczos_lowest, lanczos_min,
    min_eigenvalue, release_vectors, reuse_vectors,
    _arpack_lowest, _collatz_lower, _dense_lower, _inertia_lower,
    _norm_estimate, _plain_start, _plain_step, _ritz_lower, _start_vector,
)
from .space import (  # noqa: F401
    _Space, _gershgorin_lift,
)
from .view import (  # noqa: F401
    KINK_TOL, Minimisation, _active, _bounds_of, _bounds_vec, _clip_sign, _constraint_op,
    CAPABILITIES, DIVERGENCE_ONLY, HEAD, WHO, _is_centring, _is_total_sum, _is_trace, _merge_basis,
    _pairmap, _senses, _sign_bounds, capabilities, minimisation, why_not,
)
from .point import (  # noqa: F401
    POINT_CHECK_RTOL, _Point, _below_the_point, _point_direction,
)
from .fit import (  # noqa: F401
    _columns, _diagonal_fit, _diagonal_only, _fit, _from_duals, _kink_rows,
)
from .trace import (  # noqa: F401
    _Trace, _feasible_value, _holds, _laplacian_mu, _quad_sup,
)
from .shift import (  # noqa: F401
    SHIFT_FLOOR, SHIFT_MARGIN, SHIFT_PAIR_RULE, SHIFT_PAIR_TOL, SHIFT_PAIRS, SHIFT_SHARE,
    SHIFT_GIVE_UP, SHIFT_SLACK_SHARE, _floor, _give_up, _raise_scale,
    _diagonal_shift, _may_shift, _shift_scale,
)
from .lagrangian import (  # noqa: F401
    _MEMO, _bound, _certify_lagrangian, _lagrangian, _memo_key, _remember,
)
from .divergence import (  # noqa: F401
    DUAL_MAX_ITER, DUAL_ROUNDS, DUAL_SECONDS, _DualFunction, _certify_divergence,
)
from .api import (  # noqa: F401
    BLIND_GAP, Escape, applies, certify, duals_cover, escape, mvu_multipliers, _kink_blind,
)


def _forwarding() -> None:
    """Setting a name on the package sets it in every part that holds it too.

    The parts import each other's names (``from .eigen import min_eigenvalue``), so a
    replacement set on the package alone (``monkeypatch.setattr(certificate,
    "DENSE_FALLBACK", 10)``, as when this was one module) would not reach the code that reads
    it; this keeps such a replacement (and its undoing) effective in every part."""
    import sys
    import types

    parts = tuple(sys.modules[f"{__name__}.{m}"] for m in _PARTS)

    class _Package(types.ModuleType):
        def __setattr__(self, name: str, value) -> None:
            super().__setattr__(name, value)
            for part in parts:
                if name in part.__dict__:
                    setattr(part, name, value)

    sys.modules[__name__].__class__ = _Package


_PARTS = ('base', 'eigen', 'space', 'view', 'point', 'fit',
          'trace', 'shift', 'lagrangian', 'divergence', 'api')
_forwarding()
