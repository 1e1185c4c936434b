"""The :class:`Report` of :func:`~kernelforms.compare`: rows, reference, verdicts, exports.

The verdict rule (also in docs/compare.md)
------------------------------------------
Every row that ran gets an *outcome* and the *evidence* it rests on:

* ``agrees``: feasible (violation <= ``vtol``) and within ``rtol`` of the reference.  The
  evidence says what makes the agreement trustworthy, strongest first:

  - ``solver certificate``: a conic solver's own optimality certificate (status ``optimal``);
  - ``own certificate``: the row's gradient certificate (:mod:`kernelforms.certificate`)
    proves it within ``rtol`` of the optimum (``cert.gap <= rtol``);
  - ``gap to certified ref.``: within ``rtol`` of a reference that is certified, while the
    row has no certificate of its own;
  - ``gap to certified ref.; own cert. loose``: within ``rtol`` of a certified reference,
    but the row's own certificate is above ``rtol``.  The row still agrees (the reference
    proves the optimum and the row's objective is within ``rtol`` of it; a certificate
    gap is an *upper* bound on the distance to the optimum, and the gradient bound is
    loose away from very accurate points), but the report names it: the row alone would
    not prove its accuracy;
  - ``not certified``: within ``rtol`` of the best feasible row, and nothing proves either
    optimal.
* ``disagrees``: infeasible, beyond ``rtol`` of the reference, or a contradicting status
  (``infeasible`` while another row found a feasible point).
* ``unfinished``: ``error``, ``numerical_error``, no objective; ``timeout``, ``max_iter`` or
  ``optimal_inaccurate`` (the method said it stopped short) beyond ``vtol`` or ``rtol`` of the
  reference, or with no finished row to compare with.
* ``skipped``: the method does not apply (not counted).

A feasible row's certificate is also a bound on the optimum: when the reference's objective
is better than some row's certified bound by more than ``rtol``, the report disagrees (the
reference is then not optimal-feasible, or a certificate is wrong).

The reference is the best *certified* feasible row (a conic solver's optimality certificate, or
the row's own certified gap within ``rtol``), else the best feasible row; only a *finished*
row (status ``optimal`` or ``converged``) can be the reference.  When no row is proved optimal
and a conic solver certified the problem ``unbounded``, no finite row is the reference.

Relative gaps are taken against ``max(|reference objective|, NEAR_ZERO x objective_scale)``,
where ``objective_scale`` is the data's scale of the objective (the losses of the zero kernel,
:func:`objective_scale`): an optimum near zero is not compared digit by digit.  The report
states the scale when it is used; certified gaps are re-expressed on the same scale.

The report's :attr:`Report.verdict` needs *evidence* (:meth:`Report.evidence`): a finished,
feasible row proved within ``rtol`` of the optimum (its solver's optimality certificate or
its own certified gap), or two finished rows of different methods agreeing within ``rtol``
(with no feasible row: a shared ``infeasible`` / ``unbounded`` status of which one is a
certificate: a conic solver's, or ``burg`` / ``vonneumann``'s exact one).

* ``"agree"`` (exit status 0): every row that ran agrees, with evidence;
* ``"agree_partial"`` (3): no row disagrees, some are unfinished, and the agreeing rows have
  evidence;
* ``"unverified"`` (3): no row disagrees, but nothing was verified: no method ran, no row
  finished, or a lone finished row that nothing certifies;
* ``"disagree"`` (1): a row disagrees, or the reference contradicts a certified bound.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import DataError, KernelformsError, OptionError
from .result import TYPED_EXTRAS, Result, Status
from .util import render_table

#: default largest constraint violation for a row to count as feasible, relative to the
#: problem's constraint scale (:func:`default_vtol`)
DEFAULT_VTOL = 1e-5


def constraint_scale(problem: Any) -> float:
    """``max(1, largest |b_k|)`` over the right-hand sides of the problem's constraint rows
    (1 without constraints): the scale :func:`default_vtol` is relative to.  It is 1 for the
    problems whose right-hand sides are 0 / 1 (hard PCP, NPKL's ``K_ii <= b^2`` at ``b <= 1``)
    and the largest squared edge distance for MVU, the largest distance bound for
    ``BregmanLowRank``."""
    import numpy as np

    try:
        bounds = [np.abs(np.asarray(c.bound, dtype=float)) for c in problem.declaration.constraints]
    except (AttributeError, TypeError, ValueError):
        return 1.0
    top = max((float(b.max()) for b in bounds if b.size), default=0.0)
    return max(1.0, top) if math.isfinite(top) else 1.0


def default_vtol(problem: Any) -> float:
    """:func:`~kernelforms.compare`'s feasibility threshold when none is given:
    ``DEFAULT_VTOL x constraint_scale(problem)``.  A violation is in the units of the
    constraint rows (squared distances for MVU), so an absolute 1e-5 asked MVU on data with
    distances of 10 for a relative accuracy of 1e-7, far beyond what ``mvu`` (``feas_tol``,
    relative to the largest squared distance) or Clarabel reaches, and a converged,
    certified row was reported infeasible."""
    return DEFAULT_VTOL * constraint_scale(problem)


#: JSON schema tag of :meth:`Report.to_json`
JSON_FORMAT = "kernelforms-report/1"
#: the report verdicts and the exit status of ``kernelforms compare`` for each
#: (2 is the CLI's bad-input status, 130 an interruption); ``unverified``: nothing was checked
EXIT_CODES = {"agree": 0, "disagree": 1, "agree_partial": 3, "unverified": 3}
#: ``Result.extras`` key: the ``gap_tol`` that compare ran a method with (compare.gap_request)
GAP_ASKED = "gap_tol_from_rtol"


class ReportWriteError(KernelformsError, OSError):
    """A report (or baseline, or table) could not be written; the message names the path.

    Attributes
    ----------
    path : str
        Where the write was attempted.
    text : str or None
        What would have been written, so that nothing is lost.
    """

    def __init__(self, message: str, path: str = "", text: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.text = text


class ReportWriteWarning(UserWarning):
    """:func:`~kernelforms.compare` could not write ``json_path``; the report is returned anyway."""


# ---------------------------------------------------------------------- tolerances
def check_tolerance(name: str, value: Any, owner: str = "compare",
                    error: type[KernelformsError] = OptionError) -> float:
    """``value`` as a float when it is a finite number >= 0, else ``error`` naming ``name``.

    A NaN tolerance would make every comparison agree (``abs(gap) > nan`` is False), an
    infinite one too; both are refused.
    """
    import numpy as np

    ok = (not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating)))
    try:
        x = float(value) if ok else math.nan
    except OverflowError:
        x = math.inf
    if not ok or not math.isfinite(x) or x < 0:
        what = {"rtol": "a relative objective gap, e.g. 1e-4",
                "vtol": "a largest constraint violation, e.g. 1e-5"}.get(name, "a tolerance")
        raise error(f"The {name!r} option of {owner} must be a finite number >= 0 ({what}). "
                    f"Got {value!r} instead.")
    return x


def relative_gap(objective: float, reference: float, sense: str, floor: float = 0.0) -> float:
    """Signed relative gap, positive when ``objective`` is worse than ``reference``, relative
    to ``max(|reference|, floor)`` (``floor``: :func:`objective_scale` x :data:`NEAR_ZERO`, so
    that an optimum near zero is not compared digit by digit)."""
    if not (math.isfinite(objective) and math.isfinite(reference)):
        return math.inf if objective != reference else 0.0
    diff = objective - reference if sense == "min" else reference - objective
    return diff / max(abs(reference), floor if math.isfinite(floor) else 0.0, 1e-12)


#: an optimum is *near zero* when it is below this share of the data's objective scale
#: (:func:`objective_scale`); relative gaps are then taken against that share instead
NEAR_ZERO = 1e-3


def objective_scale(problem: Any) -> float:
    """The data's scale of the objective: ``sum |w_t sum_p loss_p(0)|`` over the declaration's
    loss terms, i.e. the losses of the zero kernel (the number of pairs for PCP's unit
    targets); 0 when there is none (or it is not finite).

    A relative gap divides by ``max(|reference|, NEAR_ZERO x objective_scale)``: the optimum
    of RegPCP can be 1e-5 of the losses it drives down, where the conic solvers' absolute
    accuracy (about 1e-8 of the data) is already 1e-3 of the optimum."""
    import numpy as np

    try:
        terms = problem.declaration.losses
        total = 0.0
        for t in terms:
            total += abs(float(t.weight) * float(t.loss.total(np.zeros(t.map.size))))
    except Exception:  # noqa: BLE001 - a problem without a declaration (or an odd loss): no floor
        return 0.0
    return total if math.isfinite(total) else 0.0


def _other_problem(r: Result) -> str:
    """``"; it solves ..."`` for a method that optimises another problem by design
    (``extras["solves"]``, e.g. SimpleNPKL's added bound on tr(K^p)), else ``""``."""
    other = r.extras.get("solves")
    return f"; by design it solves {other}, not this problem" if isinstance(other, str) and other else ""


def _is_certifying(r: Result) -> bool:
    if r.certifying is not None:
        return bool(r.certifying)
    from .methods import get_method

    try:
        return bool(get_method(r.method).certifying)
    except (KernelformsError, TypeError):
        return False


# ---------------------------------------------------------------------- plain labels
#: the formulation labels solvers report -> what the table prints
PLAIN_FORMULATIONS = {
    "FullSDP": "full n x n kernel (SDP)",
    "DualSDP": "dual SDP",
    "SchurComplementSDP": "Schur complement SDP (small PSD block)",
    "SchurComplementSDP(B)": "Schur complement SDP on the basis",
    "SQLP": "cone program, small PSD block (SQLP)",
    "factored V^T U, V = U (ADMM)": "low-rank factor, ADMM",
    "factored K = G G^T (BCD)": "low-rank factor, block coordinate descent",
    "factored G G^T (Burer-Monteiro)": "low-rank factor, L-BFGS (Burer-Monteiro)",
    "dual of hinge NPKL, SMO-like (Hoi et al. 2007)": "dual problem, SMO-like",
    "factored G0 B (Kulis et al. 2006, Alg. 1)": "low-rank update of the prior, Burg projections",
    "factored V0 W diag(lam) W^T V0^T (Kulis et al. 2006, Alg. 2)": "low-rank update of the prior, von Neumann projections",
    "P6 + tr(K^p) <= B, closed form / saddle point (SimpleNPKL)": "trace-bounded, closed form (SimpleNPKL)",
}


def plain_formulation(label: str) -> str:
    """The plain-words label the table prints for a solver's formulation label."""
    return PLAIN_FORMULATIONS.get(label, label)


LEGEND = """\
Columns
  method       the method string: a formulation and, after ':', its conic solver
               (sdp:clarabel), or a hand-written solver (admm, bcd, lowrank ...)
  formulation  how the problem was written for that solver: "full n x n kernel (SDP)" is
               the textbook semidefinite program; "low-rank factor, ..." solvers keep
               K = G G^T with a thin G (n x r) and never form K; "cone program, small PSD
               block (SQLP)" and "Schur complement SDP" are the reduced conic programs
  solver       the conic solver, or "kernelforms" for the hand-written solvers
  status       optimal: a conic solver proved optimality; converged: a hand-written solver
               met its stopping rule (feasibility included); max_iter / timeout: stopped
               early; optimal_inaccurate: the conic solver's accuracy was reduced;
               infeasible, numerical_error, error, skipped: see the notes
  objective    the problem's own objective at the returned kernel (never a solver's
               internal value), so rows of different methods compare
  rel.gap      relative objective gap to the reference row, positive = worse than it
               (relative to 1e-3 of the data's objective scale when the optimum is smaller)
  cert.gap     certified gap: how far this row's objective can be from the true optimum,
               proved from its kernel alone (a gradient bound, relative); empty when no
               certificate applies.  Small = proved near-optimal; large = not proved (the
               bound is loose away from very accurate points), not necessarily wrong
  viol         largest constraint violation of the returned kernel (0 = feasible);
               a row counts as feasible when viol <= vtol (default 1e-5 x max(1, largest
               |b_k|) of the problem's constraint rows: 1e-5 of the largest squared
               distance for MVU)
  min_eig      smallest eigenvalue of the kernel (>= 0 for a valid kernel; about -1e-9 is
               round-off)
  rank         numerical rank of the kernel
  size         size of the program the solver saw (PSD block, variables) or of the factor
  compile s    seconds to build the program (conic methods); solve s: seconds in the solver
  iter         iterations
  verdict      whether the row agrees and the evidence it rests on: "solver certificate",
               "own certificate" (cert.gap <= rtol), "gap to certified ref." (within rtol
               of a certified reference), "own cert. loose" (agrees with the certified
               reference but its own cert.gap is above rtol), "not certified" (agrees with
               the best feasible row; nothing proves either optimal); NO: disagrees;
               unfinished: error, or timeout / max_iter / optimal_inaccurate beyond
               vtol / rtol or with no finished row to compare with
Header and footer
  fingerprint  a hash of the instance (data, pairs, parameters): two reports with the same
               fingerprint solved the same problem
  reference    the row the gaps are measured against: the best certified feasible row (a
               conic optimum, or a row whose own certificate is within rtol), else the best
               feasible objective; only an optimal / converged row can be the reference
  evidence     what the agreement rests on: a finished row proved within rtol, or two
               finished rows of different methods that agree
  verdict      agree (exit status 0); agree among the N that finished, M timed out or
               failed (exit status 3); unverified: nothing was checked, e.g. the only row
               stopped at max_iter or nothing certifies a lone row (exit status 3);
               disagree (exit status 1)
"""


# ---------------------------------------------------------------------- row verdicts
@dataclass(frozen=True)
class RowVerdict:
    """One row's outcome (``agrees``, ``disagrees``, ``unfinished``, ``skipped``), the
    evidence it rests on (a short label, the table's ``verdict`` column) and a sentence."""

    method: str
    outcome: str
    evidence: str
    reason: str = ""
    loose: bool = False

    @property
    def label(self) -> str:
        if self.outcome == "skipped":
            return ""
        head = {"agrees": "yes", "disagrees": "NO", "unfinished": "unfinished"}[self.outcome]
        if self.evidence.startswith("reference"):
            return self.evidence
        return f"{head} ({self.evidence})" if self.evidence else head


_UNFINISHED = (Status.ERROR, Status.TIMEOUT, Status.NUMERICAL_ERROR, Status.MAX_ITER)
#: the statuses of a row that finished: only such a row can be the reference or evidence
FINISHED = (Status.OPTIMAL, Status.CONVERGED)
#: statuses whose point, off in violation or objective, is unfinished rather than a
#: disagreement: the method itself said it did not get there
_STOPPED_SHORT = {Status.TIMEOUT: "timed out",
                  Status.MAX_ITER: "stopped at its iteration limit",
                  Status.NUMERICAL_ERROR: "stopped on a numerical error",
                  Status.OPTIMAL_INACCURATE: "the conic solver stopped at reduced accuracy"}


def _finished(r: Result) -> bool:
    """The method says it got there (``optimal`` / ``converged``) and returned an objective."""
    return r.status in FINISHED and r.ok


def _kind(r: Result) -> Any:
    """What makes two rows different methods: their formulation and solver (the method
    string when neither is known); the same method twice is not a second opinion."""
    return (r.formulation, r.solver) if (r.formulation or r.solver) else r.method


@dataclass
class Report:
    """The outcome of :func:`compare`: one :class:`~kernelforms.result.Result` per method.

    Attributes
    ----------
    rows : list of Result
        In the order the methods were given; skipped methods have status ``skipped``
        and the reason in ``message``; failures are ``error`` / ``timeout`` rows.
    reference : str or None
        The method whose objective is the reference; ``reference_kind`` says how it was
        chosen: ``"certified"`` (a conic solver's optimality certificate), ``"certified
        bound"`` (a factorised row whose :mod:`~kernelforms.certificate` gap is within
        ``rtol``) or ``"best feasible"`` (no certificate: the best feasible objective).
    verdict : str
        ``"agree"``, ``"agree_partial"``, ``"unverified"`` or ``"disagree"`` (see the module
        docstring); ``exit_code`` is 0, 3, 3 or 1.
    objective_scale : float
        The data's scale of the objective (:func:`objective_scale`; 0: none); relative gaps
        divide by at least ``NEAR_ZERO`` times it.
    seed : int, dict or None
        The seed the methods got; a ``numpy.random.Generator`` is recorded as
        ``{"generator": "PCG64", "state": {...}}`` (its state before the first method).
    complete : bool
        False when the comparison was interrupted (the rows are the finished ones).
    recipe : dict or None
        How to rebuild the instance (set by the CLI; see :mod:`kernelforms.testing`).
    write_error : str or None
        Set by :func:`compare` when ``json_path`` could not be written.
    """

    problem_label: str
    problem_params: dict[str, Any]
    fingerprint: str
    sense: str
    rows: list[Result]
    rtol: float = 1e-4
    vtol: float = DEFAULT_VTOL
    seed: Any = 0
    reference: str | None = None
    reference_kind: str = "none"
    reference_objective: float = math.nan
    version: str = ""
    gaps: dict[str, float] = field(default_factory=dict)
    complete: bool = True
    recipe: dict[str, Any] | None = None
    time_limit: float | None = None
    objective_scale: float = 0.0
    write_error: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self.rtol = check_tolerance("rtol", self.rtol, "Report")
        self.vtol = check_tolerance("vtol", self.vtol, "Report")
        self.objective_scale = check_tolerance("objective_scale", self.objective_scale, "Report")
        if not self.version:
            from ._version import __version__

            self.version = __version__
        self._choose_reference()

    def _rtol(self, rtol: float | None) -> float:
        return self.rtol if rtol is None else check_tolerance("rtol", rtol, "Report.agree")

    # ------------------------------------------------------------------ scale
    @property
    def scale_floor(self) -> float:
        """``NEAR_ZERO x objective_scale``: the smallest denominator of a relative gap (0
        when the problem's data give no scale)."""
        s = self.objective_scale
        return NEAR_ZERO * s if isinstance(s, (int, float)) and math.isfinite(s) and s > 0 else 0.0

    def scale_note(self) -> str:
        """How the relative gaps are measured (the report states it)."""
        floor = self.scale_floor
        if not floor:
            return "relative gaps are relative to |reference objective|"
        ref = self.reference_objective
        near = math.isfinite(ref) and abs(ref) < floor
        return (f"relative gaps are relative to max(|reference objective|, {NEAR_ZERO:g} x the "
                f"data's objective scale {self.objective_scale:.4g} (the losses of K = 0)) = "
                f"{max(abs(ref) if math.isfinite(ref) else 0.0, floor):.4g}"
                + ("; the optimum is near zero, so that floor is used" if near else ""))

    def _cgap(self, r: Result) -> float:
        """The row's certified relative gap, relative to the report's scale: the certificate's
        own ``certified_gap`` (relative to ``max(|objective|, |bound|)``), or, when the
        scale floor is larger than both, the bound's absolute gap over the floor."""
        g = _cert_gap(r)
        floor = self.scale_floor
        b = r.lower_bound if self.sense == "min" else r.upper_bound
        if not floor or not isinstance(b, (int, float)) or not math.isfinite(b) or not math.isfinite(r.objective):
            return g
        den = max(abs(r.objective), abs(float(b)))
        if den >= floor:
            return g
        gap = r.objective - float(b) if self.sense == "min" else float(b) - r.objective
        return gap / floor

    # ------------------------------------------------------------------ reference
    def _feasible(self, r: Result) -> bool:
        return r.ok and (not math.isfinite(r.violation) or r.violation <= self.vtol)

    def _solver_certified(self, r: Result) -> bool:
        return r.status.certifies_optimality and _is_certifying(r)

    def _proved(self, r: Result, rtol: float | None = None) -> bool:
        """A finished, feasible row proved within ``rtol`` of the optimum: its solver's
        optimality certificate, or its own certified gap."""
        rtol = self.rtol if rtol is None else rtol
        return (_finished(r) and self._feasible(r)
                and (self._solver_certified(r) or abs(self._cgap(r)) <= rtol))

    def _status_proof(self) -> Result | None:
        """A row whose ``unbounded`` status is a certificate (a conic solver's), when no row is
        proved optimal: a finite objective of an unproved row does not refute it."""
        if any(self._proved(r) for r in self.rows):
            return None
        for r in self.rows:
            if r.status is Status.UNBOUNDED and _is_certifying(r):
                return r
        return None

    def _choose_reference(self) -> None:
        """The reference is the best certified feasible row (``_proved``: a solver's
        certificate or the row's own certified gap within ``rtol``), else the best finished
        feasible row.  Only a finished row (``optimal`` / ``converged``) can be the
        reference: a row stopped by ``max_iter`` or a time limit, or at reduced accuracy,
        says itself that it is not there."""
        def better(a: Result, b: Result) -> bool:
            return a.objective < b.objective if self.sense == "min" else a.objective > b.objective

        feasible = [r for r in self.rows if _finished(r) and self._feasible(r)]
        if self._status_proof() is not None:
            feasible = []
        pool = [r for r in feasible if self._proved(r)] or feasible
        if not pool:
            self.reference, self.reference_kind, self.reference_objective = None, "none", math.nan
            self.gaps = {}
            return
        best = pool[0]
        for r in pool[1:]:
            if better(r, best):
                best = r
        kind = ("certified" if self._solver_certified(best) else "certified bound") if self._proved(best) \
            else "best feasible"
        self.reference, self.reference_kind = best.method, kind
        self.reference_objective = best.objective
        self.gaps = {r.method: relative_gap(r.objective, best.objective, self.sense, self.scale_floor)
                     for r in self.rows if r.ok}

    @property
    def reference_certified(self) -> bool:
        """True when the reference is proved optimal (a conic certificate or its own)."""
        return self.reference_kind in ("certified", "certified bound")

    # ------------------------------------------------------------------ verdicts
    def row_verdicts(self, rtol: float | None = None) -> list[RowVerdict]:
        """One :class:`RowVerdict` per row, in row order (see the module docstring)."""
        rtol = self._rtol(rtol)
        out = []
        ran = [r for r in self.rows if r.status is not Status.SKIPPED]
        claims = {r.status for r in ran if r.status in (Status.INFEASIBLE, Status.UNBOUNDED)}
        proof = self._status_proof()
        # a point feasible within vtol, whatever its status: it refutes an infeasibility claim
        witness = next((r for r in ran if self._feasible(r)), None)
        for r in self.rows:
            st = r.status.value
            msg = f" ({r.message})" if r.message else ""
            if r.status is Status.SKIPPED:
                out.append(RowVerdict(r.method, "skipped", "skipped", r.message))
            elif self.reference is None:
                if r.status is Status.INFEASIBLE and witness is not None:
                    out.append(RowVerdict(r.method, "disagrees", f"status {st}",
                                          f"status {st}{msg}, while {witness.method}'s point (status "
                                          f"{witness.status.value}) is feasible within vtol {self.vtol:g}"))
                elif r.status in (Status.INFEASIBLE, Status.UNBOUNDED):
                    if len(claims) == 1:
                        out.append(RowVerdict(r.method, "agrees", f"same status: {st}"))
                    else:
                        out.append(RowVerdict(r.method, "disagrees", f"status {st}",
                                              f"status {st}{msg}; other rows say "
                                              + " / ".join(sorted(c.value for c in claims - {r.status}))))
                elif proof is not None and _finished(r):
                    out.append(RowVerdict(r.method, "disagrees", f"status {st}",
                                          f"status {st} at objective {r.objective:.6g}, while "
                                          f"{proof.method} certified the problem unbounded; nothing "
                                          "certifies this row's point optimal" + _other_problem(r)))
                elif _finished(r) and r.ok and not self._feasible(r):
                    out.append(RowVerdict(r.method, "disagrees", "infeasible",
                                          f"violation {r.violation:.3g} > vtol {self.vtol:g}; no row is "
                                          "feasible" + _other_problem(r)))
                elif _finished(r):
                    out.append(RowVerdict(r.method, "disagrees", f"status {st}",
                                          f"status {st} but no objective{msg}"))
                else:
                    out.append(RowVerdict(r.method, "unfinished", st,
                                           f"status {st}{msg}; no finished row to compare with"))
            elif not r.ok:
                if r.status in (Status.INFEASIBLE, Status.UNBOUNDED):
                    out.append(RowVerdict(r.method, "disagrees", f"status {st}",
                                          f"status {st}{msg}, while {self.reference} found a "
                                          "feasible point"))
                else:
                    out.append(RowVerdict(r.method, "unfinished", st, f"status {st}{msg}"))
            elif math.isfinite(r.violation) and r.violation > self.vtol:
                why = f"violation {r.violation:.3g} > vtol {self.vtol:g}"
                if not _finished(r):
                    out.append(RowVerdict(r.method, "unfinished", r.status.value,
                                          f"{_STOPPED_SHORT.get(r.status, 'status ' + st)}; {why}"))
                else:
                    out.append(RowVerdict(r.method, "disagrees", "infeasible", why + _other_problem(r)))
            elif abs(self.gaps[r.method]) > rtol:
                why = (f"relative gap {self.gaps[r.method]:+.3g} beyond rtol {rtol:g}"
                       + self._past_bound(r, rtol))
                if not _finished(r):
                    out.append(RowVerdict(r.method, "unfinished", r.status.value,
                                          f"{_STOPPED_SHORT.get(r.status, 'status ' + st)}; {why}"))
                else:
                    out.append(RowVerdict(r.method, "disagrees", "gap", why + _other_problem(r)))
            else:
                out.append(self._agreeing(r, rtol))
        return out

    def evidence(self, rtol: float | None = None) -> str | None:
        """What the agreement rests on, or None when nothing was checked: a finished row proved
        within ``rtol`` (its solver's certificate or its own certified gap), or two finished
        rows of different methods (formulation and solver) agreeing within ``rtol``; with no
        feasible row, a shared ``infeasible`` / ``unbounded`` status of which one is a
        certificate (a conic solver's, or burg / vonneumann's exact one)."""
        rtol = self._rtol(rtol)
        agreeing = [self.result(v.method) for v in self.row_verdicts(rtol) if v.outcome == "agrees"]
        if self.reference is None:
            if not agreeing:
                return None
            st = agreeing[0].status.value
            # a status is evidence only when it is a certificate: hand-written solvers that
            # give up on feasibility agree on a guess, not a proof
            cert = [r.method for r in agreeing if _is_certifying(r)]
            if cert:
                return f"{cert[0]}'s {st} status is a certificate"
            return None
        proved = [r for r in agreeing if self._proved(r, rtol)]
        if proved:
            r = proved[0]
            how = ("its solver's optimality certificate" if self._solver_certified(r)
                   else f"its own certified gap {self._cgap(r):.2g}")
            return f"{r.method} is proved within rtol of the optimum ({how})"
        done = [r for r in agreeing if _finished(r)]
        kinds = {_kind(r) for r in done}
        if len(kinds) >= 2:
            return (f"{len(done)} finished rows of different methods agree within rtol "
                    f"({', '.join(r.method for r in done)}); none is certified")
        return None

    def _agreeing(self, r: Result, rtol: float) -> RowVerdict:
        own = self._cgap(r)
        if r.method == self.reference:
            ev = {"certified": "reference (solver certificate)",
                  "certified bound": "reference (own certificate)",
                  "best feasible": "reference (not certified)"}[self.reference_kind]
            return RowVerdict(r.method, "agrees", ev)
        if self._solver_certified(r):
            return RowVerdict(r.method, "agrees", "solver certificate")
        if math.isfinite(own) and abs(own) <= rtol:
            return RowVerdict(r.method, "agrees", "own certificate")
        if self.reference_certified:
            if math.isfinite(own):
                return RowVerdict(r.method, "agrees", "gap to certified ref.; own cert. loose",
                                  f"agrees with the certified reference, but its own certificate is "
                                  f"loose (cert.gap {own:.2g} > rtol {rtol:g})", loose=True)
            return RowVerdict(r.method, "agrees", "gap to certified ref.")
        return RowVerdict(r.method, "agrees", "not certified",
                          "agrees with the best feasible row; nothing proves either optimal")

    def _certified_bounds(self) -> list[tuple[float, str]]:
        """``(bound, method)`` for every feasible row with a finite certified bound on the
        optimum (``lower_bound`` for a minimisation, ``upper_bound`` for a maximisation)."""
        key = "lower_bound" if self.sense == "min" else "upper_bound"
        out = []
        for r in self.rows:
            b = getattr(r, key)
            if self._feasible(r) and isinstance(b, (int, float)) and math.isfinite(b):
                out.append((float(b), r.method))
        return out

    def _past(self, objective: float, bound: float) -> float:
        """How far ``objective`` is past ``bound`` on the better side, relative to the bound (at
        least the report's scale floor; positive: better than any feasible point can be)."""
        past = bound - objective if self.sense == "min" else objective - bound
        return past / max(abs(bound), self.scale_floor, 1e-12)

    def _past_bound(self, r: Result, rtol: float) -> str:
        """``"; ..."`` when a row's objective is past the tightest bound on the optimum certified
        from any feasible row by more than rtol (its point is feasible only to vtol, and that
        violation is worth more objective than rtol), else ``""``."""
        bounds = self._certified_bounds()
        if not bounds:
            return ""
        b, m = (max if self.sense == "min" else min)(bounds)
        past = self._past(r.objective, b)
        if not past > rtol:
            return ""
        word = "below the lower" if self.sense == "min" else "above the upper"
        how = (f"its violation {r.violation:.3g}, within vtol, buys more than rtol of objective"
               if math.isfinite(r.violation) else "its point is not feasible")
        return (f"; its objective lies {word} bound {b:.10g} certified from {m}'s kernel (by "
                f"{past:.2g}), which no feasible point passes: {how}")

    def _bound_conflicts(self, rtol: float) -> list[str]:
        """The reference contradicts a row's certified bound on the optimum by more than rtol."""
        if self.reference is None:
            return []
        word = "below the lower" if self.sense == "min" else "above the upper"
        return [f"the reference {self.reference} = {self.reference_objective:.10g} lies {word} "
                f"bound {b:.10g} certified from {m}'s kernel (by more than rtol "
                f"{rtol:g}): the reference is not a feasible optimum, or a certificate is wrong"
                for b, m in self._certified_bounds() if self._past(self.reference_objective, b) > rtol]

    def disagreements(self, rtol: float | None = None) -> list[str]:
        """Human-readable reasons, one per row that does not agree (unfinished rows included;
        empty when all agree), and, when the verdict is ``unverified``, why nothing was
        verified."""
        rtol = self._rtol(rtol)
        ran = [r for r in self.rows if r.status is not Status.SKIPPED]
        if not ran:
            return ["no method ran (every method was skipped; see the notes)"]
        out = [f"{v.method}: {v.reason}" for v in self.row_verdicts(rtol)
               if v.outcome in ("disagrees", "unfinished")]
        out += self._bound_conflicts(rtol)
        if self.verdict_at(rtol) == "unverified":
            out.append(self.unverified_reason(rtol))
        return out

    def unverified_reason(self, rtol: float | None = None) -> str:
        """Why the comparison checked nothing (the ``unverified`` verdict)."""
        rtol = self._rtol(rtol)
        ran = [r for r in self.rows if r.status is not Status.SKIPPED]
        if not ran:
            return "no method ran (every method was skipped)"
        done = [r for r in ran if _finished(r)]
        if not done and self.reference is None and not any(
                r.status in (Status.INFEASIBLE, Status.UNBOUNDED) for r in ran):
            return ("no row finished (status optimal or converged): "
                    + ", ".join(f"{r.method} {r.status.value}" for r in ran))
        return ("nothing verifies the agreement: it needs a finished row proved within rtol "
                f"{rtol:g} of the optimum (a solver's optimality certificate or its own certified gap), "
                "or two finished rows of different methods agreeing within rtol")

    def verdict_at(self, rtol: float | None = None) -> str:
        """``"agree"``, ``"agree_partial"``, ``"unverified"`` or ``"disagree"`` at ``rtol``
        (default: the report's)."""
        rtol = self._rtol(rtol)
        vs = [v for v in self.row_verdicts(rtol) if v.outcome != "skipped"]
        if not vs:
            return "unverified"
        if any(v.outcome == "disagrees" for v in vs) or self._bound_conflicts(rtol):
            return "disagree"
        if self.evidence(rtol) is None:
            return "unverified"
        if any(v.outcome == "unfinished" for v in vs):
            return "agree_partial"
        return "agree"

    @property
    def verdict(self) -> str:
        """``"agree"``, ``"agree_partial"``, ``"unverified"`` or ``"disagree"`` at the
        report's ``rtol``."""
        return self.verdict_at()

    @property
    def exit_code(self) -> int:
        """0 agree, 1 disagree, 3 agree among the rows that finished (others timed out or
        failed) or unverified (nothing proves or corroborates the agreement).  2 is the CLI's
        bad-input status."""
        return EXIT_CODES[self.verdict]

    def agree(self, rtol: float | None = None) -> bool:
        """True when every method that ran is feasible and within ``rtol`` of the reference and
        the agreement has evidence (see :meth:`evidence`); an unfinished row, or a lone row
        that nothing certifies, makes it False."""
        return self.verdict_at(rtol) == "agree"

    def assert_agree(self, rtol: float | None = None) -> None:
        """Raise ``AssertionError`` unless the verdict is ``agree``, naming the rows that do not
        agree or why nothing was verified (for use in test suites)."""
        if self.verdict_at(rtol) == "agree":
            return
        bad = self.disagreements(rtol) or [self.unverified_reason(rtol)]
        what = {"unverified": "agreement not verified"}.get(self.verdict_at(rtol), "objectives disagree")
        raise AssertionError(f"{what} on " + self.problem_label + ":\n  " + "\n  ".join(bad)
                             + "\n" + str(self))

    def result(self, method: str) -> Result:
        for r in self.rows:
            if r.method == method:
                return r
        raise KeyError(method)

    def certified_methods(self) -> dict[str, str]:
        """Rows proved near-optimal, with how: ``solver certificate`` or ``own certificate``."""
        out = {}
        for r in self.rows:
            if not self._feasible(r):
                continue
            if not _finished(r):
                continue
            if self._solver_certified(r):
                out[r.method] = "solver certificate"
            elif abs(self._cgap(r)) <= self.rtol:
                out[r.method] = f"own certificate, cert.gap {self._cgap(r):.2g}"
        return out

    def fastest_agreeing(self) -> Result | None:
        """The quickest row that agrees (total time: compile + solve)."""
        best = None
        for v in self.row_verdicts():
            if v.outcome != "agrees":
                continue
            r = self.result(v.method)
            if best is None or _seconds(r) < _seconds(best):
                best = r
        return best

    def summary(self) -> list[str]:
        """The summary lines: the fastest row that agreed and which rows are certified."""
        out = []
        fast = self.fastest_agreeing()
        if fast is not None:
            out.append(f"fastest that agreed: {fast.method} ({_seconds(fast):.3g} s)")
        cert = self.certified_methods()
        proofs = [r.method for r in self.rows if r.status in (Status.INFEASIBLE, Status.UNBOUNDED)
                  and _is_certifying(r)] if self.reference is None else []
        if cert:
            out.append("certified: " + ", ".join(f"{m} ({how})" for m, how in cert.items()))
        elif proofs:
            out.append("certified: " + ", ".join(
                f"{m} ({self.result(m).status.value}: its status is a proof)" for m in proofs))
        elif self.reference is not None:
            out.append("certified: none (no row is proved optimal; agreement rests on the objectives alone)")
        else:
            out.append("certified: none")
        loose = [v for v in self.row_verdicts() if v.loose]
        if loose:
            out.append("own certificate loose: " + ", ".join(
                f"{v.method} (cert.gap {self._cgap(self.result(v.method)):.2g})" for v in loose)
                + f" > rtol {self.rtol:g}; these rows agree only through the certified reference")
        return out

    @staticmethod
    def legend() -> str:
        """Plain-words explanation of every column, the fingerprint and the verdicts."""
        return LEGEND

    # ------------------------------------------------------------------ output
    def table(self) -> list[dict[str, Any]]:
        """One dict per row: the report's columns (scalars only).  ``formulation`` is the
        plain label the table prints; ``formulation_id`` the solver's own."""
        verdicts = {v.method: v for v in self.row_verdicts()}
        rows = []
        for r in self.rows:
            v = verdicts.get(r.method)
            rows.append({
                "method": r.method, "formulation": plain_formulation(r.formulation),
                "formulation_id": r.formulation, "solver": r.solver,
                "status": r.status.value, "objective": r.objective,
                "gap": self.gaps.get(r.method, math.nan), "violation": r.violation,
                "min_eig": r.min_eig, "rank": r.rank, "size": r.size or "",
                "compile_s": r.compile_time, "solve_s": r.solve_time, "time_s": r.time,
                "iterations": r.iterations,
                "cert_gap": self._cgap(r),
                "outcome": v.outcome if v else "", "verdict": v.label if v else "",
                "message": r.message,
            })
        return rows

    _HEAD = ["method", "formulation", "solver", "status", "objective", "rel.gap", "cert.gap",
             "viol", "min_eig", "rank", "size", "compile s", "solve s", "iter", "verdict"]

    def _cells(self) -> list[list[str]]:
        lines = []
        for t in self.table():
            skipped = t["status"] == "skipped"
            failed = t["status"] in ("skipped", "error", "timeout")
            lines.append([
                t["method"], t["formulation"], t["solver"], t["status"], _num(t["objective"], 10),
                _num(t["gap"], 2, signed=True), _num(t["cert_gap"], 2), _num(t["violation"], 2),
                _num(t["min_eig"], 2), "" if skipped or t["status"] in ("error", "timeout") and
                not t["rank"] else str(t["rank"]), t["size"],
                _num(t["compile_s"] or (math.nan if failed else 0.0), 3),
                _num(t["solve_s"] or (math.nan if failed else 0.0), 3),
                "" if t["iterations"] is None else str(t["iterations"]), t["verdict"],
            ])
        return lines

    def _footer(self) -> list[str]:
        out = []
        if self.reference is not None:
            how = {"certified": "certified optimum",
                   "certified bound": "certified by its gradient bound; no conic certificate",
                   "best feasible": "best feasible objective; nothing certified it"}[self.reference_kind]
            out.append(f"reference: {self.reference} ({how}) = {self.reference_objective:.10g}")
        elif self._status_proof() is not None:
            out.append(f"reference: none ({self._status_proof().method} certified the problem unbounded)")
        else:
            out.append("reference: none (no finished feasible row)")
        if self.scale_floor and math.isfinite(self.reference_objective) \
                and abs(self.reference_objective) < self.scale_floor:
            out.append(self.scale_note())
        ev = self.evidence()
        if ev is not None:
            out.append(f"evidence: {ev}")
        out += self.summary()
        notes = [f"{r.method}: {r.message}" for r in self.rows
                 if r.status in (Status.SKIPPED, Status.ERROR, Status.TIMEOUT)
                 or (not r.ok and r.message)]
        notes += [f"{r.method}: certificate: {r.certificate_note}" for r in self.rows
                  if r.certificate_note]
        notes += [f"{r.method}: run with gap_tol {r.extras[GAP_ASKED]:g} = rtol / 2 (its default is "
                  f"looser; give options={{'{r.method}': {{'gap_tol': ...}}}} to choose)"
                  for r in self.rows if isinstance(r.extras.get(GAP_ASKED), float)]
        if self.write_error:
            notes.append(self.write_error)
        if notes:
            out.append("notes:")
            out += ["  " + n for n in notes]
        if not self.complete:
            out.append("INCOMPLETE: the comparison was interrupted; these are the finished rows")
        return out

    def verdict_line(self) -> str:
        """``agree (rtol R): yes`` / ``... among the N that finished; M timed out`` /
        ``unverified ...`` / ``NO``."""
        v = self.verdict
        if v == "agree":
            return f"agree (rtol {self.rtol:g}): yes"
        if v == "agree_partial":
            vs = [x for x in self.row_verdicts() if x.outcome != "skipped"]
            n = sum(x.outcome == "agrees" for x in vs)
            def count(status: Status) -> int:
                return sum(x.outcome == "unfinished" and self.result(x.method).status is status for x in vs)

            timed, rough, short = count(Status.TIMEOUT), count(Status.OPTIMAL_INACCURATE), count(Status.MAX_ITER)
            failed = sum(x.outcome == "unfinished" for x in vs) - timed - rough - short
            parts = ([f"{timed} timed out"] if timed else []) + ([f"{failed} failed"] if failed else []) + (
                [f"{rough} inaccurate"] if rough else []) + ([f"{short} stopped at max_iter"] if short else [])
            return (f"agree (rtol {self.rtol:g}): yes among the {n} that finished; " + ", ".join(parts)
                    + " (exit status 3)")
        if v == "unverified":
            return f"agree (rtol {self.rtol:g}): unverified (nothing was checked; exit status 3)"
        return f"agree (rtol {self.rtol:g}): NO"

    def __str__(self) -> str:
        out = [f"{self.problem_label}   [{self.sense}imise, fingerprint {self.fingerprint}]"]
        out += render_table(self._HEAD, self._cells(), rule=True)
        out += self._footer()
        out.append(self.verdict_line())
        bad = self.disagreements()
        if bad:
            out += ["  " + b for b in bad]
        return "\n".join(out)

    def to_markdown(self) -> str:
        """The report as a GitHub-flavoured Markdown table with the verdict below it."""
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        out = [f"**{esc(self.problem_label)}** ({self.sense}imise, fingerprint `{self.fingerprint}`)", "",
               "| " + " | ".join(self._HEAD) + " |",
               "|" + "|".join("---:" if h not in ("method", "formulation", "solver", "status", "size", "verdict")
                              else "---" for h in self._HEAD) + "|"]
        out += ["| " + " | ".join(esc(c) for c in cells) + " |" for cells in self._cells()]
        out.append("")
        out += [("- " + esc(l.strip())) if not l.startswith("  ") else ("  - " + esc(l.strip()))
                for l in self._footer()]
        line = self.verdict_line()
        head, _, tail = line.partition(": ")
        out.append(f"- {head}: **{tail}**")
        out += [f"  - {esc(v)}" for v in self.disagreements()]
        return "\n".join(out) + "\n"

    def to_frame(self):
        """The :meth:`table` as a ``pandas.DataFrame`` (pandas is an optional dependency)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("Report.to_frame needs pandas (pip install pandas)") from exc
        return pd.DataFrame(self.table()).set_index("method")

    def to_dict(self, include_history: bool = True) -> dict[str, Any]:
        """JSON-friendly dict; :meth:`from_dict` reads it back."""
        import numpy as np

        verdicts = {v.method: v for v in self.row_verdicts()}
        rows = []
        for r in self.rows:
            d = {k: _json_float(v) for k, v in r.summary().items()}
            d["gap"] = _json_float(self.gaps.get(r.method, math.nan))
            d["verdict"] = verdicts[r.method].outcome
            d["evidence"] = verdicts[r.method].evidence
            # the typed fields (size aside, which summary() gives) stay where earlier versions
            # wrote them, in "extras", so that older readers still find them
            d["extras"] = _jsonable({**r.extras.own(), **{k: getattr(r, k) for k in TYPED_EXTRAS
                                                          if k != "size" and getattr(r, k) is not None}})
            if include_history and r.history:
                # a history is lists of numbers (its reader checks that): flags as 0 / 1
                d["history"] = _jsonable({k: [int(x) if isinstance(x, (bool, np.bool_)) else x
                                              for x in v] if isinstance(v, (list, tuple)) else v
                                          for k, v in r.history.items()})
            rows.append(d)
        verdict = self.verdict
        return {
            "format": JSON_FORMAT,
            "kernelforms_version": self.version,
            "problem": self.problem_label,
            "params": _jsonable(self.problem_params),
            "fingerprint": self.fingerprint,
            "sense": self.sense,
            "seed": seed_to_json(self.seed),
            "rtol": self.rtol,
            "vtol": self.vtol,
            "time_limit": _json_float(self.time_limit),
            "recipe": _jsonable(self.recipe),
            "complete": self.complete,
            "reference": self.reference,
            "reference_kind": self.reference_kind,
            "reference_objective": _json_float(self.reference_objective),
            "objective_scale": self.objective_scale,
            "evidence": self.evidence(),
            "agree": verdict == "agree",
            "verdict": verdict,
            "exit_code": EXIT_CODES[verdict],
            "rows": rows,
        }

    def to_json(self, path: str | os.PathLike | None = None, indent: int = 2,
                include_history: bool = True) -> str:
        """The report as JSON text; with ``path`` also written atomically (temp file + rename).

        Raises :class:`ReportWriteError` (a :class:`~kernelforms.errors.KernelformsError`
        and an ``OSError``) naming the path when it cannot be written; its ``text`` holds
        the JSON.
        """
        text = json.dumps(self.to_dict(include_history), indent=indent)
        if path is not None:
            atomic_write(path, text)
        return text

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "report") -> "Report":
        """Rebuild a report (without kernels) from :meth:`to_dict` output.

        Raises :class:`~kernelforms.errors.DataError` naming ``source`` and the field when
        ``data`` is not a report.
        """
        bad = lambda where, what, got: DataError(  # noqa: E731
            f"{source} is not a valid kernelforms report: {where} must be {what}; got {_short(got)}")
        if not isinstance(data, dict):
            raise bad("the top level", f"a JSON object (format {JSON_FORMAT})", data)
        if data.get("format", JSON_FORMAT) != JSON_FORMAT:
            raise bad("'format'", repr(JSON_FORMAT), data.get("format"))
        for key in ("problem", "fingerprint"):
            if not isinstance(data.get(key), str):
                raise bad(repr(key), "a string", data.get(key))
        if data.get("sense") not in ("min", "max"):
            raise bad("'sense'", "'min' or 'max'", data.get("sense"))
        if not isinstance(data.get("rows"), list):
            raise bad("'rows'", "a list", data.get("rows"))
        for key in ("params", "recipe"):
            if data.get(key) is not None and not isinstance(data[key], dict):
                raise bad(repr(key), "an object or null", data[key])
        rows = []
        for k, d in enumerate(data["rows"]):
            where = f"rows[{k}]"
            if not isinstance(d, dict):
                raise bad(where, "an object", d)
            if not isinstance(d.get("method"), str):
                raise bad(where + ".method", "a string", d.get("method"))
            try:
                status = Status(d.get("status"))
            except ValueError:
                raise bad(where + ".status", "one of " + ", ".join(s.value for s in Status),
                          d.get("status")) from None
            num = lambda key, default=math.nan: _field_float(d, key, default, where, bad)  # noqa: E731
            for key in ("extras", "history"):
                if d.get(key) is not None and not isinstance(d[key], dict):
                    raise bad(f"{where}.{key}", "an object or null", d[key])
            for key in ("formulation", "solver", "message"):
                if d.get(key) is not None and not isinstance(d[key], str):
                    raise bad(f"{where}.{key}", "a string", d[key])
            it = d.get("iterations")
            if it is not None and (isinstance(it, bool) or not isinstance(it, int)):
                raise bad(f"{where}.iterations", "an integer or null", it)
            rank = d.get("rank") or 0
            if isinstance(rank, bool) or not isinstance(rank, int):
                raise bad(f"{where}.rank", "an integer", rank)
            # the typed fields: in "extras" (every version so far) or beside them ("size");
            # Result lifts them out of extras
            extras = dict(d.get("extras") or {})
            for key in TYPED_EXTRAS:
                if d.get(key) is not None:
                    extras[key] = d[key]
            history = {}
            for hk, hv in (d.get("history") or {}).items():
                if not isinstance(hv, list):
                    raise bad(f"{where}.history.{hk}", "a list of numbers", hv)
                history[hk] = [_field_float({"x": x}, "x", math.nan, f"{where}.history.{hk}", bad)
                               for x in hv]
            rows.append(Result(
                method=d["method"], status=status,
                objective=num("objective"), violation=num("violation"),
                min_eig=num("min_eig"), rank=rank, time=num("time", 0.0),
                compile_time=num("compile_time", 0.0), solve_time=num("solve_time", 0.0),
                iterations=it, history=history,
                formulation=d.get("formulation") or "", solver=d.get("solver") or "",
                message=d.get("message") or "", extras=extras))
        top = lambda key, default=math.nan: _field_float(data, key, default, "the top level", bad)  # noqa: E731
        try:
            rtol = check_tolerance("rtol", data.get("rtol", 1e-4), source, DataError)
            vtol = check_tolerance("vtol", data.get("vtol", DEFAULT_VTOL), source, DataError)
            scale = check_tolerance("objective_scale", data.get("objective_scale", 0.0), source, DataError)
        except DataError as exc:
            raise DataError(f"{source} is not a valid kernelforms report: {exc}") from None
        tl = data.get("time_limit")
        rep = cls(problem_label=data["problem"], problem_params=dict(data.get("params") or {}),
                  fingerprint=data["fingerprint"], sense=data["sense"], rows=rows,
                  rtol=rtol, vtol=vtol, seed=data.get("seed", 0),
                  version=str(data.get("kernelforms_version", "")),
                  complete=bool(data.get("complete", True)), recipe=data.get("recipe"),
                  time_limit=None if tl is None else top("time_limit"), objective_scale=scale)
        # keep the stored verdict on the reference (it was chosen with the live methods)
        ref = data.get("reference")
        if ref is not None and ref not in {r.method for r in rows}:
            raise bad("'reference'", "the method of one of the rows, or null", ref)
        kind = data.get("reference_kind", rep.reference_kind)
        if kind not in ("certified", "certified bound", "best feasible", "none"):
            raise bad("'reference_kind'", "'certified', 'certified bound', 'best feasible' or 'none'", kind)
        if (ref is None) != (kind == "none"):
            raise bad("'reference_kind'", "'none' exactly when 'reference' is null", kind)
        rep.reference, rep.reference_kind = ref, kind
        rep.reference_objective = top("reference_objective")
        rep.gaps = {}
        for k, r in enumerate(data["rows"]):
            if r.get("gap") is not None:
                rep.gaps[r["method"]] = _field_float(r, "gap", math.nan, f"rows[{k}]", bad)
        for r in rep.rows:  # rows with an objective always have a gap (verdicts need it)
            if r.ok and rep.reference is not None and r.method not in rep.gaps:
                rep.gaps[r.method] = relative_gap(r.objective, rep.reference_objective, rep.sense,
                                                  rep.scale_floor)
        return rep

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike) -> "Report":
        """Read a report from JSON text or from a file path.

        Raises :class:`~kernelforms.errors.DataError` naming the file (or "the JSON text")
        when it cannot be read, is not UTF-8, is not valid (e.g. truncated) JSON, or is not a
        report.
        """
        if isinstance(text_or_path, (bytes, bytearray)):
            raw, source = bytes(text_or_path), "the JSON text"
        elif isinstance(text_or_path, str) and text_or_path.lstrip().startswith(("{", "[")):
            raw, source = None, "the JSON text"
            s = text_or_path
        elif isinstance(text_or_path, (str, os.PathLike)):
            path = os.fspath(text_or_path)
            source = f"report file {path!r}"
            if not str(path).strip():
                raise DataError("Report.from_json needs JSON text or a file path; got an empty string")
            try:
                raw = Path(path).read_bytes()
            except OSError as exc:
                raise DataError(f"cannot read {source}: {exc.strerror or exc}") from None
        else:
            raise DataError(f"Report.from_json needs JSON text or a file path; got {type(text_or_path).__name__}")
        if raw is not None:
            s = decode_utf8(raw, source)
        return cls.from_dict(loads_json(s, source), source=source)


# ---------------------------------------------------------------------- JSON input
def decode_utf8(raw: bytes, source: str) -> str:
    """``raw`` as text, or a :class:`DataError` naming ``source`` (invalid UTF-8)."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{source} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
                        "it is not a file kernelforms wrote") from None


def loads_json(text: str, source: str) -> Any:
    """``json.loads`` with every failure a :class:`DataError` naming ``source``: invalid or
    truncated JSON, numbers too long to convert, nesting too deep."""
    if not text.strip():
        raise DataError(f"{source} is empty (no JSON)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        cut = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        trunc = " (truncated?)" if cut else ""
        raise DataError(f"{source} is not valid JSON{trunc}: {exc.msg} at line {exc.lineno} "
                        f"column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        import re

        m = re.search(r"value has (\d+) digits", str(exc))
        why = (f"it holds a number of {m.group(1)} digits, too long to read (kernelforms writes "
               "ordinary floats)" if m else str(exc) or type(exc).__name__)
        raise DataError(f"{source} is not valid kernelforms JSON: {why}") from None


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:60] + f"... ({len(s)} characters)"


def _field_float(d: dict, key: str, default: float, where: str, bad: Any) -> float:
    v = d.get(key)
    if v is None:
        return default
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad(f"{where}.{key}" if key != "x" else where, "a number", v)
    try:
        return float(v)
    except OverflowError:
        raise bad(f"{where}.{key}", "a number of float range", v) from None


# ---------------------------------------------------------------------- output files
def _umask() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # not thread-safe, hence /proc first
    os.umask(old)
    return old


def check_writable(path: str | os.PathLike, what: str = "json_path") -> Path:
    """Refuse an output path that cannot be written, before any work.

    Checks that ``path`` is not a directory, that its directory exists and that a file can
    be created there (a temporary file is created and removed), and that an existing file
    is writable.  Returns the path as a :class:`~pathlib.Path`.

    Raises
    ------
    OptionError
        Naming ``what`` (the option, e.g. ``"--json"``), the path and the reason.
    """
    try:
        raw = os.fspath(path)
        p = Path(raw)
    except TypeError:
        raise OptionError(f"The {what!r} option must be a file path (str or os.PathLike). "
                          f"Got {path!r} instead.") from None
    # the path as given: Path("") is ".", which would be reported as "a directory"
    s = raw if isinstance(raw, str) else str(p)

    def fail(why: str) -> OptionError:
        return OptionError(f"The {what!r} option cannot be written: {s!r} {why}. "
                           "Give a file path in an existing, writable directory.")

    if not s.strip() or "\x00" in s:
        raise fail("is not a file path")
    if p.is_dir():
        raise fail("is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise fail(f"is in a directory that does not exist ({str(parent)!r})")
    if not parent.is_dir():
        raise fail(f"is under {str(parent)!r}, which is not a directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise fail("exists and is read-only")
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".kernelforms-check-", suffix=".tmp")
    except OSError as exc:
        raise fail(f"cannot be created ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)
    return p


def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename,
    so that a reader (or a crash) never sees half a file (:func:`atomic_file`).

    Raises :class:`ReportWriteError` naming the path (with the ``text``) when the write fails.
    """
    atomic_file(path, lambda fh: fh.write(text), text=text)


def atomic_file(path: str | os.PathLike, write: Any, *, binary: bool = False,
                text: str | None = None) -> None:
    """Call ``write(fh)`` on a temporary file in the directory of ``path``, then rename it to
    ``path``: a reader (or a crash, or a full disk) never sees half a file, and a failed write
    leaves the previous content. The one way every file of the package is written (reports,
    baselines, tables, figures, factors).

    A new file gets the permissions of an ordinary ``open()`` (``0o666`` minus the umask); an
    existing file keeps its own.  ``fh`` is opened in binary mode with ``binary``, else as
    UTF-8 text.  Raises :class:`ReportWriteError` naming the path (and carrying ``text``, what
    would have been written, when given) when the write fails.
    """
    import tempfile

    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except OSError:
            mode = 0o666 & ~_umask()
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".kernelforms-", suffix=".tmp")
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            write(fh)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ReportWriteError(f"could not write {path!r}: {exc.strerror or exc}", path, text) from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


# ---------------------------------------------------------------------- JSON output
def seed_to_json(seed: Any) -> Any:
    """A seed as JSON: ints as ints, ``None`` as null, a ``numpy.random.Generator`` as
    ``{"generator": "PCG64", "state": {...}}`` (its bit generator's state, enough to rebuild
    it), anything else as its repr."""
    import numpy as np

    if seed is None or isinstance(seed, (bool, str)):
        return seed
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    if isinstance(seed, dict):
        return _jsonable(seed)
    if isinstance(seed, np.random.Generator):
        bg = seed.bit_generator
        return {"generator": type(bg).__name__, "state": _jsonable(bg.state)}
    if isinstance(seed, np.random.BitGenerator):
        return {"generator": type(seed).__name__, "state": _jsonable(seed.state)}
    return repr(seed)


def _cert_gap(r: Result) -> float:
    v = math.nan if r.certified_gap is None else r.certified_gap
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _seconds(r: Result) -> float:
    return r.time or (r.compile_time + r.solve_time)


def _json_float(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _jsonable(v: Any) -> Any:
    """Plain JSON types from numpy scalars / arrays / tuples; other objects as their repr."""
    import numpy as np

    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return _json_float(float(v))
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist()) if v.size <= 10_000 else f"<array {v.shape}>"
    if isinstance(v, np.random.Generator):
        return seed_to_json(v)
    return repr(v)


def _num(v: Any, digits: int, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:+.{digits}g}" if signed else f"{v:.{digits}g}"


def warn_write(path: Any, exc: BaseException) -> str:
    """Warn (:class:`ReportWriteWarning`) that ``path`` could not be written; returns the note."""
    note = f"could not write the report to {os.fspath(path)!r}: {exc}; the report is returned"
    warnings.warn(note, ReportWriteWarning, stacklevel=3)
    return note
