"""Verdicts of a :class:`~kernelforms.report.Report`: tolerances, scales, each row's outcome and evidence.

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

import math
from dataclasses import dataclass
from typing import Any

from ..errors import KernelformsError, OptionError
from ..result import Result, Status

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



#: the report verdicts and the exit status of ``kernelforms compare`` for each
#: (2 is the CLI's bad-input status, 130 an interruption); ``unverified``: nothing was checked
EXIT_CODES = {"agree": 0, "disagree": 1, "agree_partial": 3, "unverified": 3}


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
    (``Result.solves``, e.g. SimpleNPKL's added bound on tr(K^p)), else ``""``."""
    return f"; by design it solves {r.solves}, not this problem" if r.solves else ""


def _is_certifying(r: Result) -> bool:
    if r.certifying is not None:
        return bool(r.certifying)
    from ..methods import get_method

    try:
        return bool(get_method(r.method).certifying)
    except (KernelformsError, TypeError):
        return False



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


def _stopped_short(r: Result) -> str:
    """Why an unfinished row stopped short, in words."""
    if r.status is Status.OPTIMAL_INACCURATE and r.claimed_status is Status.CONVERGED:
        return "its stopping rule was met, but its point is not certified within the method's tolerance"
    return _STOPPED_SHORT.get(r.status, f"status {r.status.value}")


def _done_elsewhere(r: Result) -> bool:
    """A row that finished the other problem it solves by design (``Result.solves``:
    SimpleNPKL met its stopping rule on the bounded problem): off the optimum it disagrees,
    it did not stop short."""
    return r.ok and bool(r.solves) and r.claimed_status is Status.CONVERGED


def _kind(r: Result) -> Any:
    """What makes two rows different methods: their formulation and solver (the method
    string when neither is known); the same method twice is not a second opinion."""
    return (r.formulation, r.solver) if (r.formulation or r.solver) else r.method



def _cert_gap(r: Result) -> float:
    v = math.nan if r.certified_gap is None else r.certified_gap
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _seconds(r: Result) -> float:
    return r.time or (r.compile_time + r.solve_time)


class Verdicts:
    """The verdict half of :class:`~kernelforms.report.Report` (its rows, reference, rtol,
    vtol and objective scale are the report's fields): the reference, each row's
    :class:`RowVerdict`, the evidence and the verdict."""

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
                if not (_finished(r) or _done_elsewhere(r)):
                    out.append(RowVerdict(r.method, "unfinished", r.status.value,
                                          f"{_stopped_short(r)}; {why}"))
                else:
                    out.append(RowVerdict(r.method, "disagrees", "infeasible", why + _other_problem(r)))
            elif abs(self.gaps[r.method]) > rtol:
                why = (f"relative gap {self.gaps[r.method]:+.3g} beyond rtol {rtol:g}"
                       + self._past_bound(r, rtol))
                if not (_finished(r) or _done_elsewhere(r)):
                    out.append(RowVerdict(r.method, "unfinished", r.status.value,
                                          f"{_stopped_short(r)}; {why}"))
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
