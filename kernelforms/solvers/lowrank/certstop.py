"""The certified early stop of lowrank's unconstrained L-BFGS runs (option ``stop_gap``)."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ...model.oracle import Oracle

__all__ = ["CertStop"]

#: certified early stop of the unconstrained L-BFGS runs (:class:`CertStop`): a chunk of
#: iterations whose relative decrease of the objective is below this has stalled, and the
#: Lagrangian certificate is computed at its end
CERTSTOP_STALL = 1e-7
#: a check after one at iteration ``k`` waits until iteration ``CERTSTOP_SPACING * k``: a
#: run of ``N`` iterations makes at most ``log2(N / k0) + 1`` checks (deterministic, unlike
#: a budget on the clock; measured at 7,494 points: 0.8-1.9 s a check, 4-10% of the fit)
CERTSTOP_SPACING = 2
#: a check that gave no bound (a failed eigenvalue run at that point) is retried at the next
#: stalled chunk's end, up to this many times in a row, before the spacing applies again
CERTSTOP_RETRIES = 2
#: plain L-BFGS (no chunks): the stall test every this many iterations
CERTSTOP_EVERY = 100


class CertStop:
    """The certified early stop of lowrank's unconstrained L-BFGS runs (option ``stop_gap``).

    At a degenerate optimum the factor can keep a nearly flat direction (a singular value
    that shrinks by a third per thousand iterations) while the objective has long reached
    its optimum to 1e-7: the gradient rule (``gtol``) waits for that direction to die.  So
    when the objective has stalled (relative decrease below :data:`CERTSTOP_STALL` over a
    chunk), :func:`kernelforms.certificate.certify` bounds the optimum at the current factor,
    and a relative gap at most ``stop_gap`` ends the run: the point is proven within
    ``stop_gap`` of the optimum.  After a check at iteration ``k`` the next waits until
    iteration :data:`CERTSTOP_SPACING` ``* k`` (the checks' cost is bounded by their number,
    and the run does not depend on the clock); their times are recorded.
    """

    def __init__(self, problem: Any, model: "Oracle", shape: tuple[int, int], rtol: float) -> None:
        self.problem, self.model, self.shape, self.rtol = problem, model, shape, float(rtol)
        self.spent, self.last_cost = 0.0, 0.0
        self.f_prev: float | None = None
        self.fired: tuple[int, float] | None = None
        #: the certificate that fired the stop (computed at the factor the run returns)
        self.certificate: Any = None
        self.checks: list[tuple[int, float | None, float]] = []
        self.off: str | None = None if self.rtol > 0 else "stop_gap = 0"
        if self.off is None:
            from ... import certificate

            # no certificate for the problem: no checks; a point where one fails (Lanczos
            # without convergence, then no finite bound) is that point only
            self.off = certificate.applies(problem)
        self.failed = 0  # checks in a row that gave no gap

    @staticmethod
    def due(count: int) -> bool:
        """A plain L-BFGS run (no chunks) tests for a stall at this iteration count (every
        :data:`CERTSTOP_EVERY`)."""
        return count % CERTSTOP_EVERY == 0

    def check(self, x: np.ndarray, f: float, it: int) -> bool:
        """True when the objective has stalled since the last call and the certificate
        proves the point at ``x`` (iteration ``it``) within ``stop_gap``."""
        from ... import certificate
        from ...errors import KernelformsError

        prev, self.f_prev = self.f_prev, float(f)
        if self.off is not None or self.fired is not None or prev is None or not np.isfinite(f):
            return False
        if prev - f > CERTSTOP_STALL * max(abs(f), 1e-300):
            return False  # still decreasing: the gradient rule may yet stop it
        if (self.checks and it < CERTSTOP_SPACING * self.checks[-1][0]
                and not 0 < self.failed <= CERTSTOP_RETRIES):
            return False  # the checks' spacing (a failed check is retried at the next stall)
        t = time.perf_counter()
        gap, cert = None, None
        try:
            G = self.model.problem_factor(self.model.to_G(np.asarray(x).reshape(self.shape)))
            cert = certificate.certify(self.problem, G)
            gap = float(cert.relative_gap)
        except (KernelformsError, np.linalg.LinAlgError, ValueError, ArithmeticError):
            # this point only (pendigits 7,494 at gamma = 100, seed 1: ARPACK found no
            # eigenvalue at iteration 1,175, so no bound; the rule used to stop checking there,
            # and the run went on to the gradient rule's 4,787 iterations)
            pass
        self.last_cost = time.perf_counter() - t
        self.spent += self.last_cost
        self.checks.append((int(it), gap, self.last_cost))
        self.failed = self.failed + 1 if gap is None else 0
        if gap is not None and math.isfinite(gap) and gap <= self.rtol:
            self.fired, self.certificate = (int(it), gap), cert
            return True
        return False

    def extras(self) -> dict[str, Any]:
        """What the checks did: ``certstop_checks`` [(iteration, gap or None, seconds)] and
        ``certstop_seconds`` (the run's own diagnostics)."""
        return {"certstop_checks": list(self.checks), "certstop_seconds": self.spent}

    def typed(self, returned: bool = True) -> dict[str, Any]:
        """When the stop fired, its certificate as the run's own bound, as the typed fields
        of a :class:`~kernelforms.result.Solution` (``lower_bound``, or ``upper_bound`` for a
        maximisation, ``certified_gap``, ``certificate_time``, ``certstop_fired``): the run
        returns the very factor it was computed at, so the status check after the run
        (:func:`~kernelforms.solvers.base.certify_status`) and the rank growth
        (:func:`~kernelforms.solvers.rank.grow`) read it instead of computing it again."""
        c = self.certificate
        if c is None or not returned:  # (returned: the run returns the certified factor)
            return {}
        side = "upper_bound" if c.sense == "max" else "lower_bound"
        return {side: float(c.bound), "certified_gap": float(c.relative_gap),
                "certificate_time": float(self.last_cost),
                "certstop_fired": {"iteration": self.fired[0], "relative_gap": self.fired[1],
                                   "stop_gap": self.rtol}}
