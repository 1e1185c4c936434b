"""The SDPA sparse format (``.dat-s``): writer, reader, and solution files.

SDPA's standard form (Fujisawa, Kojima & Nakata, SDPA user's manual) over block-diagonal
symmetric matrices:

    (P)  min  c^T x     s.t.  X = sum_i x_i F_i - F_0  PSD
    (D)  max  tr(F_0 Y) s.t.  tr(F_i Y) = c_i,  Y PSD

A block of negative size ``-k`` is diagonal (``k`` linear rows).  A
:class:`~kernelforms.exchange.standard.ConicForm` ``b - A x in K`` becomes (P) with
``X = E(b - A x)``, where ``E`` places each cone's rows in one block:

* the zero cone and the nonnegative orthant share one diagonal block: each equality row
  ``r`` gives the pair ``r >= 0``, ``-r >= 0`` (SDPA has no free rows; solvers accept the
  pair, and :meth:`SDPAProgram.to_cvxpy` turns such exact pairs back into equalities);
* a second-order cone ``(t, u)`` of size ``k`` is the arrow block
  ``[[t, u^T], [u, t I]]`` of order ``k`` (PSD exactly when ``t >= ||u||``);
* a PSD cone is a dense block (SCS's svec unscaled: off-diagonal entries ``/ sqrt(2)``);
* exponential cones have no SDPA form: :func:`from_conic` refuses them (use CBF).

The objective's constant (``offset``) and the sense are not part of the format: they are
kept in a comment line (``* kernelforms: {...}``, JSON) that :func:`read_sdpa` reads back,
so that the optimum of (P) plus the offset, times ``sign``, is the problem's objective.

Solution files: CSDP's (``csdp problem.dat-s problem.sol``: the vector ``x`` on the first
line, then ``1 block i j value`` for ``X`` and ``2 block i j value`` for ``Y``) and SDPA's
result file (``xVec``, ``xMat``, ``yMat``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError, NotApplicable
from .standard import ConicForm, psd_positions

#: the comment line that carries kernelforms' metadata (JSON after the colon)
META_PREFIX = "* kernelforms:"


@dataclass
class SDPABlock:
    """One diagonal block: ``size`` (negative: diagonal), the positions ``(i, j)``
    (0-based, ``i <= j``) that have an entry in some ``F``, and ``F`` (positions x
    ``m + 1``, column 0 is ``F_0``, column ``k`` is ``F_k``)."""

    size: int
    i: np.ndarray
    j: np.ndarray
    F: Any

    @property
    def order(self) -> int:
        return abs(self.size)

    @property
    def diagonal(self) -> bool:
        return self.size < 0

    def dense(self, values: np.ndarray) -> np.ndarray:
        """The symmetric matrix (or the diagonal, for a diagonal block) with ``values``
        at the positions."""
        if self.diagonal:
            out = np.zeros(self.order)
            np.add.at(out, self.i, values)
            return out
        M = np.zeros((self.order, self.order))
        np.add.at(M, (self.i, self.j), values)
        off = self.i != self.j
        np.add.at(M, (self.j[off], self.i[off]), values[off])
        return M

    def pick(self, M: np.ndarray) -> np.ndarray:
        """The entries of a block matrix (or diagonal vector) at the positions."""
        M = np.asarray(M, dtype=float)
        return M[self.i] if self.diagonal else M[self.i, self.j]


@dataclass
class SDPAProgram:
    """An SDP in SDPA's form (P) (see the module docstring); ``offset`` and ``sign`` turn
    its optimum into the problem's objective: ``sign * (c^T x + offset)``."""

    c: np.ndarray
    blocks: list[SDPABlock]
    offset: float = 0.0
    sign: int = 1
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.c.size)

    def slack(self, x: np.ndarray) -> list[np.ndarray]:
        """``X = sum_i x_i F_i - F_0``, block by block (dense, or the diagonal)."""
        x = np.asarray(x, dtype=float)
        return [b.dense(b.F[:, 1:] @ x - b.F[:, 0].toarray().ravel()) for b in self.blocks]

    def traces(self, Y: list[np.ndarray]) -> np.ndarray:
        """``(tr(F_0 Y), tr(F_1 Y), ..., tr(F_m Y))``."""
        out = np.zeros(self.m + 1)
        for b, Yb in zip(self.blocks, Y):
            w = b.pick(Yb) * np.where(b.i == b.j, 1.0, 2.0)
            out += b.F.T @ w
        return out

    # ------------------------------------------------------------------ to CVXPY
    def to_cvxpy(self) -> tuple[Any, dict[str, Any]]:
        """A ``cvxpy.Problem`` of (P): ``min c^T x + offset`` over free ``x``.

        Each dense block is one PSD constraint on its (symmetric) affine matrix; the rows
        of a diagonal block are linear rows, and two rows that are exact negatives of each
        other (how an equality is written in SDPA) become one equality.  Returns the
        problem and ``handles`` (``x`` and the constraints of each block) for
        :func:`solution_from_cvxpy`.
        """
        import cvxpy as cp

        x = cp.Variable(self.m, name="x")
        cons: list[Any] = []
        handles: dict[str, Any] = {"x": x, "blocks": []}
        for b in self.blocks:
            F0 = b.F[:, 0].toarray().ravel()
            Fx = b.F[:, 1:].tocsr()
            if b.diagonal:
                pos, neg = _negated_pairs(b.F)
                ineq = np.setdiff1d(np.arange(b.i.size), np.concatenate([pos, neg]).astype(int))
                h: dict[str, Any] = {"pos": pos, "neg": neg, "ineq": ineq, "eq": None, "ge": None}
                if pos.size:
                    h["eq"] = Fx[pos] @ x - F0[pos] == 0
                    cons.append(h["eq"])
                if ineq.size:
                    h["ge"] = Fx[ineq] @ x - F0[ineq] >= 0
                    cons.append(h["ge"])
                handles["blocks"].append(h)
            else:
                p = b.order
                k = np.arange(b.i.size)
                off = b.i != b.j
                rows = np.concatenate([b.i + b.j * p, (b.j + b.i * p)[off]])
                cols = np.concatenate([k, k[off]])
                P = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(p * p, b.i.size))
                S = cp.reshape(P @ (Fx @ x - F0), (p, p), order="F")
                con = S >> 0
                cons.append(con)
                handles["blocks"].append({"psd": con})
        prob = cp.Problem(cp.Minimize(self.c @ x + self.offset), cons)
        return prob, handles


