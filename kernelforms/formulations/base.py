"""The formulation contract: ``compile(problem) -> Compiled`` and ``recover(compiled) -> kernel``.

Modelled on CVXPY's reductions: compiling returns the program together with the
data needed to map a solution back, and recovery is a pure function of those.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..result import LowRank


@dataclass(frozen=True)
class ProgramSize:
    """The size of a conic program as a student reads it."""

    psd_blocks: tuple[int, ...] = ()
    soc_sizes: tuple[int, ...] = ()
    n_variables: int = 0
    n_linear: int = 0
    rank_A: int | None = None

    def __str__(self) -> str:
        parts = []
        if self.psd_blocks:
            parts.append("PSD " + "+".join(map(str, self.psd_blocks)))
        if self.soc_sizes:
            parts.append(_compact("SOC", self.soc_sizes))
        parts.append(f"{self.n_variables} vars")
        parts.append(f"{self.n_linear} lin")
        if self.rank_A is not None:
            parts.append(f"rank(A)={self.rank_A}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"psd_blocks": list(self.psd_blocks), "soc_sizes": list(self.soc_sizes),
                "n_variables": self.n_variables, "n_linear": self.n_linear, "rank_A": self.rank_A}


def _compact(label: str, sizes: tuple[int, ...]) -> str:
    if len(sizes) <= 3:
        return f"{label} " + "+".join(map(str, sizes))
    return f"{len(sizes)}x{label} (max {max(sizes)})"


def program_size(program: Any, rank_A: int | None = None) -> ProgramSize:
    """Count the PSD blocks, second-order cones, scalar variables and linear rows of a
    ``cvxpy.Problem`` as the user wrote it (before CVXPY's own reductions)."""
    import cvxpy as cp
    from cvxpy.constraints import PSD, SOC, Equality, Inequality, NonNeg, NonPos, Zero

    psd, soc, lin = [], [], 0
    for c in program.constraints:
        if isinstance(c, PSD):
            psd.append(int(c.args[0].shape[0]))
        elif isinstance(c, SOC):
            soc.extend([int(c.args[1].size // max(c.args[0].size, 1)) + 1] * max(c.args[0].size, 1))
        elif isinstance(c, (Equality, Inequality, Zero, NonNeg, NonPos)):
            lin += int(c.size)
    for v in program.variables():
        if v.attributes.get("PSD") or v.attributes.get("NSD"):
            psd.append(int(v.shape[0]))
    nvar = int(sum(v.size for v in program.variables()))
    return ProgramSize(tuple(psd), tuple(soc), nvar, lin, rank_A)


@dataclass(kw_only=True)
class FormulationInverse:
    """What a compiled program needs to be mapped back: the part every formulation shares.

    Each formulation subclasses it with typed fields for the variables, bases and maps it
    records (:class:`~kernelforms.formulations.full_sdp.FullSDPInverse`,
    :class:`~kernelforms.formulations.dual_sdp.DualInverse`,
    :class:`~kernelforms.formulations.sqlp.SQLPInverse`,
    :class:`~kernelforms.formulations.schur_sdp.SchurInverse`).  (Not the chain of
    reductions' :class:`kernelforms.model.chain.Inverse`, which maps a reduced declaration's
    kernel back to the original's.)

    ``conflict``: the reason, when compiling proved the constraints contradictory (the
    program is then ``0 == 1`` and there is no kernel to recover).  ``recovery_note``: set
    by :meth:`Formulation.recover` when the kernel came another way than the formulation's
    own map (the dual's kernel from the solver's multiplier of ``M PSD``); a solve appends
    it to the row's message.
    """

    conflict: str | None = None
    recovery_note: str | None = None


@dataclass
class Compiled:
    """A compiled program and what recovery needs.

    ``program`` is a ``cvxpy.Problem``; ``inverse`` holds the formulation's own data
    (variables, bases: a :class:`FormulationInverse`); ``size`` describes the program;
    ``notes`` are free remarks shown in reports (e.g. "rank(A) = 54 of 120").
    """

    program: Any
    inverse: FormulationInverse
    size: ProgramSize
    notes: list[str] = field(default_factory=list)


#: conic solvers whose memory is their data plus a few iterates (no dense factorisation)
FIRST_ORDER_SOLVERS = frozenset({"SCS"})


@dataclass(frozen=True)
class ConicData:
    """Rough size of the standard-form conic data ``min c.x, A x + s = b, s in K`` that
    CVXPY builds for a program: nonzeros and rows of ``A``, and the PSD cone sizes."""

    nnz: int
    rows: int
    psd: tuple[int, ...] = ()


#: SCS memory model (fit to peak resident memory, see docs/formulations.md): bytes per
#: nonzero of A (CVXPY's compilation, the solver's copy, and the sparse LDL factor of its
#: linear system), per row (its iterates), per entry of the largest PSD cone (the dense
#: matrix and eigenvector workspace of the projection)
SCS_BYTES_PER_NNZ = 400.0
SCS_BYTES_PER_ROW = 1200.0
SCS_BYTES_PER_PSD_ENTRY = 24.0


def first_order_bytes(data: ConicData) -> int:
    """SCS's memory beyond Python and CVXPY: ``a nnz(A) + b rows + c max_k k^2``."""
    k = max(data.psd, default=0)
    return int(SCS_BYTES_PER_NNZ * data.nnz + SCS_BYTES_PER_ROW * data.rows
               + SCS_BYTES_PER_PSD_ENTRY * k * k)


class Formulation(ABC):
    """A way of writing a problem as a conic program.

    Subclasses set ``name`` (the method string, e.g. ``"sdp"``) and implement
    :meth:`applies_to`, :meth:`compile` and :meth:`recover`.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    #: what the formulation accepts, as data (a :class:`kernelforms.model.Capabilities`:
    #: forms, senses, divergence); None when it decides in ``applies_to`` alone
    capabilities: ClassVar[Any] = None

    @abstractmethod
    def applies_to(self, problem: Any) -> str | None:
        """``None`` when the formulation applies, else the reason it does not."""

    @abstractmethod
    def compile(self, problem: Any, **options: Any) -> Compiled:
        """Build the program."""

    @abstractmethod
    def recover(self, compiled: Compiled) -> LowRank:
        """Map the solved program's variables back to a kernel factor."""

    # ------------------------------------------------------------------ size models
    def kkt_order(self, problem: Any) -> int | None:
        """Order of the dense part of an interior-point KKT system for this program (the
        svec of every PSD block the solver cannot split, plus the unknowns coupled by a
        dense data matrix), or None when unknown.  The automatic solver choice reads it."""
        return None

    def auto_kkt_order(self, problem: Any) -> int | None:
        """The automatic solver choice's limit on :meth:`kkt_order` for ``problem``; None for
        the common one (``AUTO_KKT_ORDER`` of :mod:`kernelforms.solvers.conic`)."""
        return None

    def ipm_memory(self, problem: Any) -> int | None:
        """Bytes an interior-point solver (Clarabel) needs beyond Python and CVXPY: its
        KKT factorisation (the size guard's model); None when unknown."""
        order = self.kkt_order(problem)
        return None if order is None else int(IPM_BYTES_PER_ENTRY * order**2)

    def conic_data(self, problem: Any) -> ConicData | None:
        """Rough size of the standard-form data CVXPY hands the solver (without building
        it), or None when unknown.  The first-order memory model reads it."""
        return None

    def estimate_memory(self, problem: Any, solver: str = "CLARABEL") -> int | None:
        """Estimated bytes the solve needs with ``solver`` beyond the ~0.2 GB of Python,
        NumPy and CVXPY, or None when unknown (used by the size guard).

        SCS (first order): :func:`first_order_bytes` of :meth:`conic_data`; any other conic
        solver is treated as an interior-point method: :meth:`ipm_memory`.
        """
        if str(solver).upper() in FIRST_ORDER_SOLVERS:
            data = self.conic_data(problem)
            return None if data is None else first_order_bytes(data)
        return self.ipm_memory(problem)

    def precise_memory(self, problem: Any, solver: str = "CLARABEL") -> int | None:
        """A sharper estimate, asked for only when :meth:`estimate_memory` is over the limit
        (it may cost a factorisation); the cheap one by default."""
        return self.estimate_memory(problem, solver)

    def recovered_extras(self, compiled: Compiled) -> dict[str, Any]:
        """Extra diagnostics after a solve (e.g. a dual objective); empty by default."""
        return {}

    def duals(self, compiled: Compiled) -> dict[str, Any] | None:
        """The solver's own multipliers mapped back onto the declaration, after a solve:
        ``{"constraints": [...], "losses": [...]}`` with one entry per constraint and per
        loss term of the declaration (in its order), each an array with one value per row
        in the minimisation's sign (``>= 0`` on ``<=`` rows, ``<= 0`` on ``>=`` rows; a
        loss's slopes ``u``, ``l(z) >= u z - l*(u)``) or None where the program has none.
        :func:`kernelforms.certificate.certify` evaluates its bound with them.  None (the
        default) when the formulation does not map its duals."""
        return None

    # ------------------------------------------------------------------ explain / verify
    def explain(self, problem: Any, compiled: Compiled) -> "ProgramDescription":
        """The compiled program in mathematical form, with this instance's numbers
        (rendered by :func:`kernelforms.explain`).  A formulation that does not describe
        itself raises :class:`NotImplementedError`."""
        raise NotImplementedError(f"formulation {self.name!r} does not describe its program "
                                  "(it has no explain())")

    def lift(self, compiled: Compiled, K: np.ndarray) -> "Lift":
        """The program's variables at the point a kernel ``K`` of the problem's form maps to
        (auxiliary epigraph variables tight), for :func:`kernelforms.verify`."""
        raise NotImplementedError(f"formulation {self.name!r} cannot map a kernel to its "
                                  "program's variables (it has no lift())")


def svec_dim(s: int) -> int:
    return s * (s + 1) // 2


#: the automatic choice's limit on the KKT order of a program without loss terms or a
#: divergence (a linear SDP: hard PCP, MVU), where Clarabel was far faster than SCS at every
#: size measured: the full SDP of hard PCP on 63 / 97 merged glass points 3.0 / 30.6 s against
#: SCS's 137 s (max_iter) / a 120 s timeout, on 110 merged heart points (order 8,634) 38.5
#: against 46.3 s; MVU of a 70 / 90-point Swiss roll 8.2 / 35 s against SCS's max_iter after
#: 142 / 227 s (violations 1e-2 / 5e-2); the dual of hard PCP (256 merged points) 12 s against
#: a 300 s timeout.  About 2.4 GB of Clarabel's model.  With losses the common limit stays.
LINEAR_AUTO_ORDER = 9000

#: bytes of Clarabel's peak resident memory per entry of the dense part of its KKT system
#: (order^2), beyond Python and CVXPY; fitted to peaks of full SDPs of P1 (order^2 =
#: 2 svec(n)^2): 41, 182, 558 MB at n = 40, 60, 80 (27-31 bytes per entry; the KKT matrix,
#: its permuted copy and the LDL factor, each sparse with an index per value)
IPM_BYTES_PER_ENTRY = 30


def ipm_order(dense_blocks: tuple[int, ...] = (), coupled: int = 0) -> int:
    """Order ``N`` of the dense part of an interior-point KKT system: ``N^2 = sum_k
    svec(k)^2 + coupled^2``.

    Each PSD block of size ``k`` that the solver cannot split carries a dense scaling
    matrix of order ``k(k+1)/2`` (Clarabel, SDPT3, MOSEK); ``coupled`` scalar unknowns
    tied together through a dense block or a dense data matrix (the entries of the full
    SDP's K, the rows of ``B`` or ``A^{1/2}``) fill a dense factor of that order.  An
    arrow-shaped Schur LMI ``[[I, a], [a^T, nu]]`` is *not* counted as a dense block: its
    sparsity pattern is chordal and Clarabel splits it into 2 x 2 cones by default.
    """
    return int(math.ceil(math.sqrt(sum(svec_dim(k) ** 2 for k in dense_blocks) + coupled**2)))


def ipm_bytes(dense_blocks: tuple[int, ...] = (), coupled: int = 0) -> int:
    """Bytes an interior-point solve needs beyond Python and CVXPY (the size guard's model):
    :data:`IPM_BYTES_PER_ENTRY` ``* N^2`` with ``N`` from :func:`ipm_order`."""
    return int(IPM_BYTES_PER_ENTRY * ipm_order(dense_blocks, coupled) ** 2)


# ---------------------------------------------------------------------------- explain / verify
@dataclass(frozen=True)
class Math:
    """One formula in two spellings: LaTeX (for Markdown, ``$...$``) and plain text (for a
    terminal).  Neither contains a ``|`` (norms are ``\\lVert .\\rVert`` / ``||.||`` is avoided
    in LaTeX so that a formula fits in a Markdown table cell)."""

    latex: str
    text: str


@dataclass(frozen=True)
class Item:
    """A formula and a short plain-words note (its size, what it is)."""

    math: Math
    note: str = ""


@dataclass
class ProgramDescription:
    """A compiled program in mathematical form (:meth:`Formulation.explain`); rendered as
    Markdown or plain text by :mod:`kernelforms.explain`.

    ``variables``: the program's variables with their shapes; ``data``: the symbols of the
    instance the formulation built (factors, shifts, constants) with their values or sizes;
    ``objective``: what is minimised or maximised (``sense``); ``constraints``: each
    constraint as the formulation wrote it, with its row count or cone size; ``cones``: the
    cone blocks and their sizes; ``sizes``: the numbers that drive the solve's cost, in
    order; ``recovery``: the map from the program's variables back to K;
    ``objective_relation``: how the program's objective relates to the problem's (which
    constant, if any, it differs by), the statement :func:`kernelforms.verify` checks.
    """

    method: str
    title: str
    sense: str
    variables: list[Item]
    data: list[Item]
    objective: Math
    constraints: list[Item]
    cones: list[Item]
    sizes: list[tuple[str, Any]]
    recovery: Item
    objective_relation: str
    notes: list[str] = field(default_factory=list)


@dataclass
class Lift:
    """A point of the problem's kernel space written as values of a compiled program's
    variables (:meth:`Formulation.lift`).

    ``values`` maps each CVXPY variable to its value (auxiliary epigraph variables set
    tight); at that point the program's objective equals ``objective_scale * f(K)`` with
    ``f`` the problem's objective (1 for every formulation but the von Neumann full SDP,
    which minimises ``D / s``).
    """

    values: dict[Any, Any]
    objective_scale: float = 1.0

    def assign(self) -> None:
        """Set every variable's ``.value``."""
        for var, val in self.values.items():
            var.value = val


def _fmt(x: float) -> str:
    """A number for a formula: 6 significant digits, no trailing noise."""
    return f"{float(x):.6g}"


def map_math(m: Any, kernel: Math = Math("K", "K"), label: str = "p") -> tuple[Math, str]:
    """``(row formula, note)`` of one row of a linear map of the declaration, with the kernel
    written as ``kernel`` (``K``, ``K'``, ``(B Y B^T)``, ...).  The note gives the index set
    and its size."""
    from ..model import Inner, PairMap, RowKind, TotalSum, Trace

    L, T = kernel.latex, kernel.text
    if isinstance(m, PairMap):
        n = m.size
        if m.is_diagonal:
            return Math(rf"{L}_{{ii}}", f"{T}_ii"), f"i over {n} points"
        if m.is_entries:
            return Math(rf"{L}_{{ij}}", f"{T}_ij"), f"(i, j) over {n} pairs"
        dist = Math(rf"{L}_{{ii}} + {L}_{{jj}} - 2 {L}_{{ij}}", f"{T}_ii + {T}_jj - 2 {T}_ij")
        if m.is_distances:
            return dist, f"(i, j) over {n} pairs"
        nd = int(np.count_nonzero(m.kind == RowKind.DISTANCE))
        return (Math(rf"{L}_{{ij}} \text{{ or }} {dist.latex}", f"{T}_ij or {dist.text}"),
                f"{n - nd} entries and {nd} distances")
    if isinstance(m, Inner):
        return (Math(rf"\langle M, {L}\rangle", f"<M, {T}>"),
                f"M {m.n} x {m.n} with {m.M.nnz} nonzeros")
    if isinstance(m, Trace):
        return Math(rf"\mathrm{{tr}}({L})", f"tr({T})"), "one row"
    if isinstance(m, TotalSum):
        return Math(rf"\mathbf{{1}}^T {L} \mathbf{{1}}", f"1^T {T} 1"), "one row"
    return Math(rf"\mathcal{{A}}({L})_{{{label}}}", f"A({T})_{label}"), m.describe()


def loss_math(loss: Any, z: Math) -> Math:
    """One row's loss at the row value ``z`` (targets ``t_p``, labels ``y_p``), as the loss writes it."""
    return Math(loss.latex(z.latex), loss.text(z.text))


def _weight(w: float) -> tuple[str, str]:
    if w == 1.0:
        return "", ""
    if w == -1.0:
        return "-", "-"
    return _fmt(w) + r" \, ", _fmt(w) + " "


def terms_math(decl: Any, kernel: Math = Math("K", "K")) -> tuple[Math, list[str]]:
    """The declaration's objective (linear terms, losses, divergence) written over ``kernel``,
    and one note per term (its index set)."""
    lat, txt, notes = [], [], []
    for t in decl.linear:
        row, note = map_math(t.map, kernel)
        c = t.coef
        if t.map.size == 1:
            wl, wt = _weight(float(c[0]))
            lat.append(wl + row.latex)
            txt.append(wt + row.text)
        else:
            lat.append(rf"\sum_p c_p \, {row.latex}")
            txt.append(f"sum_p c_p {row.text}")
        if note != "one row":
            notes.append(f"linear term: {note}")
    for t in decl.losses:
        row, note = map_math(t.map, kernel)
        wl, wt = _weight(t.weight)
        lm = loss_math(t.loss, row)
        lat.append(rf"{wl}\sum_{{p}} {lm.latex}")
        txt.append(f"{wt}sum_p {lm.text}")
        notes.append(f"{t.loss.name} loss, weight {_fmt(t.weight)}: {note}")
    if decl.divergence is not None:
        lat.append(rf"{decl.divergence.latex}({kernel.latex}, K_0)")
        txt.append(f"{decl.divergence.describe().split('(')[0]}({kernel.text}, K0)")
        notes.append(f"{decl.divergence.kind} divergence")
    latex = " + ".join(lat).replace("+ -", "- ")
    text = " + ".join(txt).replace("+ -", "- ")
    return Math(latex, text), notes


def constraint_items(decl: Any, kernel: Math = Math("K", "K"), scaled: bool = False) -> list[Item]:
    """The declaration's constraint rows written over ``kernel``, one item per block and sense
    (``scaled``: each row divided by a positive number, as the full SDP does over dense
    functionals)."""
    from ..model import EQ, GE, LE

    out = []
    for c in decl.constraints:
        row, note = map_math(c.map, kernel)
        for sense, lt, tt in ((LE, r"\le", "<="), (GE, r"\ge", ">="), (EQ, "=", "==")):
            k = int(np.count_nonzero(c.sense == sense))
            if not k:
                continue
            b = c.bound[c.sense == sense]
            bl = _fmt(b[0]) if np.all(b == b[0]) else "b_p"
            extra = " (each row scaled by 1 / max(|b_p|, 1e-3 ||a_p||))" if scaled else ""
            rows = f"{k} row" + ("s" if k != 1 else "")
            out.append(Item(Math(f"{row.latex} {lt} {bl}", f"{row.text} {tt} {bl}"),
                            f"{rows}; {note}{extra}" if note != "one row" else rows + extra))
    return out


def count_rows(program: Any) -> tuple[int, int]:
    """``(equality rows, inequality rows)`` of a CVXPY program's linear constraints."""
    from cvxpy.constraints import Equality, Inequality, NonNeg, NonPos, Zero

    eq = sum(int(c.size) for c in program.constraints if isinstance(c, (Equality, Zero)))
    ineq = sum(int(c.size) for c in program.constraints
               if isinstance(c, (Inequality, NonNeg, NonPos)))
    return eq, ineq


def tagged_duals(decl: Any, tags: list, scale: float = 1.0) -> dict[str, Any] | None:
    """:meth:`Formulation.duals` from tagged CVXPY constraints.

    ``tags`` holds ``(index, rows, factor, sense, constraint)``: the constraint
    ``constraint`` states the rows ``rows`` of ``decl.constraints[index]`` with sense
    ``sense``, each row multiplied by ``factor`` (> 0; a scalar or one per row).  CVXPY's
    dual value ``d`` (``L = f + d (g - b)`` for ``==`` and ``<=``, ``f - d (g - b)`` for
    ``>=``, in the sense the program minimises) is the declaration row's multiplier
    ``factor d`` (``-factor d`` on a ``>=`` row), divided by ``scale`` when the program
    minimises ``scale`` times the objective.  None when no constraint has a dual value.
    """
    from ..model import GE

    ys = [np.full(c.map.size, np.nan) for c in decl.constraints]
    seen = False
    for idx, rows, factor, sense, con in tags:
        d = con.dual_value
        if d is None:
            continue
        d = np.asarray(d, dtype=float).ravel() * factor / scale
        ys[idx][rows] = -d if sense == GE else d
        seen = True
    if not seen:
        return None
    return {"constraints": [None if np.any(np.isnan(y)) else y for y in ys],
            "losses": [None] * len(decl.losses)}


def pair_operator(m: Any) -> Any:
    """Sparse ``(n*n, size)`` matrix with ``vec(Phi(lam)) = P @ lam`` (either vec order):
    column ``p`` is ``vec(A_p)`` for row ``p`` of the pair map (entry or distance): the
    dual's ``Phi`` and the full SDP's loss rows."""
    import scipy.sparse as sp

    from ..model import RowKind

    n, i, j = m.n, m.i, m.j
    p = np.arange(m.size)
    dist = m.kind == RowKind.DISTANCE
    ent = ~dist
    diag = ent & (i == j)
    off = ent & (i != j)
    rows = [i[diag] * n + i[diag], (i * n + j)[off], (j * n + i)[off]]
    cols = [p[diag], p[off], p[off]]
    vals = [np.ones(diag.sum()), np.full(2 * off.sum(), 0.5)]
    if np.any(dist):
        a, b, q = i[dist], j[dist], p[dist]
        rows += [a * n + a, b * n + b, a * n + b, b * n + a]
        cols += [q, q, q, q]
        vals += [np.ones(2 * len(q)), -np.ones(2 * len(q))]
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n * n, m.size))
