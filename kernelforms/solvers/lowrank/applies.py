"""What lowrank accepts (its capabilities, as data), why it does not apply (worded from the
mismatch), its oracle and its default rank."""

from __future__ import annotations

from typing import Any

from ...errors import SolverError
from ...model import PSD, Basis, Capabilities, Range
from ...model.oracle import Oracle, oracle
from ...problems.base import rank_rule

__all__ = ["CAPABILITIES", "build_model", "default_rank", "reason"]

#: what lowrank accepts: K PSD or K = B Y B^T, either sense, no divergence, any constraint
#: rows, smooth losses (the sentences are lowrank's own, :func:`reason`)
CAPABILITIES = Capabilities(forms=(PSD, Basis), senses=("min", "max"), loss_property="smooth",
                            loss_word="smooth")


def reason(decl: Any) -> str | None:
    """Why the factored solver does not apply to a declaration (None when it does): the
    mismatch of :data:`CAPABILITIES`, worded."""
    miss = CAPABILITIES.mismatch(decl)
    if miss is None:
        return None
    if isinstance(decl.form, Range) or decl.divergence is not None:
        div = (f" and the {decl.divergence.kind} divergence D(K, K0)" if decl.divergence is not None
               else "")
        return ("lowrank minimises smooth functions of linear maps of K = G G^T (K PSD or "
                f"K = B Y B^T); this problem is stated over range(K) in range(K0){div}, a spectral "
                "term (log det / matrix log) that is infinite off range(K0) and at singular K, so "
                "L-BFGS on a factor does not apply; use 'burg' or 'vonneumann' (Bregman "
                "projections) or a conic method")
    if miss.what == "loss_property":
        t = miss.term
        return (f"lowrank needs smooth loss terms (L-BFGS on K = G G^T); this problem has a "
                f"{t.loss.name} loss term ({t.describe()}), and the {t.loss.name} loss is not "
                f"differentiable, so L-BFGS does not apply; use 'smo', 'bcd' or a conic method")
    return (CAPABILITIES.reason(decl, "lowrank handles K PSD or K = B Y B^T")
            or CAPABILITIES.loss_reason(decl, "lowrank"))


def build_model(problem: Any) -> Oracle:
    """The factored oracle of a problem's declaration (:func:`kernelforms.model.oracle`), or
    ``SolverError`` with the reason lowrank does not apply."""
    why = reason(problem.declaration)
    if why is not None:
        raise SolverError(f"lowrank: {why}")
    return oracle(problem.declaration)


def default_rank(problem: Any) -> int:
    """``max(problem.default_rank(), rank_rule(m) + 1)``, capped at the size of the PSD block.

    ``m`` counts the declaration's loss and constraint rows; ``rank_rule(m) + 1`` is the
    smallest ``r`` with ``r (r + 1) / 2 > m`` (see the module notes).
    """
    decl = problem.declaration
    cap = int(getattr(decl.form, "block", decl.n))
    m = decl.n_loss_rows + decl.n_constraint_rows
    return int(max(1, min(cap, max(problem.default_rank(), rank_rule(m, 10**9) + 1))))