def _negated_pairs(F: Any) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``(pos, neg)`` of a diagonal block whose coefficient rows (``F_0`` included)
    are exact negatives of each other, each row in at most one pair."""
    F = sp.csr_matrix(F)
    F.sort_indices()
    seen: dict[tuple, list[int]] = {}
    pos, neg = [], []
    for r in range(F.shape[0]):
        lo, hi = F.indptr[r], F.indptr[r + 1]
        idx = tuple(F.indices[lo:hi].tolist())
        if not idx:
            continue
        vals = F.data[lo:hi]
        key = (idx, tuple((-vals).tolist()))
        partner = seen.get(key)
        if partner:
            pos.append(partner.pop())
            neg.append(r)
            continue
        seen.setdefault((idx, tuple(vals.tolist())), []).append(r)
    return np.array(pos, dtype=int), np.array(neg, dtype=int)


# ---------------------------------------------------------------------- from a conic form
def from_conic(form: ConicForm) -> SDPAProgram:
    """The SDPA program of a conic form (see the module docstring for each cone).

    Raises :class:`~kernelforms.errors.NotApplicable` when the form has exponential cones
    (the log-determinant and entropy terms of the Bregman problems): SDPA holds only
    linear matrix inequalities; export CBF instead.
    """
    if form.exp:
        raise NotApplicable(
            f"the program has {form.exp} exponential cone(s) (a log-det or entropy term), which the "
            "SDPA format cannot hold (it has only linear matrix inequalities); export it as CBF "
            "(.cbf) instead")
    rows_of = form.cone_rows()
    # E: (block, position) <- row of s, with a factor; one triplet list per block
    blocks: list[tuple[int, list, list, list, list]] = []  # size, i, j, row, factor
    lp_i, lp_row, lp_fac = [], [], []
    z0, _ = rows_of["zero"]
    for k in range(form.zero):
        lp_i += [2 * k, 2 * k + 1]
        lp_row += [z0 + k, z0 + k]
        lp_fac += [1.0, -1.0]
    l0, _ = rows_of["nonneg"]
    for k in range(form.nonneg):
        lp_i.append(2 * form.zero + k)
        lp_row.append(l0 + k)
        lp_fac.append(1.0)
    if lp_i:
        blocks.append((-(2 * form.zero + form.nonneg), lp_i, list(lp_i), lp_row, lp_fac))
    r = rows_of["soc"][0]
    for q in form.soc:
        # arrow: t on the whole diagonal, u_j at (0, j)
        i = list(range(q)) + [0] * (q - 1)
        j = list(range(q)) + list(range(1, q))
        rows = [r] * q + list(range(r + 1, r + q))
        blocks.append((q, i, j, rows, [1.0] * (2 * q - 1)))
        r += q
    r = rows_of["psd"][0]
    for p in form.psd:
        li, lj, fac = psd_positions(p)
        d = li.size
        # SDPA lists the upper triangle: (row, col) = (j, i) of the lower-triangle entry
        blocks.append((p, lj.tolist(), li.tolist(), list(range(r, r + d)), fac.tolist()))
        r += d
    data = sp.hstack([sp.csc_matrix(-form.b.reshape(-1, 1)), -form.A], format="csr")
    out = []
    for size, i, j, rows, fac in blocks:
        i, j = np.asarray(i, dtype=int), np.asarray(j, dtype=int)
        # merge positions that several rows feed (the arrow's diagonal is one row)
        key = i * (abs(size) + 1) + j
        uniq, pos_of = np.unique(key, return_inverse=True)
        E = sp.csr_matrix((np.asarray(fac, dtype=float), (pos_of, np.asarray(rows, dtype=int))),
                          shape=(uniq.size, form.m))
        F = (E @ data).tocsc()
        F.eliminate_zeros()
        first = np.zeros(uniq.size, dtype=int)
        first[pos_of] = np.arange(pos_of.size)
        out.append(SDPABlock(size, i[first], j[first], F))
    return SDPAProgram(c=form.c.copy(), blocks=out, offset=form.offset, sign=form.sign,
                       meta=dict(form.meta))


# ---------------------------------------------------------------------- write / read
def _fmt(v: float) -> str:
    return repr(float(v))


def write_sdpa(prog: SDPAProgram, path: str | Path, comments: list[str] | None = None) -> Path:
    """Write ``prog`` as an SDPA sparse file (``.dat-s``)."""
    path = Path(path)
    meta = {**prog.meta, "offset": prog.offset, "sign": prog.sign}
    lines = [f'" {line}' for line in (comments or [])]
    lines.append(f"{META_PREFIX} {json.dumps(meta, sort_keys=True)}")
    lines.append(f"{prog.m} = mDIM")
    lines.append(f"{len(prog.blocks)} = nBLOCK")
    lines.append(" ".join(str(b.size) for b in prog.blocks) + " = bLOCKsTRUCT")
    lines.append(" ".join(_fmt(v) for v in prog.c))
    chunks = []
    for k, b in enumerate(prog.blocks, 1):
        F = b.F.tocoo()
        if F.nnz:
            chunks.append(np.column_stack([F.col, np.full(F.nnz, k), b.i[F.row] + 1, b.j[F.row] + 1,
                                           F.data]))
    with open(path, "w", encoding="ascii") as fh:
        fh.write("\n".join(lines) + "\n")
        if chunks:
            T = np.vstack(chunks)
            T = T[np.lexsort((T[:, 3], T[:, 2], T[:, 1], T[:, 0]))]
            for mat, blk, i, j, v in T:
                fh.write(f"{int(mat)} {int(blk)} {int(i)} {int(j)} {_fmt(v)}\n")
    return path


_PUNCT = re.compile(r"[,(){}]")


def _numbers(text: str) -> list[str]:
    return _PUNCT.sub(" ", text).split()


def read_sdpa(path: str | Path) -> SDPAProgram:
    """Read an SDPA sparse file (any, not only ours) into an :class:`SDPAProgram`.

    Comment lines start with ``"`` or ``*``; kernelforms' metadata line, when present,
    gives the offset and sense.  Entries of the lower triangle are taken as their upper
    mirror.  Raises :class:`~kernelforms.errors.DataError` naming the line of a malformed
    file.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise DataError(f"cannot read the SDPA file {str(path)!r}: {exc}") from exc
    meta: dict[str, Any] = {}
    body: list[tuple[int, str]] = []
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith(META_PREFIX):
            try:
                meta = json.loads(s[len(META_PREFIX):])
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{no}: the kernelforms metadata line is not JSON: {exc}") from exc
            continue
        if s[0] in "\"*" and not body:
            continue
        body.append((no, s))

    def bad(no: int, what: str) -> DataError:
        return DataError(f"{path}:{no}: {what} (SDPA sparse format: m, nBLOCK, the block sizes, "
                         "the vector c, then lines 'matno block i j value')")

    if len(body) < 3:
        raise DataError(f"{path}: too short for an SDPA file (it needs m, nBLOCK, the block sizes "
                        "and c)")
    try:
        m = int(float(_numbers(body[0][1])[0]))
        nblock = int(float(_numbers(body[1][1])[0]))
    except (IndexError, ValueError) as exc:
        raise bad(body[0][0], f"expected m and nBLOCK as numbers: {exc}") from exc
    sizes = []
    for tok in _numbers(body[2][1]):
        try:
            sizes.append(int(float(tok)))
        except ValueError:
            break
    if len(sizes) < nblock:
        raise bad(body[2][0], f"nBLOCK = {nblock} but {len(sizes)} block sizes are given")
    sizes = sizes[:nblock]
    if any(s == 0 for s in sizes):
        raise bad(body[2][0], "a block size is 0")
    # c, possibly over several lines, then the entries
    tokens: list[str] = []
    k = 3
    while len(tokens) < m and k < len(body):
        tokens += _numbers(body[k][1])
        k += 1
    if len(tokens) < m:
        raise bad(body[-1][0], f"c has fewer than m = {m} entries")
    try:
        c = np.array([float(t) for t in tokens[:m]])
        rest = tokens[m:] + [t for _, s in body[k:] for t in _numbers(s)]
        vals = np.array([float(t) for t in rest])
    except ValueError as exc:
        raise bad(body[min(k, len(body) - 1)][0], f"non-numeric entry: {exc}") from exc
    if vals.size % 5:
        raise DataError(f"{path}: the entry lines do not all have 5 fields (matno block i j value)")
    T = vals.reshape(-1, 5)
    mat, blk, ii, jj = (T[:, q].astype(int) for q in range(4))
    if T.size and (mat.min() < 0 or mat.max() > m):
        raise DataError(f"{path}: a matrix number is outside 0..m = {m}")
    if T.size and (blk.min() < 1 or blk.max() > nblock):
        raise DataError(f"{path}: a block number is outside 1..nBLOCK = {nblock}")
    lo, hi = np.minimum(ii, jj) - 1, np.maximum(ii, jj) - 1
    blocks = []
    for b, size in enumerate(sizes, 1):
        sel = blk == b
        bi, bj, bm, bv = lo[sel], hi[sel], mat[sel], T[sel, 4]
        order = abs(size)
        if bi.size and (bi.min() < 0 or bj.max() >= order):
            raise DataError(f"{path}: block {b} (order {order}) has an entry outside it")
        if size < 0 and np.any(bi != bj):
            raise DataError(f"{path}: block {b} is diagonal (size {size}) but has an off-diagonal entry")
        key = bi * (order + 1) + bj
        uniq, pos = np.unique(key, return_inverse=True)
        if np.unique(pos * (m + 1) + bm).size != pos.size:
            raise DataError(f"{path}: block {b} has an entry given twice for the same matrix")
        F = sp.csc_matrix((bv, (pos, bm)), shape=(uniq.size, m + 1))
        first = np.zeros(uniq.size, dtype=int)
        first[pos] = np.arange(pos.size)
        blocks.append(SDPABlock(size, bi[first], bj[first], F))
    return SDPAProgram(c=c, blocks=blocks, offset=float(meta.get("offset", 0.0)),
                       sign=int(meta.get("sign", 1)), meta=meta)


