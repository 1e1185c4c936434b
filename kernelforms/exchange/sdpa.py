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
from .standard import BYTES_PER_PSD_ENTRY, ConicForm, memory_guard, psd_positions

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
    #: (positions x rows) map from the conic form's rows (set by :func:`from_conic`)
    E: Any = None

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
            f"the program has {form.exp} exponential cone(s) (a log-det, entropy or logistic term), which the "
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
        out.append(SDPABlock(size, i[first], j[first], F, E))
    return SDPAProgram(c=form.c.copy(), blocks=out, offset=form.offset, sign=form.sign,
                       meta=dict(form.meta))


def conic_dual(prog: SDPAProgram, Y: list[np.ndarray]) -> np.ndarray:
    """The conic form's dual vector ``y`` (SCS's convention: ``A^T y + c = 0``, ``y`` in
    the dual cone, PSD parts in svec) of an SDPA dual ``Y``: the adjoint of the map from
    rows to blocks, ``y = E^T(Y)`` (so ``tr(F_i Y) = -A_i^T y``).  Needs a program made by
    :func:`from_conic`."""
    y = None
    for b, M in zip(prog.blocks, Y):
        w = b.pick(M) * np.where(b.i == b.j, 1.0, 2.0)
        part = b.E.T @ w
        y = part if y is None else y + part
    return np.asarray(y, dtype=float)


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
    if chunks:
        T = np.vstack(chunks)
        T = T[np.lexsort((T[:, 3], T[:, 2], T[:, 1], T[:, 0]))]
        lines += [f"{int(mat)} {int(blk)} {int(i)} {int(j)} {_fmt(v)}" for mat, blk, i, j, v in T]
    return write_file(path, "\n".join(lines) + "\n")


