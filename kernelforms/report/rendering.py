"""How a :class:`~kernelforms.report.Report` reads: plain formulation labels, the legend,
the text table, Markdown and a pandas frame."""

from __future__ import annotations

import math
from typing import Any

from ..result import Status
from ..util import render_table
from .verdict import _is_certifying, _seconds


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




def _num(v: Any, digits: int, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:+.{digits}g}" if signed else f"{v:.{digits}g}"


class Rendering:
    """The output half of :class:`~kernelforms.report.Report`: summary lines, legend, table,
    text, Markdown, pandas."""

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
        notes += [f"{r.method}: run with gap_tol {r.gap_tol_asked:g} = rtol / 2 (its default is "
                  f"looser; give options={{'{r.method}': {{'gap_tol': ...}}}} to choose)"
                  for r in self.rows if r.gap_tol_asked is not None]
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