# ---------------------------------------------------------------------- solutions
@dataclass
class SDPASolution:
    """A solution of an SDPA program: ``x``, and when known the primal matrix ``X``
    (= ``sum x_i F_i - F_0``) and the dual ``Y``, each a list of blocks (a vector for a
    diagonal block)."""

    x: np.ndarray
    X: list[np.ndarray] | None = None
    Y: list[np.ndarray] | None = None
    status: str = ""


def solution_from_cvxpy(prog: SDPAProgram, handles: dict[str, Any], status: str = "") -> SDPASolution:
    """The :class:`SDPASolution` of a solved :meth:`SDPAProgram.to_cvxpy` problem, its
    dual ``Y`` read from the constraints' multipliers (an equality's multiplier ``l``
    split over its pair of rows as ``max(-l, 0)``, ``max(l, 0)``)."""
    x = np.asarray(handles["x"].value, dtype=float)
    Y = []
    for b, h in zip(prog.blocks, handles["blocks"]):
        if b.diagonal:
            y = np.zeros(b.order)
            if h["ge"] is not None:
                y[b.i[h["ineq"]]] = np.maximum(np.asarray(h["ge"].dual_value, dtype=float).ravel(), 0.0)
            if h["eq"] is not None:
                lam = np.asarray(h["eq"].dual_value, dtype=float).ravel()
                y[b.i[h["pos"]]] = np.maximum(-lam, 0.0)
                y[b.i[h["neg"]]] = np.maximum(lam, 0.0)
            Y.append(y)
        else:
            D = np.asarray(h["psd"].dual_value, dtype=float)
            Y.append((D + D.T) / 2)
    return SDPASolution(x=x, X=prog.slack(x), Y=Y, status=status)