def write_file(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a
    rename: a failed write (a full disk) leaves no truncated file, and raises
    :class:`~kernelforms.report.ReportWriteError` (a kernelforms error) naming the path."""
    from ..report import atomic_write

    atomic_write(path, text)
    return Path(path)


_PUNCT = re.compile(r"[,(){}]")


def _numbers(text: str) -> list[str]:
    return _PUNCT.sub(" ", text).split()


def _read_text(path: Path, what: str) -> str:
    if path.is_dir():
        raise DataError(f"the {what} {str(path)!r} is a directory, not a file")
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise DataError(f"cannot read the {what} {str(path)!r}: {exc.strerror or exc}") from exc


def _integer(tok: str) -> int | None:
    """``tok`` as an integer (``"3"``, ``"3.0"``, ``"+3"``), or None."""
    try:
        v = float(tok)
    except ValueError:
        return None
    if not math.isfinite(v) or v != int(v):
        return None
    return int(v)


def read_metadata(line: str, prefix: str, where: str) -> dict[str, Any]:
    """The JSON object of a kernelforms metadata line, its ``offset`` a finite number and its
    ``sign`` +1 or -1 when present (:class:`DataError` naming ``where`` otherwise)."""
    try:
        meta = json.loads(line[len(prefix):])
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: the kernelforms metadata line is not JSON: {exc}") from exc
    if not isinstance(meta, dict):
        raise DataError(f"{where}: the kernelforms metadata line must be a JSON object, got "
                        f"{type(meta).__name__}")
    if "offset" in meta:
        off = meta["offset"]
        if isinstance(off, bool) or not isinstance(off, (int, float)) or not math.isfinite(off):
            raise DataError(f"{where}: the metadata's 'offset' must be a finite number, got {off!r}")
    if "sign" in meta and (isinstance(meta["sign"], bool) or meta["sign"] not in (1, -1)):
        raise DataError(f"{where}: the metadata's 'sign' must be 1 or -1, got {meta['sign']!r}")
    return meta


def read_sdpa(path: str | Path, max_memory: Any = None) -> SDPAProgram:
    """Read an SDPA sparse file (any, not only ours) into an :class:`SDPAProgram`.

    Comment lines start with ``"`` or ``*``; kernelforms' metadata line, when present,
    gives the offset and sense.  Entries of the lower triangle are taken as their upper
    mirror.  Raises :class:`~kernelforms.errors.DataError` naming the line of a malformed
    file, and, before allocating anything, when the declared block sizes need more than
    ``max_memory`` bytes (default 4 GiB) to solve.
    """
    path = Path(path)
    text = _read_text(path, "SDPA file")
    meta: dict[str, Any] = {}
    body: list[tuple[int, str]] = []
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith(META_PREFIX):
            meta = read_metadata(s, META_PREFIX, f"{path}:{no}")
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
    head = []
    for no, s in body[:2]:
        toks = _numbers(s)
        v = _integer(toks[0]) if toks else None
        if v is None or v < 1:
            raise bad(no, f"expected {'m' if not head else 'nBLOCK'} as an integer >= 1, got {s!r}")
        head.append(v)
    m, nblock = head
    size_no, size_toks = body[2][0], _numbers(body[2][1])
    if len(size_toks) < nblock:
        raise bad(size_no, f"nBLOCK = {nblock} but {len(size_toks)} block sizes are given")
    sizes = []
    for tok in size_toks[:nblock]:
        v = _integer(tok)
        if v is None or v == 0:
            raise bad(size_no, f"a block size must be a nonzero integer, got {tok!r}")
        sizes.append(v)
    # c needs m numbers in the file, so m is bounded by the file; the blocks are not
    need = 8.0 * sum(BYTES_PER_PSD_ENTRY / 8.0 * (float(s) ** 2 if s > 0 else -float(s)) for s in sizes)
    memory_guard(path, f"the block sizes ({', '.join(map(str, sizes[:6]))}{', ...' if nblock > 6 else ''})",
                 need, max_memory)
    # c, possibly over several lines, then the entries, one per line
    tokens: list[str] = []
    k = 3
    while len(tokens) < m and k < len(body):
        tokens += _numbers(body[k][1])
        k += 1
    if len(tokens) < m:
        raise bad(body[-1][0], f"c has fewer than m = {m} entries")
    if len(tokens) > m:
        raise bad(body[k - 1][0], f"c has more than m = {m} entries (or an entry line follows c on "
                                  "the same line)")
    try:
        c = np.array([float(t) for t in tokens], dtype=float)
    except ValueError as exc:
        raise bad(body[k - 1][0], f"non-numeric entry in c: {exc}") from exc
    if not np.all(np.isfinite(c)):
        raise bad(body[k - 1][0], "c has a non-finite entry")
    rows = []
    for no, s in body[k:]:
        toks = _numbers(s)
        if len(toks) != 5:
            raise bad(no, f"an entry line needs 5 fields (matno block i j value), got {s!r}")
        try:
            rows.append([float(t) for t in toks])
        except ValueError as exc:
            raise bad(no, f"non-numeric entry: {exc}") from exc
    T = np.array(rows, dtype=float).reshape(-1, 5)
    if T.size:
        idx = T[:, :4]
        if not np.all(np.isfinite(T)) or np.any(idx != np.round(idx)):
            r = int(np.flatnonzero(~np.all(np.isfinite(T), axis=1) | np.any(idx != np.round(idx), axis=1))[0])
            raise bad(body[k + r][0], "an entry needs integer matno, block, i, j and a finite value")
        for q, lo_, hi_, name in ((0, 0, m, f"matrix number outside 0..m = {m}"),
                                  (1, 1, nblock, f"block number outside 1..nBLOCK = {nblock}")):
            out = (T[:, q] < lo_) | (T[:, q] > hi_)
            if out.any():
                raise bad(body[k + int(np.flatnonzero(out)[0])][0], f"a {name}")
        order_of = np.abs(np.array(sizes, dtype=float))[T[:, 1].astype(int) - 1]
        out = (T[:, 2] < 1) | (T[:, 3] < 1) | (T[:, 2] > order_of) | (T[:, 3] > order_of)
        if out.any():
            r = int(np.flatnonzero(out)[0])
            raise bad(body[k + r][0], f"the entry ({int(T[r, 2])}, {int(T[r, 3])}) lies outside block "
                                      f"{int(T[r, 1])} of order {int(order_of[r])}")
    mat, blk, ii, jj = (T[:, q].astype(np.int64) for q in range(4))
    lo, hi = np.minimum(ii, jj) - 1, np.maximum(ii, jj) - 1
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    off_diag = (sizes_arr[blk - 1] < 0) & (lo != hi) if blk.size else np.zeros(0, dtype=bool)
    if off_diag.any():
        r = int(np.flatnonzero(off_diag)[0])
        raise bad(body[k + r][0], f"block {int(blk[r])} is diagonal (size {int(sizes_arr[blk[r] - 1])}) "
                                  "but has an off-diagonal entry")
    # every position (block, i, j) once, in block order: one sort for all blocks (a loop of
    # masks would be O(blocks x entries)), one sparse matrix sliced by block
    order = np.lexsort((hi, lo, blk))
    sb, si, sj, sm, sv = blk[order], lo[order], hi[order], mat[order], T[order, 4]
    new = np.ones(sb.size, dtype=bool)
    new[1:] = (sb[1:] != sb[:-1]) | (si[1:] != si[:-1]) | (sj[1:] != sj[:-1])
    pos = np.cumsum(new) - 1
    if sb.size:
        pair = pos * (m + 1) + sm
        ps = np.argsort(pair, kind="stable")
        twice = np.flatnonzero(pair[ps][1:] == pair[ps][:-1])
        if twice.size:
            r = int(order[ps[twice[0] + 1]])  # the second of the two lines
            raise bad(body[k + r][0], f"block {int(blk[r])} has the entry ({int(lo[r]) + 1}, {int(hi[r]) + 1}) "
                                      f"given twice for matrix {int(mat[r])}")
    npos = int(pos[-1]) + 1 if pos.size else 0
    Fall = sp.csr_matrix((sv, (pos, sm)), shape=(npos, m + 1))
    starts = np.flatnonzero(new)
    pb, pi, pj = sb[starts], si[starts], sj[starts]
    pcuts = np.searchsorted(pb, np.arange(1, nblock + 2))
    blocks = []
    for b, size in enumerate(sizes, 1):
        p0, p1 = int(pcuts[b - 1]), int(pcuts[b])
        a0, a1 = Fall.indptr[p0], Fall.indptr[p1]
        F = sp.csr_matrix((Fall.data[a0:a1], Fall.indices[a0:a1], Fall.indptr[p0:p1 + 1] - a0),
                          shape=(p1 - p0, m + 1))
        blocks.append(SDPABlock(size, pi[p0:p1], pj[p0:p1], F))
    return SDPAProgram(c=c, blocks=blocks, offset=float(meta.get("offset", 0.0)),
                       sign=int(meta.get("sign", 1)), meta=meta)


# ---------------------------------------------------------------------- solutions
@dataclass
class SDPASolution:
    """A solution of an SDPA program: ``x``, and when known the primal matrix ``X``
    (= ``sum x_i F_i - F_0``) and the dual ``Y``, each a list of blocks (a vector for a
    diagonal block).  ``status`` is what the solver said (CVXPY's word, or SDPA's phase);
    ``digits`` the significant digits the file printed (SDPA's result file)."""

    x: np.ndarray
    X: list[np.ndarray] | None = None
    Y: list[np.ndarray] | None = None
    status: str = ""
    digits: int | None = None


def solution_from_cvxpy(prog: SDPAProgram, handles: dict[str, Any], status: str = "") -> SDPASolution:
    """The :class:`SDPASolution` of a solved :meth:`SDPAProgram.to_cvxpy` problem, its
    dual ``Y`` read from the constraints' multipliers (an equality's multiplier ``l``
    split over its pair of rows as ``max(-l, 0)``, ``max(l, 0)``; an inequality's as it
    is, so that a negative multiplier shows in the check).  Without a primal value (an
    infeasible program, whose multipliers are CVXPY's certificate) ``x`` is zero."""
    xv = handles["x"].value
    x = np.zeros(prog.m) if xv is None else np.asarray(xv, dtype=float).ravel()
    Y: list[np.ndarray] | None = []
    for b, h in zip(prog.blocks, handles["blocks"]):
        if b.diagonal:
            y = np.zeros(b.order)
            if h["ge"] is not None:
                if h["ge"].dual_value is None:
                    Y = None
                    break
                y[b.i[h["ineq"]]] = np.asarray(h["ge"].dual_value, dtype=float).ravel()
            if h["eq"] is not None:
                if h["eq"].dual_value is None:
                    Y = None
                    break
                lam = np.asarray(h["eq"].dual_value, dtype=float).ravel()
                y[b.i[h["pos"]]] = np.maximum(-lam, 0.0)
                y[b.i[h["neg"]]] = np.maximum(lam, 0.0)
            Y.append(y)
        else:
            if h["psd"].dual_value is None:
                Y = None
                break
            D = np.asarray(h["psd"].dual_value, dtype=float)
            Y.append((D + D.T) / 2)
    return SDPASolution(x=x, X=prog.slack(x), Y=Y, status=status)


def solve_sdpa(prog: SDPAProgram, solver: str = "CLARABEL", **options: Any) -> SDPASolution:
    """Solve an SDPA program with a CVXPY solver, as an external SDP solver would: the
    vector ``x``, the matrix ``X`` and the dual ``Y`` (ready for :func:`write_csdp_solution`).

    ``status`` is the solver's word as checked by :func:`judge`: ``optimal`` only when
    the primal and dual infeasibility and the gap computed here are within
    :data:`OPTIMAL_TOL`; ``infeasible`` only when the multipliers are a Farkas certificate
    (then ``Y`` holds it and ``x`` is zero).  Raises :class:`NotApplicable` when the
    solver gives nothing to write (unbounded, a solver failure).
    """
    import warnings

    import cvxpy as cp

    from ..errors import OptionError

    if not isinstance(solver, str) or solver.upper() not in cp.installed_solvers():
        raise OptionError(f"solver={solver!r} is not an installed CVXPY solver; use one of "
                          f"{', '.join(sorted(cp.installed_solvers()))}")
    problem, handles = prog.to_cvxpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            problem.solve(solver=solver.upper(), **options)
        except cp.error.SolverError as exc:
            raise NotApplicable(f"{solver} failed on the SDPA program: {exc}") from exc
        except TypeError as exc:
            raise OptionError(f"an option of {solver} is not accepted: {exc}") from exc
    status = str(problem.status)
    if handles["x"].value is None and not status.startswith("infeasible"):
        raise NotApplicable(f"{solver} found no solution of the SDPA program ({status})")
    sol = solution_from_cvxpy(prog, handles)
    verdict = judge(prog, sol, CVXPY_STATUS.get(status, ("numerical_error", status)), source=solver)
    if verdict.status in ("optimal", "infeasible"):
        sol.status = verdict.status
    else:
        sol.status = "infeasible_inaccurate" if status.startswith("infeasible") else "optimal_inaccurate"
    if sol.status.startswith("infeasible") and sol.Y is None:
        raise NotApplicable(f"{solver} says the SDPA program is {status} but gives no certificate")
    return sol


# ---------------------------------------------------------------------- what a solver said
#: an imported or solved answer is "optimal" when its primal and dual infeasibility and its
#: relative duality gap (see :func:`check_solution`) are all at most this
OPTIMAL_TOL = 1e-6
#: an infeasibility (unboundedness) certificate is accepted when its residual relative to
#: its objective (see :func:`check_certificates`) is at most this
CERT_TOL = 1e-6
#: fewer significant digits than this in a result file: the answer cannot be checked to
#: :data:`OPTIMAL_TOL` (SDPA's default printing ``%+8.3e`` gives 4)
LOW_DIGITS = 7

#: SDPA's ``phase.value`` (for its primal (P) ``min c^T x``, the program here): the status
#: it amounts to, and what SDPA says
SDPA_PHASES: dict[str, tuple[str, str]] = {
    "pdOPT": ("optimal", "primal and dual optimal"),
    "pdFEAS": ("optimal_inaccurate", "primal and dual feasible, the gap not closed"),
    "pFEAS": ("max_iter", "a primal feasible point, no dual one: stopped before optimality"),
    "dFEAS": ("max_iter", "a dual feasible point, no primal one: stopped before optimality"),
    "noINFO": ("numerical_error", "no information: stopped before finding a feasible point"),
    "pINF_dFEAS": ("infeasible", "primal infeasible, dual feasible"),
    "pFEAS_dINF": ("unbounded", "primal feasible, dual infeasible"),
    "pdINF": ("infeasible", "primal and dual infeasible"),
    "pUNBD": ("unbounded", "primal unbounded"),
    "dUNBD": ("infeasible", "dual unbounded, so the primal is infeasible"),
}
#: CSDP's return codes (CSDP's primal is the dual (D) here, its dual the program (P))
CSDP_CODES: dict[int, tuple[str, str]] = {
    0: ("optimal", "success"),
    1: ("unbounded", "CSDP's primal (D) is infeasible, so the program (P) is unbounded"),
    2: ("infeasible", "CSDP's dual, the program (P), is infeasible"),
    3: ("optimal_inaccurate", "partial success: full accuracy not reached"),
    4: ("max_iter", "maximum iterations reached"),
    5: ("numerical_error", "stuck at the edge of primal feasibility"),
    6: ("numerical_error", "stuck at the edge of dual infeasibility"),
    7: ("numerical_error", "lack of progress"),
    8: ("numerical_error", "X, Z or O was singular"),
    9: ("numerical_error", "detected NaN or Inf values"),
}
#: CVXPY's statuses of a solve of the program
CVXPY_STATUS: dict[str, tuple[str, str]] = {
    "optimal": ("optimal", "optimal"),
    "optimal_inaccurate": ("optimal_inaccurate", "optimal_inaccurate"),
    "infeasible": ("infeasible", "infeasible"),
    "infeasible_inaccurate": ("infeasible", "infeasible_inaccurate"),
    "unbounded": ("unbounded", "unbounded"),
    "unbounded_inaccurate": ("unbounded", "unbounded_inaccurate"),
    "user_limit": ("max_iter", "user_limit"),
}


@dataclass
class Verdict:
    """What an answer is, checked: ``status`` (a :class:`~kernelforms.result.Status`
    value), ``message`` and the measured ``checks``."""

    status: str
    message: str
    checks: dict[str, float] = field(default_factory=dict)


def _min_eig(b: SDPABlock, M: np.ndarray) -> float:
    M = np.asarray(M, dtype=float)
    if M.size == 0:
        return 0.0
    return float(np.min(M)) if b.diagonal else float(np.linalg.eigvalsh((M + M.T) / 2)[0])


def _psd_part(b: SDPABlock, M: np.ndarray) -> np.ndarray:
    M = np.asarray(M, dtype=float)
    if b.diagonal:
        return np.maximum(M, 0.0)
    w, V = np.linalg.eigh((M + M.T) / 2)
    return (V * np.maximum(w, 0.0)) @ V.T


def check_certificates(prog: SDPAProgram, sol: SDPASolution) -> dict[str, float]:
    """How well ``sol`` certifies that (P) is infeasible or unbounded.

    ``infeas_cert``: with ``Y+`` the PSD part of ``Y`` (exactly PSD), ``max_i |tr(F_i Y+)|
    / tr(F_0 Y+)`` (inf unless ``tr(F_0 Y+) > 0``): every ``x`` feasible for (P) has
    ``||x||_1 >= 1 / infeas_cert`` (Farkas: ``0 <= tr(X Y+) = sum x_i tr(F_i Y+) -
    tr(F_0 Y+)``).  ``unbounded_cert``: for the ray ``x``, ``max(0, -lambda_min(sum x_i
    F_i)) / -c^T x`` (inf unless ``c^T x < 0``).
    """
    out = {"infeas_cert": math.inf, "unbounded_cert": math.inf}
    if sol.Y is not None and all(np.all(np.isfinite(M)) for M in sol.Y):
        tr = prog.traces([_psd_part(b, M) for b, M in zip(prog.blocks, sol.Y)])
        if tr[0] > 0:
            out["infeas_cert"] = float(np.max(np.abs(tr[1:])) / tr[0]) if prog.m else 0.0
    x = np.asarray(sol.x, dtype=float)
    if np.all(np.isfinite(x)):
        cx = float(prog.c @ x)
        if cx < 0:
            ray = [b.dense(b.F[:, 1:] @ x) for b in prog.blocks]
            lam = min(_min_eig(b, M) for b, M in zip(prog.blocks, ray))
            out["unbounded_cert"] = max(0.0, -lam) / -cx
    return out


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
    min_eig = min(_min_eig(b, M) for b, M in zip(prog.blocks, X)) if prog.blocks else 0.0
    pobj = float(prog.c @ sol.x)
    out = {"primal_infeas": max(0.0, -min_eig) / scale0, "pobj": pobj, "dobj": math.nan,
           "dual_infeas": math.nan, "gap": math.nan}
    if sol.Y is not None:
        tr = prog.traces(sol.Y)
        y_eig = min(_min_eig(b, M) for b, M in zip(prog.blocks, sol.Y))
        res = float(np.max(np.abs(tr[1:] - prog.c))) if prog.m else 0.0
        cs = 1.0 + (float(np.max(np.abs(prog.c))) if prog.m else 0.0)
        out["dobj"] = float(tr[0])
        out["dual_infeas"] = max(res / cs, max(0.0, -y_eig) / cs)
        out["gap"] = abs(pobj - tr[0]) / (1.0 + abs(pobj) + abs(tr[0]))
    return out


def _finite(sol: SDPASolution) -> bool:
    parts = [np.asarray(sol.x, dtype=float)] + list(sol.X or []) + list(sol.Y or [])
    return all(np.all(np.isfinite(np.asarray(M, dtype=float))) for M in parts)


def judge(prog: SDPAProgram, sol: SDPASolution, claim: tuple[str, str] | None,
          source: str = "the solver") -> Verdict:
    """The status ``sol`` earns: what the solver said (``claim``: a status and its words,
    or None when the file does not say), checked against the program.

    * said optimal: ``optimal`` when :func:`check_solution`'s three numbers are within
      :data:`OPTIMAL_TOL`, otherwise ``optimal_inaccurate`` with the numbers;
    * said infeasible / unbounded: that status when :func:`check_certificates` confirms it
      within :data:`CERT_TOL`, otherwise ``numerical_error`` (the claim is not evidence);
    * said anything else (inaccurate, iteration limit, failure): that, never better;
    * said nothing (CSDP's solution file): what the checks confirm (optimal, infeasible,
      unbounded), otherwise ``optimal_inaccurate`` with the numbers.

    Non-finite values in the file give ``numerical_error``.
    """
    said = f"{source} said {claim[1]}" if claim else f"{source} gave no status"
    if not _finite(sol):
        return Verdict("numerical_error", f"{said}; the answer holds NaN or inf values")
    checks = check_solution(prog, sol)
    checks.update(check_certificates(prog, sol))
    pinf, dinf, gap = checks["primal_infeas"], checks["dual_infeas"], checks["gap"]
    nums = ", ".join(f"{k.replace('_', ' ')} {v:.1e}" for k, v in
                     (("primal_infeas", pinf), ("dual_infeas", dinf), ("gap", gap)) if not math.isnan(v))
    optimal = all(v <= OPTIMAL_TOL for v in (pinf, dinf, gap))  # False when any is NaN
    infeas = checks["infeas_cert"] <= CERT_TOL
    unbd = checks["unbounded_cert"] <= CERT_TOL
    infeas_txt = ("a Farkas certificate: no feasible x with ||x||_1 < "
                  f"{1 / checks['infeas_cert'] if checks['infeas_cert'] > 0 else math.inf:.3g}")
    unbd_txt = f"a ray with c^T x < 0 whose LMI violation per unit of objective is {checks['unbounded_cert']:.1e}"
    digits = ""
    if sol.digits is not None and sol.digits < LOW_DIGITS:
        digits = (f"; the file prints {sol.digits} significant digits, too few to check to "
                  f"{OPTIMAL_TOL:g} (print with full precision, see docs/export.md)")
    want = claim[0] if claim else None
    if want == "optimal" or (want is None and optimal):
        if optimal:
            return Verdict("optimal", f"{said}; checked: {nums}", checks)
        if math.isnan(dinf):
            return Verdict("optimal_inaccurate", f"{said}; {nums}; no dual in the file: optimality not "
                           "checked", checks)
        return Verdict("optimal_inaccurate", f"{said}, but the check measured {nums}, above the tolerance "
                       f"{OPTIMAL_TOL:g} for 'optimal'{digits}", checks)
    if want == "infeasible" or (want is None and infeas):
        if infeas:
            return Verdict("infeasible", f"{said}; checked: {infeas_txt}", checks)
        got = ("no usable certificate in the file" if math.isinf(checks["infeas_cert"])
               else f"the certificate's residual is {checks['infeas_cert']:.1e} > {CERT_TOL:g}")
        return Verdict("numerical_error", f"{said}, but infeasibility is not confirmed: {got}{digits}",
                       checks)
    if want == "unbounded" or (want is None and unbd):
        if unbd:
            return Verdict("unbounded", f"{said}; checked: {unbd_txt}", checks)
        got = ("no ray with c^T x < 0 in the file" if math.isinf(checks["unbounded_cert"])
               else f"the ray's residual is {checks['unbounded_cert']:.1e} > {CERT_TOL:g}")
        return Verdict("numerical_error", f"{said}, but unboundedness is not confirmed: {got}{digits}",
                       checks)
    if want is None:
        why = ("no dual in the file: optimality not checked" if math.isnan(dinf)
               else f"above the tolerance {OPTIMAL_TOL:g} for 'optimal'")
        return Verdict("optimal_inaccurate", f"{said}; {nums}; {why}{digits}", checks)
    return Verdict(want, f"{said}; {nums}{digits}", checks)


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
    ``Y`` (CSDP's ``X``), upper triangles, 1-based.  For an infeasible program, as CSDP,
    ``Y`` is the certificate."""
    lines = [" ".join(f"{v:.18e}" for v in sol.x)]
    if sol.X is not None:
        lines += _block_triplets(prog, sol.X, 1)
    if sol.Y is not None:
        lines += _block_triplets(prog, sol.Y, 2)
    return write_file(path, "\n".join(lines) + "\n")


def read_csdp_solution(prog: SDPAProgram, path: str | Path) -> SDPASolution:
    """Read a CSDP solution file for ``prog`` (see :func:`write_csdp_solution`)."""
    path = Path(path)
    text = _read_text(path, "solution file")
    lines = [(no, s) for no, s in enumerate(text.splitlines(), 1) if s.strip()]
    if not lines:
        raise DataError(f"{path}: the solution file is empty")
    fix = ("not a CSDP solution file (the vector x on the first line, then lines 'matno block i j "
           "value' with matno 1 or 2)")
    try:
        x = np.array([float(t) for t in lines[0][1].split()], dtype=float)
    except ValueError as exc:
        raise DataError(f"{path}:{lines[0][0]}: {fix}: {exc}") from exc
    if x.size != prog.m:
        raise DataError(f"{path}: the first line has {x.size} values; the program has m = {prog.m} "
                        "variables (is it the solution of this program?)")
    mats: dict[int, list[np.ndarray]] = {}
    for no, s in lines[1:]:
        toks = s.split()
        ints = [_integer(t) for t in toks[:4]]
        if len(toks) != 5 or any(v is None for v in ints):
            raise DataError(f"{path}:{no}: {fix}; got {s!r}")
        try:
            v = float(toks[4])
        except ValueError as exc:
            raise DataError(f"{path}:{no}: {fix}: {exc}") from exc
        matno, blk, i, j = ints
        if matno not in (1, 2):
            raise DataError(f"{path}:{no}: matrix number {matno}: a CSDP solution has only matrix 1 "
                            "(the primal slack X) and 2 (the dual Y)")
        if not 1 <= blk <= len(prog.blocks) or not 1 <= min(i, j) or max(i, j) > prog.blocks[blk - 1].order:
            raise DataError(f"{path}:{no}: entry ({matno} {blk} {i} {j}) is outside the program's "
                            f"block structure ({len(prog.blocks)} blocks of orders "
                            f"{', '.join(str(b.order) for b in prog.blocks[:6])}"
                            f"{', ...' if len(prog.blocks) > 6 else ''})")
        b = prog.blocks[blk - 1]
        if b.diagonal and i != j:
            raise DataError(f"{path}:{no}: entry ({matno} {blk} {i} {j}) is off the diagonal of the "
                            "diagonal block {blk}")
        out = mats.setdefault(matno, [np.zeros(p.order) if p.diagonal else np.zeros((p.order, p.order))
                                      for p in prog.blocks])
        if b.diagonal:
            out[blk - 1][i - 1] = v
        else:
            out[blk - 1][i - 1, j - 1] = out[blk - 1][j - 1, i - 1] = v
    return SDPASolution(x=x, X=mats.get(1), Y=mats.get(2))


def write_sdpa_result(prog: SDPAProgram, sol: SDPASolution, path: str | Path) -> Path:
    """Write ``sol`` in the layout of SDPA's result file (``phase.value``, ``objValPrimal``,
    ``xVec``, ``xMat``, ``yMat``; dense blocks, diagonal blocks as vectors; 17 significant
    digits).  The phase follows ``sol.status``: ``pdOPT`` for ``optimal``, ``dUNBD`` for an
    infeasible program (``yMat`` is the certificate), ``pdFEAS`` otherwise."""
    def vec(v: np.ndarray) -> str:
        return "{" + ",".join(f"{t:+.16e}" for t in v) + "}"

    def mats(Ms: list[np.ndarray]) -> str:
        parts = []
        for b, M in zip(prog.blocks, Ms):
            M = np.asarray(M, dtype=float)
            parts.append(vec(M) if b.diagonal else "{\n" + ",\n".join(vec(r) for r in M) + "\n}")
        return "{\n" + "\n".join(parts) + "\n}"

    x = np.asarray(sol.x, dtype=float)
    if sol.status.startswith("infeasible"):
        phase = "dUNBD"
    elif sol.status.startswith("unbounded"):
        phase = "pUNBD"
    elif sol.Y is None:
        phase = "noINFO"
    else:
        phase = "pdOPT" if sol.status in ("", "optimal") else "pdFEAS"
    lines = [f"phase.value = {phase}", f"objValPrimal = {float(prog.c @ x):+.16e}"]
    if sol.Y is not None:
        lines.append(f"objValDual   = {float(prog.traces(sol.Y)[0]):+.16e}")
    lines += ["xVec = ", vec(x)]
    if sol.X is not None:
        lines += ["xMat = ", mats(sol.X)]
    if sol.Y is not None:
        lines += ["yMat = ", mats(sol.Y)]
    return write_file(path, "\n".join(lines) + "\n")


_NUM = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?inf|[+-]?nan", re.I)


def _parse_braces(text: str, start: int) -> tuple[Any, int, list[str]]:
    """Parse ``{...}`` nested lists of numbers from ``text[start:]`` (at a ``{``); also
    the numbers as written."""
    stack: list[list] = []
    raw: list[str] = []
    k = start
    while k < len(text):
        ch = text[k]
        if ch == "{":
            stack.append([])
            k += 1
        elif ch == "}":
            if not stack:
                raise ValueError("unbalanced braces")
            done = stack.pop()
            if not stack:
                return done, k + 1, raw
            stack[-1].append(done)
            k += 1
        elif ch in " \t\r\n,":
            k += 1
        else:
            mt = _NUM.match(text, k)
            if mt is None or not stack:
                raise ValueError(f"unexpected {text[k:k + 20]!r}")
            stack[-1].append(float(mt.group()))
            raw.append(mt.group())
            k = mt.end()
    raise ValueError("unbalanced braces")


def _significant_digits(tokens: list[str]) -> int | None:
    """The most significant digits among numbers as written (``+3.000e+00``: 4)."""
    best = None
    for t in tokens:
        mant = re.split(r"[eE]", t.lstrip("+-"))[0].replace(".", "")
        if mant.isdigit():
            best = max(best or 0, len(mant.lstrip("0")) or len(mant))
    return best


def _flat(raw: Any, path: Path, name: str) -> np.ndarray:
    if any(isinstance(v, list) for v in raw):
        raise DataError(f"{path}: {name} must be a flat list of numbers {{a,b,...}}; it has nested braces")
    return np.asarray(raw, dtype=float)


def read_sdpa_result(prog: SDPAProgram, path: str | Path) -> SDPASolution:
    """Read SDPA's result file for ``prog``: ``phase.value`` (the status SDPA reports),
    ``xVec`` (required), ``xMat`` and ``yMat``; ``digits`` is the precision they were
    printed with (SDPA's default ``%+8.3e``: 4)."""
    path = Path(path)
    text = _read_text(path, "SDPA result file")
    raw_tokens: list[str] = []

    def section(name: str) -> Any:
        mt = re.search(rf"^\s*{name}\s*=", text, re.M)
        if mt is None:
            return None
        brace = text.find("{", mt.end())
        if brace < 0 or text[mt.end():brace].strip():
            raise DataError(f"{path}: '{name} =' is not followed by '{{...}}'")
        try:
            out, _, raw = _parse_braces(text, brace)
        except (ValueError, IndexError, RecursionError) as exc:
            raise DataError(f"{path}: cannot parse {name}: {exc}") from exc
        raw_tokens.extend(raw)
        return out

    phase = None
    mt = re.search(r"^\s*phase\.value\s*=\s*(\S+)", text, re.M)
    if mt is not None:
        phase = mt.group(1)
        if phase not in SDPA_PHASES:
            raise DataError(f"{path}: phase.value = {phase!r} is not one of SDPA's phases "
                            f"({', '.join(SDPA_PHASES)})")
    xv = section("xVec")
    if xv is None:
        raise DataError(f"{path}: no 'xVec =' in the file (is it an SDPA result file?)")
    x = _flat(xv, path, "xVec")
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
        for k, (b, M) in enumerate(zip(prog.blocks, raw), 1):
            if not isinstance(M, list):
                raise DataError(f"{path}: block {k} of {name} is a number, not {{...}}")
            try:
                A = np.asarray(M, dtype=float)
            except ValueError as exc:
                raise DataError(f"{path}: block {k} of {name} is ragged: {exc}") from exc
            if not b.diagonal and b.order == 1 and A.shape == (1,):
                A = A.reshape(1, 1)  # SDPA writes a 1x1 block as {+x}
            want = (b.order,) if b.diagonal else (b.order, b.order)
            if A.shape != want:
                raise DataError(f"{path}: block {k} of {name} has shape {A.shape}, expected {want}")
            out.append(A)
        return out

    X, Y = blocks(section("xMat"), "xMat"), blocks(section("yMat"), "yMat")
    return SDPASolution(x=x, X=X, Y=Y, status=phase or "", digits=_significant_digits(raw_tokens))
