"""Losses on the rows ``z = A(K)`` of a linear map.

A loss is separable: ``sum_p l_p(z_p)``, each ``l_p`` convex, with its row data (targets
for the squared loss, labels ``y_p = +1 / -1`` for the margin losses).  Each loss gives
what the methods need, vectorised over the rows:

=============  ===========================  =====================================
loss           ``l_p(z)``                   used by
=============  ===========================  =====================================
Squared(t)     ``(z - t_p)^2``              every method; SCSDP / SQLP need it
Hinge(y)       ``max(0, 1 - y_p z)``        sdp, dual, smo, bcd
SquaredHinge   ``max(0, 1 - y_p z)^2``      sdp, dual, bcd, lowrank
LinearLoss(y)  ``-y_p z``                   sdp, dual, bcd, lowrank (needs a bound)
Logistic(y)    ``log(1 + exp(-y_p z))``     sdp (exponential cones), dual, lowrank
=============  ===========================  =====================================

A loss is described by properties, and the methods read only those (no method tests for a
loss class):

* ``value``, ``grad`` (a subgradient where ``l`` has a kink), ``hess`` (``l''``, smooth
  losses), ``subdifferential`` (the interval ``[lo, hi]`` of slopes, wider than a point
  only at a kink: the certificate fits its slopes there);
* ``conjugate`` (``l*(u) = sup_z u z - l(z)``, ``+inf`` off its domain),
  ``conjugate_domain`` (the interval of ``u`` where it is finite), ``cvx_conjugate`` (its
  sum as a CVXPY expression on that domain): the dual SDP is written from these three;
* ``cvx`` (the conic form of the sum: what the full SDP solves), ``latex`` / ``text``;
* flags: ``is_squared`` (SCSDP / SQLP), ``smooth`` (L-BFGS: lowrank), ``curvature``
  (the Lipschitz constant of ``l'``), ``piecewise_linear``, ``exp_cone`` (the exponential
  cones per row its conic forms use), ``row_update`` (the closed-form row update bcd has for it, or
  ``None``).

A new loss is one subclass here, exported from :mod:`kernelforms.model` (and, for NPKL's
``loss=`` names, one entry of :data:`MARGIN_LOSSES`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import ProblemError
from .checks import Reals


def _vector(name: str, owner: str, value: Any) -> np.ndarray:
    """A finite real 1-d array (complex values, strings, NaN and inf refused)."""
    a = Reals(0).check(owner, name, value).ravel().copy()
    a.flags.writeable = False
    return a


class Loss(ABC):
    """A separable convex loss over ``size`` rows (see the module docstring)."""

    #: short name used in messages and reports
    name: ClassVar[str] = ""
    #: True for ``(z - t)^2`` (the quadratic SDP forms need it)
    is_squared: ClassVar[bool] = False
    #: True when the gradient is Lipschitz (L-BFGS and smooth splittings apply)
    smooth: ClassVar[bool] = True
    #: Lipschitz constant of the gradient (per row), None when not smooth
    curvature: ClassVar[float | None] = None
    #: True when ``l`` is piecewise linear (its conjugate is an indicator plus a linear term)
    piecewise_linear: ClassVar[bool] = False
    #: exponential cones per row in the conic forms of :meth:`cvx` and of :meth:`cvx_conjugate`
    #: as CVXPY writes them (0: none; explain lists them)
    exp_cone: ClassVar[int] = 0
    #: the name of bcd's closed-form row update for this loss, None when it has none
    row_update: ClassVar[str | None] = None
    #: the name of the dual SDP's variable for this loss (``dual_scale * var`` is the multiplier)
    dual_name: ClassVar[str] = "lam"

    @property
    @abstractmethod
    def size(self) -> int:
        """Number of rows."""

    @abstractmethod
    def value(self, z: np.ndarray) -> np.ndarray:
        """``l_p(z_p)`` per row."""

    @abstractmethod
    def grad(self, z: np.ndarray) -> np.ndarray:
        """``l_p'(z_p)`` per row (a subgradient at a kink)."""

    def hess(self, z: np.ndarray) -> np.ndarray:
        """``l_p''(z_p)`` per row (0 on the linear pieces; a smooth loss overrides it)."""
        return np.zeros_like(np.asarray(z, dtype=float))

    def subdifferential(self, z: np.ndarray, tol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: the slopes of ``l_p`` at ``z_p`` (``lo == hi == l'(z)`` where smooth).

        A loss with kinks returns the whole interval for the rows within ``tol`` of a kink
        (the certificate fits a slope in it there)."""
        g = self.grad(z)
        return g, g.copy()

    @abstractmethod
    def conjugate(self, u: np.ndarray) -> np.ndarray:
        """``l_p*(u_p) = sup_z u_p z - l_p(z)`` per row (``inf`` off its domain)."""

    @abstractmethod
    def conjugate_domain(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` per row: the closed interval of ``u`` where ``l_p*(u)`` is finite
        (``-inf`` / ``inf`` for an open end; ``lo == hi`` when it is one point)."""

    @abstractmethod
    def cvx_conjugate(self, u: Any) -> Any:
        """``sum_p l_p*(u_p)`` as a convex CVXPY expression of an affine ``u``, valid on
        :meth:`conjugate_domain` (the caller adds the domain's bounds)."""

    def dual_math(self, v: str, vt: str, w: str) -> tuple[str, str]:
        """The dual SDP's objective term ``-w sum_p l_p*(-lam_p / w)`` over its variable
        (``v`` in LaTeX, ``vt`` in text, ``lam = dual_scale * v``), as (LaTeX, text)."""
        return (rf"-{w} \sum_p \ell_p^*(-s_p {v}_p / {w})", f"-{w} sum_p l_p*(-s_p {vt}_p / {w})")

    @property
    def dual_scale(self) -> np.ndarray:
        """Per-row signs ``s`` with ``s * var`` the dual SDP's multiplier (``s = y`` for the
        margin losses, so that the variable is ``>= 0``)."""
        return np.ones(self.size)

    @abstractmethod
    def cvx(self, z: Any) -> Any:
        """``sum_p l_p(z_p)`` as a CVXPY expression of an affine ``z``."""

    def text(self, z: str) -> str:
        """The loss of one row as plain text, with ``z`` the row's value."""
        return f"{self.name}({z})"

    @abstractmethod
    def latex(self, z: str) -> str:
        """The loss of row ``p`` as LaTeX, with ``z`` the row's value (``t_p`` / ``y_p`` its data)."""

    def total(self, z: np.ndarray) -> float:
        return float(np.sum(self.value(z)))

    @property
    def row_data(self) -> np.ndarray:
        """The per-row data the loss is built from (a squared loss's targets, a margin
        loss's labels): ``type(loss)(loss.row_data)`` is the same loss."""
        raise NotImplementedError(f"{type(self).__name__} does not name its row data")


@dataclass(frozen=True, eq=False)
class Squared(Loss):
    """``(z - t_p)^2`` with targets ``t``."""

    targets: Any
    parameter_constraints: ClassVar[dict] = {"targets": Reals(0)}
    name: ClassVar[str] = "squared"
    is_squared: ClassVar[bool] = True
    row_update: ClassVar[str] = "square"
    curvature: ClassVar[float] = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _vector("targets", "Squared", self.targets))

    @property
    def size(self) -> int:
        return len(self.targets)

    @property
    def row_data(self) -> np.ndarray:
        return self.targets

    def value(self, z):
        r = z - self.targets
        return r * r

    def grad(self, z):
        return 2.0 * (z - self.targets)

    def hess(self, z):
        return np.full_like(np.asarray(z, dtype=float), 2.0)

    def conjugate(self, u):
        return u * self.targets + 0.25 * u * u

    def conjugate_domain(self):
        return np.full(self.size, -np.inf), np.full(self.size, np.inf)

    def cvx_conjugate(self, u):
        import cvxpy as cp

        return self.targets @ u + cp.sum_squares(u) / 4

    def dual_math(self, v, vt, w):
        return (rf"t^T {v} - \tfrac{{1}}{{4 \cdot {w}}} {v}^T {v}", f"t^T {vt} - ||{vt}||^2 / (4 * {w})")

    def cvx(self, z):
        import cvxpy as cp

        return cp.sum_squares(z - self.targets)

    def latex(self, z):
        return rf"({z} - t_p)^2"

    def text(self, z):
        return f"({z} - t_p)^2"


class _Margin(Loss):
    """A loss of the margin ``y_p z`` with labels ``y_p in {+1, -1}``."""

    labels: np.ndarray
    parameter_constraints: ClassVar[dict] = {"labels": Reals(0)}
    dual_name: ClassVar[str] = "Q"

    def __post_init__(self) -> None:  # the dataclass subclasses inherit it
        self._check()

    def _check(self) -> None:
        y = _vector("labels", type(self).__name__, self.labels)
        if not np.all(np.abs(y) == 1):
            k = int(np.flatnonzero(np.abs(y) != 1)[0])
            raise ProblemError(f"The 'labels' parameter of {type(self).__name__} must be +1 or -1 on "
                               f"every row. Got {float(y[k]):g} at row {k} instead.")
        object.__setattr__(self, "labels", y)

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def row_data(self) -> np.ndarray:
        return self.labels

    @property
    def dual_scale(self) -> np.ndarray:
        return self.labels

    def _margin_domain(self, s_lo: float, s_hi: float) -> tuple[np.ndarray, np.ndarray]:
        """The interval of ``u`` with ``y u in [s_lo, s_hi]``."""
        y = self.labels
        return np.where(y > 0, s_lo, -s_hi), np.where(y > 0, s_hi, -s_lo)


@dataclass(frozen=True, eq=False)
class Hinge(_Margin):
    """``max(0, 1 - y_p z)``."""

    labels: Any
    name: ClassVar[str] = "hinge"
    smooth: ClassVar[bool] = False
    piecewise_linear: ClassVar[bool] = True
    row_update: ClassVar[str] = "hinge"

    def value(self, z):
        return np.maximum(0.0, 1.0 - self.labels * z)

    def grad(self, z):
        return np.where(self.labels * z < 1.0, -self.labels, 0.0)

    def subdifferential(self, z, tol=0.0):
        y = self.labels
        g = self.grad(z)
        lo, hi = g.copy(), g.copy()
        kink = np.abs(y * z - 1.0) <= tol
        lo[kink] = np.minimum(0.0, -y[kink])  # u = -a y, a in [0, 1]
        hi[kink] = np.maximum(0.0, -y[kink])
        return lo, hi

    def conjugate(self, u):
        s = u * self.labels  # u = -a y with a in [0, 1]: l*(u) = -a = s
        return np.where((s >= -1.0) & (s <= 0.0), s, np.inf)

    def conjugate_domain(self):
        return self._margin_domain(-1.0, 0.0)

    def cvx_conjugate(self, u):
        import cvxpy as cp

        return cp.sum(cp.multiply(self.labels, u))

    def dual_math(self, v, vt, w):
        return rf"\mathbf{{1}}^T {v}", f"1^T {vt}"

    def cvx(self, z):
        import cvxpy as cp

        return cp.sum(cp.pos(1 - cp.multiply(self.labels, z)))

    def latex(self, z):
        return rf"\max(0, 1 - y_p {z})"

    def text(self, z):
        return f"max(0, 1 - y_p {z})"


@dataclass(frozen=True, eq=False)
class SquaredHinge(_Margin):
    """``max(0, 1 - y_p z)^2``."""

    labels: Any
    name: ClassVar[str] = "squared_hinge"
    curvature: ClassVar[float] = 2.0
    row_update: ClassVar[str] = "squared_hinge"

    def value(self, z):
        h = np.maximum(0.0, 1.0 - self.labels * z)
        return h * h

    def grad(self, z):
        return -2.0 * self.labels * np.maximum(0.0, 1.0 - self.labels * z)

    def hess(self, z):
        return 2.0 * (self.labels * z < 1.0)

    def conjugate(self, u):
        s = u * self.labels
        return np.where(s <= 0.0, s + 0.25 * s * s, np.inf)

    def conjugate_domain(self):
        return self._margin_domain(-np.inf, 0.0)

    def cvx_conjugate(self, u):
        import cvxpy as cp

        return cp.sum(cp.multiply(self.labels, u)) + cp.sum_squares(u) / 4

    def dual_math(self, v, vt, w):
        return (rf"\mathbf{{1}}^T {v} - \tfrac{{1}}{{4 \cdot {w}}} {v}^T {v}",
                f"1^T {vt} - ||{vt}||^2 / (4 * {w})")

    def cvx(self, z):
        import cvxpy as cp

        return cp.sum_squares(cp.pos(1 - cp.multiply(self.labels, z)))

    def latex(self, z):
        return rf"\max(0, 1 - y_p {z})^2"

    def text(self, z):
        return f"max(0, 1 - y_p {z})^2"


@dataclass(frozen=True, eq=False)
class LinearLoss(_Margin):
    """``-y_p z`` (unbounded below on its own: pair it with a bound such as ``K_ii <= b^2``)."""

    labels: Any
    name: ClassVar[str] = "linear"
    curvature: ClassVar[float] = 0.0
    piecewise_linear: ClassVar[bool] = True
    row_update: ClassVar[str] = "linear"

    def value(self, z):
        return -self.labels * z

    def grad(self, z):
        return -self.labels * np.ones_like(z)

    def conjugate(self, u):
        return np.where(u == -self.labels, 0.0, np.inf)

    def conjugate_domain(self):
        return -self.labels, -self.labels

    def cvx_conjugate(self, u):
        import cvxpy as cp

        return cp.Constant(0.0)

    def cvx(self, z):
        import cvxpy as cp

        return -cp.sum(cp.multiply(self.labels, z))

    def latex(self, z):
        return rf"-y_p {z}"

    def text(self, z):
        return f"-y_p {z}"


@dataclass(frozen=True, eq=False)
class Logistic(_Margin):
    """``log(1 + exp(-y_p z))`` (smooth; its conic form uses exponential cones)."""

    labels: Any
    name: ClassVar[str] = "logistic"
    curvature: ClassVar[float] = 0.25
    exp_cone: ClassVar[int] = 2  # log(e^0 + e^m): two; entr(a) + entr(1 - a): two

    def value(self, z):
        return np.logaddexp(0.0, -self.labels * z)

    def grad(self, z):
        # -y sigma(-y z), written without overflow
        return -self.labels * np.exp(-np.logaddexp(0.0, self.labels * z))

    def hess(self, z):
        m = self.labels * z
        return np.exp(-np.logaddexp(0.0, m) - np.logaddexp(0.0, -m))

    def conjugate(self, u):
        a = -u * self.labels  # u = -a y with a in [0, 1]: l*(u) = a log a + (1 - a) log(1 - a)
        inside = (a >= 0.0) & (a <= 1.0)
        ac = np.clip(a, 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(ac > 0, ac * np.log(np.where(ac > 0, ac, 1.0)), 0.0) \
                + np.where(ac < 1, (1 - ac) * np.log(np.where(ac < 1, 1 - ac, 1.0)), 0.0)
        return np.where(inside, v, np.inf)

    def conjugate_domain(self):
        return self._margin_domain(-1.0, 0.0)

    def cvx_conjugate(self, u):
        import cvxpy as cp

        a = -cp.multiply(self.labels, u)
        return -cp.sum(cp.entr(a)) - cp.sum(cp.entr(1 - a))

    def dual_math(self, v, vt, w):
        # a = Q / w in [0, 1]; H(a) = -a log a, the entropy (exponential cones)
        return (rf"{w} \sum_p \left[H({v}_p / {w}) + H(1 - {v}_p / {w})\right]",
                f"{w} sum_p [H({vt}_p / {w}) + H(1 - {vt}_p / {w})],  H(a) = -a log a")

    def cvx(self, z):
        import cvxpy as cp

        return cp.sum(cp.logistic(-cp.multiply(self.labels, z)))

    def latex(self, z):
        return rf"\log(1 + e^{{-y_p {z}}})"

    def text(self, z):
        return f"log(1 + exp(-y_p {z}))"


#: the margin losses of NPKL (Hu & Kwok 2015) by name
MARGIN_LOSSES: dict[str, type[_Margin]] = {
    "hinge": Hinge, "squared_hinge": SquaredHinge, "linear": LinearLoss, "logistic": Logistic,
}