def solve_sdpa(prog: SDPAProgram, solver: str = "CLARABEL", **options: Any) -> SDPASolution:
    """Solve an SDPA program with a CVXPY solver, as an external SDP solver would: the
    vector ``x``, the matrix ``X`` and the dual ``Y`` (ready for :func:`write_csdp_solution`)."""
    import warnings

    problem, handles = prog.to_cvxpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem.solve(solver=solver, **options)
    if handles["x"].value is None:
        raise NotApplicable(f"{solver} found no solution of the SDPA program ({problem.status})")
    return solution_from_cvxpy(prog, handles, status=str(problem.status))


def _block_triplets(prog: SDPAProgram, mats: list[np.ndarray], matno: int) -> list[str]:
    out = []
    for k, (b, M) in enumerate(zip(prog.blocks, mats), 1):
        M = np.asarray(M, dtype=float)
        if b.diagonal:
            for i in np.flatnonzero(M):
                out.append(f"{matno} {k} {i + 1} {i + 1} {M[i]:.18e}")
        else:
            iu, ju = np.triu_indices(b.order)
            v = M[iu, ju]
            for i, j, val in zip(iu[v != 0], ju[v != 0], v[v != 0]):
                out.append(f"{matno} {k} {i + 1} {j + 1} {val:.18e}")
    return out


