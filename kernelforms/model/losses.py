"""Losses on the rows ``z = A(K)`` of a linear map.

A loss is separable: ``sum_p l_p(z_p)``, each ``l_p`` convex, with its row data (targets
for the squared loss, labels ``y_p = +1 / -1`` for the margin losses).  Each loss gives
what the methods need, vectorised over the rows:

=============  ===========================  =====================================
loss           ``l_p(z)``                   used by
=============  ===========================  =====================================
Squared(t)     ``(z - t_p)^2``              every method; SCSDP / SQLP need it
Hinge(y)       ``max(0, 1 - y_p z)``        sdp, dual, smo, bcd
SquaredHinge   ``max(0, 1 - y_p z)^2``      sdp, bcd, lowrank
LinearLoss(y)  ``-y_p z``                   sdp, bcd, lowrank (needs a bound)
=============  ===========================  =====================================

``value``, ``grad`` (a subgradient where ``l`` has a kink), ``prox`` (``argmin_z t l(z) +
(z - v)^2 / 2``), ``conjugate`` (``l*(u) = sup_z u z - l(z)``, ``+inf`` off its domain),
``cvx`` (the conic form of the sum) and a few flags (``is_squared``, ``smooth``).
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

    @abstractmethod
    def prox(self, v: np.ndarray, t: Any) -> np.ndarray:
        """``argmin_z t l(z) + (z - v)^2 / 2`` per row (``t > 0``, scalar or per row)."""

    @abstractmethod
    def conjugate(self, u: np.ndarray) -> np.ndarray:
        """``l_p*(u_p) = sup_z u_p z - l_p(z)`` per row (``inf`` off its domain)."""

    @abstractmethod
    def cvx(self, z: Any) -> Any:
        """``sum_p l_p(z_p)`` as a CVXPY expression of an affine ``z``."""

    @abstractmethod
    def latex(self, z: str) -> str:
        """The loss of one row as LaTeX, with ``z`` the row's value."""

    def total(self, z: np.ndarray) -> float:
        return float(np.sum(self.value(z)))


@dataclass(frozen=True, eq=False)
class Squared(Loss):
    """``(z - t_p)^2`` with targets ``t``."""

    targets: Any
    parameter_constraints: ClassVar[dict] = {"targets": Reals(0)}
    name: ClassVar[str] = "squared"
    is_squared: ClassVar[bool] = True
    curvature: ClassVar[float] = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _vector("targets", "Squared", self.targets))

    @property
    def size(self) -> int:
        return len(self.targets)

    def value(self, z):
        r = z - self.targets
        return r * r

    def grad(self, z):
        return 2.0 * (z - self.targets)

    def prox(self, v, t):
        return (v + 2.0 * t * self.targets) / (1.0 + 2.0 * t)

    def conjugate(self, u):
        return u * self.targets + 0.25 * u * u

    def cvx(self, z):
        import cvxpy as cp

        return cp.sum_squares(z - self.targets)

    def latex(self, z):
        return rf"({z} - t)^2"


class _Margin(Loss):
    """A loss of the margin ``y_p z`` with labels ``y_p in {+1, -1}``."""

    labels: np.ndarray
    parameter_constraints: ClassVar[dict] = {"labels": Reals(0)}

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


@dataclass(frozen=True, eq=False)
class Hinge(_Margin):
    """``max(0, 1 - y_p z)``."""

    labels: Any
    name: ClassVar[str] = "hinge"
    smooth: ClassVar[bool] = False

    def __post_init__(self) -> None:
        self._check()

    def value(self, z):
        return np.maximum(0.0, 1.0 - self.labels * z)

    def grad(self, z):
        return np.where(self.labels * z < 1.0, -self.labels, 0.0)

    def prox(self, v, t):
        y = self.labels
        m = y * v
        t = np.broadcast_to(np.asarray(t, dtype=float), m.shape)
        # margin >= 1: untouched; <= 1 - t: a full step t along y; between: onto the kink
        return np.where(m >= 1.0, v, np.where(m <= 1.0 - t, v + t * y, y))

    def conjugate(self, u):
        s = u * self.labels  # u = -a y with a in [0, 1]: l*(u) = -a = s
        return np.where((s >= -1.0) & (s <= 0.0), s, np.inf)

    def cvx(self, z):
        import cvxpy as cp

        return cp.sum(cp.pos(1 - cp.multiply(self.labels, z)))

    def latex(self, z):
        return rf"\max(0, 1 - y {z})"


@dataclass(frozen=True, eq=False)
class SquaredHinge(_Margin):
    """``max(0, 1 - y_p z)^2``."""

    labels: Any
    name: ClassVar[str] = "squared_hinge"
    curvature: ClassVar[float] = 2.0

    def __post_init__(self) -> None:
        self._check()

    def value(self, z):
        h = np.maximum(0.0, 1.0 - self.labels * z)
        return h * h

    def grad(self, z):
        return -2.0 * self.labels * np.maximum(0.0, 1.0 - self.labels * z)

    def prox(self, v, t):
        y = self.labels
        inside = (v + 2.0 * t * y) / (1.0 + 2.0 * t)
        return np.where(y * v >= 1.0, v, inside)

    def conjugate(self, u):
        s = u * self.labels
        return np.where(s <= 0.0, s + 0.25 * s * s, np.inf)

    def cvx(self, z):
        import cvxpy as cp

        return cp.sum_squares(cp.pos(1 - cp.multiply(self.labels, z)))

    def latex(self, z):
        return rf"\max(0, 1 - y {z})^2"


@dataclass(frozen=True, eq=False)
class LinearLoss(_Margin):
    """``-y_p z`` (unbounded below on its own: pair it with a bound such as ``K_ii <= b^2``)."""

    labels: Any
    name: ClassVar[str] = "linear"
    curvature: ClassVar[float] = 0.0

    def __post_init__(self) -> None:
        self._check()

    def value(self, z):
        return -self.labels * z

    def grad(self, z):
        return -self.labels * np.ones_like(z)

    def prox(self, v, t):
        return v + np.asarray(t, dtype=float) * self.labels

    def conjugate(self, u):
        return np.where(u == -self.labels, 0.0, np.inf)

    def cvx(self, z):
        import cvxpy as cp

        return -cp.sum(cp.multiply(self.labels, z))

    def latex(self, z):
        return rf"-y {z}"


#: the margin losses of NPKL (Hu & Kwok 2015) by name
MARGIN_LOSSES: dict[str, type[_Margin]] = {
    "hinge": Hinge, "squared_hinge": SquaredHinge, "linear": LinearLoss,
}
