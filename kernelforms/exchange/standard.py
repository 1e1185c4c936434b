"""The standard conic form of a compiled program, and the way back to its variables.

CVXPY compiles a formulation's ``cvxpy.Problem`` for SCS into

    min  c^T x + offset   s.t.   s = b - A x,   s in K = {0}^z x R_+^l x Q^q1 x ... x S_+^p1 x ... x K_exp^e

with the rows of ``A`` in that cone order (zero, nonnegative, second-order, PSD,
exponential).  A PSD cone of order ``p`` holds the lower triangle of its matrix column
by column, off-diagonal entries scaled by ``sqrt(2)`` (SCS's ``svec``); an exponential
cone row triple ``(u, v, w)`` means ``v exp(u / v) <= w``.  A maximisation is compiled as
the minimisation of its negative: ``sign = -1`` and the problem's own objective is
``sign * (c^T x + offset)``.

:func:`standard_form` returns that data (:class:`ConicForm`); :meth:`ConicForm.assign`
puts a vector ``x`` back into the compiled program's variables (through CVXPY's own
inverse reductions), so that the formulation's ``recover`` turns it into a kernel.  The
SDPA and CBF writers (:mod:`.sdpa`, :mod:`.cbf`) read nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import NotApplicable, OptionError

SQRT2 = math.sqrt(2.0)


@dataclass
class ConicForm:
    """``min c^T x + offset  s.t.  b - A x in K`` (see the module docstring).

    Attributes
    ----------
    c, offset, A, b
        The data (``A`` sparse CSC, ``m x n``).
    zero, nonneg : int
        Rows of the zero cone and of the nonnegative orthant.
    soc, psd : tuple of int
        Sizes of the second-order cones, orders of the PSD cones.
    exp : int
        Number of exponential cones (three rows each).
    sign : int
        ``+1`` for a minimisation, ``-1`` for a maximisation compiled as ``min -f``:
        the problem's objective is ``sign * (c^T x + offset)``.
    meta : dict
        What produced it (method, problem label and fingerprint), written into the files.
    """

    c: np.ndarray
    offset: float
    A: Any
    b: np.ndarray
    zero: int = 0
    nonneg: int = 0
    soc: tuple[int, ...] = ()
    psd: tuple[int, ...] = ()
    exp: int = 0
    sign: int = 1
    meta: dict[str, Any] = field(default_factory=dict)
    # CVXPY's chain and inverse data, to map x back onto the program (not serialised)
    _program: Any = field(default=None, repr=False)
    _chain: Any = field(default=None, repr=False)
    _inverse: Any = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Number of scalar variables."""
        return int(self.c.size)

    @property
    def m(self) -> int:
        """Number of cone rows."""
        return int(self.b.size)

    def cone_rows(self) -> dict[str, tuple[int, int]]:
        """Row range ``[start, stop)`` of each cone family."""
        out, r = {}, 0
        for name, size in (("zero", self.zero), ("nonneg", self.nonneg), ("soc", sum(self.soc)),
                           ("psd", sum(p * (p + 1) // 2 for p in self.psd)), ("exp", 3 * self.exp)):
            out[name] = (r, r + size)
            r += size
        return out

    def objective(self, x: np.ndarray) -> float:
        """The problem's own objective of the program at ``x``: ``sign * (c^T x + offset)``."""
        return float(self.sign * (self.c @ x + self.offset))

    def describe(self) -> str:
        parts = [f"{self.n} variables"]
        if self.zero:
            parts.append(f"{self.zero} equality rows")
        if self.nonneg:
            parts.append(f"{self.nonneg} inequality rows")
        if self.soc:
            parts.append(f"{len(self.soc)} second-order cone(s) (max size {max(self.soc)})")
        if self.psd:
            parts.append("PSD blocks " + "+".join(map(str, self.psd)))
        if self.exp:
            parts.append(f"{self.exp} exponential cone(s)")
        return ", ".join(parts)

    # ------------------------------------------------------------------ back to the program
    def assign(self, x: np.ndarray, y: np.ndarray | None = None) -> None:
        """Set the compiled program's variables from a vector ``x`` of this form (and,
        with ``y``, the constraints' multipliers from the dual vector, in SCS's
        convention: ``A^T y + c = 0``).

        Runs CVXPY's inverse reductions on a solution holding ``x`` (and ``y``), as CVXPY
        does after a solve, so that the formulation's ``recover`` reads the variables'
        ``.value`` (and the constraints' ``.dual_value``, as after an in-process solve).
        """
        from cvxpy.reductions.solution import Solution
        from cvxpy.reductions.solvers.conic_solvers.scs_conif import SCS
        import cvxpy.settings as s

        x = np.asarray(x, dtype=float).ravel()
        if x.size != self.n:
            raise ValueError(f"the solution has {x.size} entries; the program has {self.n} variables")
        if self._chain is None:
            raise ValueError("this ConicForm was not built from a compiled program")
        solver_inv = self._inverse[-1]
        sol = Solution(s.OPTIMAL, float(self.c @ x + solver_inv[s.OFFSET]),
                       {solver_inv[SCS.VAR_ID]: x}, {}, {})
        if y is not None:
            from cvxpy.reductions.solvers import utilities

            y = np.asarray(y, dtype=float).ravel()
            if y.size != self.m:
                raise ValueError(f"the dual has {y.size} entries; the program has {self.m} rows")
            z = self.zero
            sol.dual_vars = (utilities.get_dual_values(y[:z], utilities.extract_dual_value,
                                                       solver_inv[SCS.EQ_CONSTR])
                             | utilities.get_dual_values(y[z:], utilities.extract_dual_value,
                                                         solver_inv[SCS.NEQ_CONSTR]))
        for red, inv in reversed(list(zip(self._chain.reductions[:-1], self._inverse[:-1]))):
            sol = red.invert(sol, inv)
        self._program.unpack(sol)


def standard_form(program: Any, meta: dict[str, Any] | None = None) -> ConicForm:
    """The standard conic form of a ``cvxpy.Problem`` as CVXPY hands it to SCS.

    Raises :class:`~kernelforms.errors.NotApplicable` for what no exchange format here
    holds: power cones, a quadratic objective, variable bounds.
    """
    import cvxpy as cp
    from cvxpy.reductions.flip_objective import FlipObjective
    import cvxpy.settings as s

    data, chain, inverse = program.get_problem_data(cp.SCS, solver_opts={"use_quad_obj": False})
    dims = data["dims"]
    if getattr(dims, "p3d", None):
        raise NotApplicable("the program has power cones, which the exchange formats here do not write")
    if data.get("P") is not None:
        raise NotApplicable("the program has a quadratic objective; the exchange formats need a linear one")
    for key in ("lower_bounds", "upper_bounds"):
        if data.get(key) is not None:
            raise NotApplicable(f"the program has variable bounds ({key}), which are not exported")
    sign = -1 if any(isinstance(r, FlipObjective) for r in chain.reductions) else 1
    A = sp.csc_matrix(data["A"], dtype=float)
    A.sum_duplicates()
    return ConicForm(c=np.asarray(data["c"], dtype=float).ravel(),
                     offset=float(inverse[-1][s.OFFSET]), A=A,
                     b=np.asarray(data["b"], dtype=float).ravel(), zero=int(dims.zero),
                     nonneg=int(dims.nonneg), soc=tuple(int(q) for q in dims.soc),
                     psd=tuple(int(p) for p in dims.psd), exp=int(dims.exp), sign=sign,
                     meta=dict(meta or {}), _program=program, _chain=chain, _inverse=inverse)


def psd_positions(p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row ``i``, column ``j`` (``i >= j``, 0-based) and the factor turning an svec entry
    into the matrix entry (1 on the diagonal, ``1/sqrt(2)`` off it), in SCS's svec order
    (lower triangle, column by column)."""
    p = int(p)
    j = np.repeat(np.arange(p), np.arange(p, 0, -1))
    start = np.concatenate([[0], np.cumsum(np.arange(p, 0, -1))[:-1]]).astype(int)
    i = np.arange(j.size) - start[j] + j
    return i.astype(int), j.astype(int), np.where(i == j, 1.0, 1.0 / SQRT2)


#: bytes a program read from a file is assumed to need per entry of a dense PSD block
#: (the block, CVXPY's affine expression of it, the solver's iterate and the check's copy)
BYTES_PER_PSD_ENTRY = 4 * 8


def memory_guard(path: Any, what: str, nbytes: float, max_memory: Any) -> None:
    """Refuse a file whose declared sizes need more than ``max_memory`` bytes, before any
    allocation (:class:`~kernelforms.errors.DataError` naming the sizes and the fix)."""
    from ..errors import DataError
    from ..solvers.base import parse_max_memory
    from ..util import format_bytes

    limit = parse_max_memory("read_program", max_memory)
    if nbytes > limit:
        raise DataError(f"{path}: {what} would need about {format_bytes(nbytes)}, above max_memory = "
                        f"{format_bytes(limit)}; if the file is right, pass a larger max_memory=")


def _formulation(method: Any) -> Any:
    from ..registry import FORMULATIONS, SOLVERS, load

    if not isinstance(method, str) or not method.strip():
        raise OptionError(f"method must be a conic formulation name such as 'sdp' or 'sqlp'; got {method!r}")
    base = method.strip().lower().partition(":")[0]
    if base in FORMULATIONS:
        return load(FORMULATIONS[base], base)()
    kind = ("a hand-written solver, which compiles no program" if base in SOLVERS
            else "not a known method")
    raise OptionError(f"method {method!r} is {kind}; export takes a conic formulation: "
                      f"{', '.join(FORMULATIONS)}")


def compile_form(problem: Any, method: str, **compile_options: Any) -> tuple[Any, ConicForm]:
    """Compile ``problem`` with the formulation ``method`` and return the compiled program
    and its standard conic form (with the metadata the files carry)."""
    from .._version import __version__

    formulation = _formulation(method)
    reason = formulation.applies_to(problem)
    if reason is not None:
        raise NotApplicable(f"method {formulation.name!r} does not apply to {type(problem).__name__}: {reason}")
    compiled = formulation.compile(problem, **compile_options)
    if not compiled.program.variables():
        raise NotApplicable(f"method {formulation.name!r}: the program was settled while compiling ("
                            + "; ".join(compiled.notes) + "); there is nothing to export")
    meta = {"kernelforms": __version__, "method": formulation.name, "problem": problem.label,
            "fingerprint": problem.fingerprint()}
    return compiled, standard_form(compiled.program, meta)