def write_csdp_solution(prog: SDPAProgram, sol: SDPASolution, path: str | Path) -> Path:
    """Write ``sol`` as CSDP writes its solution file: ``x`` (CSDP's ``y``) on the first
    line, then ``1 block i j value`` for ``X`` (CSDP's ``Z``) and ``2 block i j value`` for
    ``Y`` (CSDP's ``X``), upper triangles, 1-based."""
    path = Path(path)
    lines = [" ".join(f"{v:.18e}" for v in sol.x)]
    if sol.X is not None:
        lines += _block_triplets(prog, sol.X, 1)
    if sol.Y is not None:
        lines += _block_triplets(prog, sol.Y, 2)
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return path


def read_csdp_solution(prog: SDPAProgram, path: str | Path) -> SDPASolution:
    """Read a CSDP solution file for ``prog`` (see :func:`write_csdp_solution`)."""
    path = Path(path)
    try:
        lines = [s for s in path.read_text(encoding="ascii", errors="replace").splitlines() if s.strip()]
    except OSError as exc:
        raise DataError(f"cannot read the solution file {str(path)!r}: {exc}") from exc
    if not lines:
        raise DataError(f"{path}: the solution file is empty")
    try:
        x = np.array([float(t) for t in lines[0].split()])
        T = np.array([[float(t) for t in s.split()] for s in lines[1:]]).reshape(-1, 5)
    except ValueError as exc:
        raise DataError(f"{path}: not a CSDP solution file (the vector x on the first line, then "
                        f"lines 'matno block i j value'): {exc}") from exc
    if x.size != prog.m:
        raise DataError(f"{path}: the first line has {x.size} values; the program has m = {prog.m} "
                        "variables (is it the solution of this program?)")
    mats: dict[int, list[np.ndarray]] = {}
    for matno in (1, 2):
        rows = T[T[:, 0] == matno]
        if not rows.size:
            continue
        out = [np.zeros(b.order) if b.diagonal else np.zeros((b.order, b.order)) for b in prog.blocks]
        for _, blk, i, j, v in rows:
            blk, i, j = int(blk) - 1, int(i) - 1, int(j) - 1
            if not 0 <= blk < len(prog.blocks) or max(i, j) >= prog.blocks[blk].order or min(i, j) < 0:
                raise DataError(f"{path}: entry ({matno} {blk + 1} {i + 1} {j + 1}) is outside the "
                                "program's block structure")
            if prog.blocks[blk].diagonal:
                out[blk][i] = v
            else:
                out[blk][i, j] = out[blk][j, i] = v
        mats[matno] = out
    return SDPASolution(x=x, X=mats.get(1), Y=mats.get(2))


def write_sdpa_result(prog: SDPAProgram, sol: SDPASolution, path: str | Path) -> Path:
    """Write ``sol`` in the layout of SDPA's result file (``objValPrimal``, ``xVec``,
    ``xMat``, ``yMat``; dense blocks, diagonal blocks as vectors)."""
    def vec(v: np.ndarray) -> str:
        return "{" + ",".join(f"{t:+.16e}" for t in v) + "}"

    def mats(Ms: list[np.ndarray]) -> str:
        parts = []
        for b, M in zip(prog.blocks, Ms):
            M = np.asarray(M, dtype=float)
            parts.append(vec(M) if b.diagonal else "{\n" + ",\n".join(vec(r) for r in M) + "\n}")
        return "{\n" + "\n".join(parts) + "\n}"

    x = np.asarray(sol.x, dtype=float)
    lines = ["phase.value = pdOPT" if sol.Y is not None else "phase.value = noINFO",
             f"objValPrimal = {float(prog.c @ x):+.16e}"]
    if sol.Y is not None:
        lines.append(f"objValDual   = {float(prog.traces(sol.Y)[0]):+.16e}")
    lines += ["xVec = ", vec(x)]
    if sol.X is not None:
        lines += ["xMat = ", mats(sol.X)]
    if sol.Y is not None:
        lines += ["yMat = ", mats(sol.Y)]
    Path(path).write_text("\n".join(lines) + "\n", encoding="ascii")
    return Path(path)


def _parse_braces(text: str, start: int) -> tuple[Any, int]:
    """Parse ``{...}`` nested lists of numbers from ``text[start:]`` (at a ``{``)."""
    stack: list[list] = []
    num = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?inf|nan", re.I)
    k = start
    while k < len(text):
        ch = text[k]
        if ch == "{":
            stack.append([])
            k += 1
        elif ch == "}":
            done = stack.pop()
            if not stack:
                return done, k + 1
            stack[-1].append(done)
            k += 1
        elif ch in " \t\r\n,":
            k += 1
        else:
            mt = num.match(text, k)
            if mt is None or not stack:
                raise ValueError(f"unexpected {text[k:k + 20]!r}")
            stack[-1].append(float(mt.group()))
            k = mt.end()
    raise ValueError("unbalanced braces")


def read_sdpa_result(prog: SDPAProgram, path: str | Path) -> SDPASolution:
    """Read SDPA's result file for ``prog``: ``xVec`` (required), ``xMat`` and ``yMat``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise DataError(f"cannot read the SDPA result file {str(path)!r}: {exc}") from exc

    def section(name: str) -> Any:
        mt = re.search(rf"^\s*{name}\s*=", text, re.M)
        if mt is None:
            return None
        brace = text.find("{", mt.end())
        if brace < 0:
            raise DataError(f"{path}: '{name} =' is not followed by '{{...}}'")
        try:
            return _parse_braces(text, brace)[0]
        except (ValueError, IndexError) as exc:
            raise DataError(f"{path}: cannot parse {name}: {exc}") from exc

    xv = section("xVec")
    if xv is None:
        raise DataError(f"{path}: no 'xVec =' in the file (is it an SDPA result file?)")
    x = np.asarray(xv, dtype=float).ravel()
    if x.size != prog.m:
        raise DataError(f"{path}: xVec has {x.size} values; the program has m = {prog.m} variables")

    def blocks(raw: Any, name: str) -> list[np.ndarray] | None:
        if raw is None:
            return None
        if len(prog.blocks) == 1 and len(raw) != 1:
            raw = [raw]  # a single block may be written without the outer braces
        if len(raw) != len(prog.blocks):
            raise DataError(f"{path}: {name} has {len(raw)} blocks; the program has {len(prog.blocks)}")
        out = []
        for b, M in zip(prog.blocks, raw):
            A = np.asarray(M, dtype=float)
            want = (b.order,) if b.diagonal else (b.order, b.order)
            if A.shape != want:
                raise DataError(f"{path}: a block of {name} has shape {A.shape}, expected {want}")
            out.append(A)
        return out

    return SDPASolution(x=x, X=blocks(section("xMat"), "xMat"), Y=blocks(section("yMat"), "yMat"))


def check_solution(prog: SDPAProgram, sol: SDPASolution) -> dict[str, float]:
    """Primal and dual feasibility and the duality gap of ``sol`` for (P) and (D).

    ``primal_infeas``: the most negative eigenvalue of ``X = sum x_i F_i - F_0`` over the
    blocks, relative to ``1 + max |F_0|``; ``dual_infeas``: ``max_i |tr(F_i Y) - c_i|``
    relative to ``1 + max |c|``, or the most negative eigenvalue of ``Y`` if larger;
    ``gap``: ``|c^T x - tr(F_0 Y)| / (1 + |c^T x| + |tr(F_0 Y)|)`` (NaN without ``Y``).
    """
    X = prog.slack(sol.x)
    scale0 = 1.0 + max((float(abs(b.F[:, 0]).max()) if b.F.nnz else 0.0) for b in prog.blocks) \
        if prog.blocks else 1.0
    min_eig = min((float(np.min(M)) if b.diagonal else float(np.linalg.eigvalsh(M)[0]))
                  for b, M in zip(prog.blocks, X)) if prog.blocks else 0.0
    pobj = float(prog.c @ sol.x)
    out = {"primal_infeas": max(0.0, -min_eig) / scale0, "pobj": pobj, "dobj": math.nan,
           "dual_infeas": math.nan, "gap": math.nan}
    if sol.Y is not None:
        tr = prog.traces(sol.Y)
        y_eig = min((float(np.min(M)) if b.diagonal else float(np.linalg.eigvalsh((M + M.T) / 2)[0]))
                    for b, M in zip(prog.blocks, sol.Y))
        res = float(np.max(np.abs(tr[1:] - prog.c))) if prog.m else 0.0
        cs = 1.0 + (float(np.max(np.abs(prog.c))) if prog.m else 0.0)
        out["dobj"] = float(tr[0])
        out["dual_infeas"] = max(res / cs, max(0.0, -y_eig) / cs)
        out["gap"] = abs(pobj - tr[0]) / (1.0 + abs(pobj) + abs(tr[0]))
    return out
