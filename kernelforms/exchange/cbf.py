"""The Conic Benchmark Format (CBF, version 3; read by MOSEK and others): writer and reader.

CBF states ``min/max  a^T x + b0``  s.t.  ``A x + b`` in a product of cones (``CON``),
``x`` in cones (``VAR``), and affine PSD constraints ``sum_j x_j H_j + D PSD``
(``PSDCON``, with ``HCOORD`` / ``DCOORD`` giving lower-triangle entries, 0-based).  A
:class:`~kernelforms.exchange.standard.ConicForm` ``b - A x in K`` maps onto it with no
reformulation:

* free variables (``VAR n 1`` / ``F n``);
* zero rows ``L=``, nonnegative rows ``L+``, each second-order cone ``Q`` (``-A``, ``b``);
* each exponential cone ``EXP``: CBF's triple ``(u0, u1, u2)`` means
  ``u0 >= u1 exp(u2 / u1)``, SCS's ``(u, v, w)`` means ``w >= v exp(u / v)``, so the rows
  are written in the order ``(w, v, u)``;
* each PSD cone a ``PSDCON`` of its order (SCS's svec unscaled: off-diagonal ``/ sqrt(2)``);
* the objective's constant as ``OBJBCOORD`` and the sense as ``OBJSENSE`` (a maximisation
  is written as ``MAX`` of the problem's own objective), so a CBF solver's optimum is the
  problem's objective itself.

The reader (:func:`read_cbf`) reads these keywords, matrix variables (``PSDVAR`` with
``OBJFCOORD`` / ``FCOORD``) and the cones ``F``, ``L+``, ``L-``, ``L=``, ``Q``, ``QR``,
``EXP`` for variables and rows; it refuses what it does not implement (``INT``, power
cones, ``EXP*``) with the line and the keyword in the message.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from .standard import ConicForm, psd_positions

META_PREFIX = "# kernelforms:"
CBF_VERSION = 3
#: cones the reader handles, for variables and rows
CONES = ("F", "L+", "L-", "L=", "Q", "QR", "EXP")


@dataclass
class CBFProgram:
    """A CBF instance: scalar variables ``x`` (cones ``var_cones``), matrix variables
    ``X_j`` (``PSDVAR``, orders ``psdvar``), rows ``A x + sum_j <F_ij, X_j> + b`` in the
    cones ``con_cones``, and affine PSD constraints ``sum_k x_k H_k + D`` (``PSDCON``,
    orders ``psdcon``).  Symmetric coefficient matrices are held as full column-major
    vectors of length ``p * p`` (an entry given at ``(k, l)`` is at both ``(k, l)`` and
    ``(l, k)``), so that ``<F, X> = F . vec(X)``."""

    sense: str
    var_cones: list[tuple[str, int]]
    con_cones: list[tuple[str, int]]
    psdcon: list[int]
    obj: np.ndarray
    obj_const: float
    A: Any
    b: np.ndarray
    H: list[Any] = field(default_factory=list)  # per PSDCON: (p*p x n) sparse
    D: list[np.ndarray] = field(default_factory=list)  # per PSDCON: (p*p,)
    psdvar: list[int] = field(default_factory=list)
    objF: list[np.ndarray] = field(default_factory=list)  # per PSDVAR: (p*p,)
    F: list[Any] = field(default_factory=list)  # per PSDVAR: (ncon x p*p) sparse
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.obj.size)

    def to_cvxpy(self, parts: list | None = None) -> tuple[Any, Any]:
        """A ``cvxpy.Problem`` of the instance and its scalar variable ``x`` (None when the
        instance has none); the matrix variables are symmetric, each with ``X_j >> 0``.

        With a list ``parts``, it receives one ``(constraint, cone, G, h)`` per cone
        constraint: the constraint's argument is ``G z + h`` for ``z = (x, vec X_1, ...)``
        (what :func:`check_cbf` needs)."""
        import cvxpy as cp

        n, sizes = self.n, [p * p for p in self.psdvar]
        N = n + sum(sizes)
        offs = np.cumsum([n] + sizes)
        parts = [] if parts is None else parts

        def rec(G: Any, h: np.ndarray) -> Any:
            return lambda con, name, r, d: parts.append((con, name, G[r:r + d], h[r:r + d]))

        x = cp.Variable(n, name="x") if n else None
        Xs = [cp.Variable((p, p), symmetric=True, name=f"X{j}") for j, p in enumerate(self.psdvar)]
        vecs = [cp.vec(X, order="F") for X in Xs]
        cons: list[Any] = []
        for j, (X, q) in enumerate(zip(Xs, sizes)):
            cons.append(X >> 0)
            G = sp.csr_matrix((np.ones(q), (np.arange(q), offs[j] + np.arange(q))), shape=(q, N))
            parts.append((cons[-1], "PSD", G, np.zeros(q)))
        if x is not None:
            _cone_constraints(cons, x, self.var_cones,
                              rec(sp.eye(n, N, format="csr"), np.zeros(n)))
        if self.b.size:
            g: Any = self.b
            if x is not None:
                g = self.A @ x + g
            for Fj, v in zip(self.F, vecs):
                if Fj.nnz:
                    g = Fj @ v + g
            G = sp.hstack([self.A] + list(self.F), format="csr") if N else sp.csr_matrix((self.b.size, 0))
            _cone_constraints(cons, g, self.con_cones, rec(G, self.b))
        for p, Hk, Dk in zip(self.psdcon, self.H, self.D):
            M = Hk @ x + Dk if x is not None else Dk
            cons.append(cp.reshape(M, (p, p), order="F") >> 0)
            G = sp.hstack([Hk, sp.csr_matrix((p * p, N - n))], format="csr")
            parts.append((cons[-1], "PSD", G, np.asarray(Dk, dtype=float)))
        obj: Any = self.obj_const
        if x is not None:
            obj = self.obj @ x + obj
        for c, v in zip(self.objF, vecs):
            if np.any(c):
                obj = c @ v + obj
        if not isinstance(obj, cp.Expression):
            obj = cp.Constant(obj)
        prob = cp.Problem(cp.Minimize(obj) if self.sense == "MIN" else cp.Maximize(obj), cons)
        return prob, x


def _cone_constraints(cons: list, g: Any, cones: list[tuple[str, int]], rec: Any = None) -> None:
    import cvxpy as cp

    r = 0
    for name, d in cones:
        e = g[r:r + d]
        before = len(cons)
        if name == "L+":
            cons.append(e >= 0)
        elif name == "L-":
            cons.append(e <= 0)
        elif name == "L=":
            cons.append(e == 0)
        elif name == "Q":
            cons.append(cp.SOC(e[0], e[1:]))
        elif name == "QR":  # 2 u0 u1 >= ||u2:||^2, u0, u1 >= 0
            cons.append(cp.SOC(e[0] + e[1], cp.hstack([e[0] - e[1], math.sqrt(2.0) * e[2:]])))
        elif name == "EXP":  # u0 >= u1 exp(u2 / u1)
            cons.append(cp.constraints.ExpCone(e[2], e[1], e[0]))
        if rec is not None and len(cons) > before:
            rec(cons[-1], name, r, d)
        r += d


def _primal_violation(name: str, g: np.ndarray) -> float:
    """How far ``g`` is outside the cone ``name`` (0 inside)."""
    if name == "L+":
        return float(max(0.0, -g.min()))
    if name == "L-":
        return float(max(0.0, g.max()))
    if name == "L=":
        return float(np.abs(g).max())
    if name == "Q":
        return float(max(0.0, np.linalg.norm(g[1:]) - g[0]))
    if name == "QR":
        t, u = g[0] + g[1], np.concatenate([[g[0] - g[1]], math.sqrt(2.0) * g[2:]])
        return float(max(0.0, np.linalg.norm(u) - t))
    if name == "EXP":  # u0 >= u1 exp(u2 / u1), u1 > 0 (or u1 = 0, u2 <= 0, u0 >= 0)
        u0, u1, u2 = g
        if u1 > 0:
            with np.errstate(over="ignore"):
                return float(max(0.0, u1 * math.exp(min(u2 / u1, 700.0)) - u0))
        return float(max(0.0, -u1, u2, -u0))
    p = int(round(math.sqrt(g.size)))
    M = g.reshape(p, p, order="F")
    return float(max(0.0, -np.linalg.eigvalsh((M + M.T) / 2)[0]))


def _dual_of(con: Any, name: str) -> tuple[np.ndarray, float] | None:
    """The multiplier ``y`` of a constraint in the convention ``L = f - y . (G z + h)`` for
    the minimisation, and how far it is outside the dual cone."""
    dv = con.dual_value
    if dv is None:
        return None
    if name == "L+":
        y = np.atleast_1d(np.asarray(dv, dtype=float)).ravel()
        return y, float(max(0.0, -y.min()))
    if name == "L-":
        y = -np.atleast_1d(np.asarray(dv, dtype=float)).ravel()
        return y, float(max(0.0, y.max()))
    if name == "L=":
        return -np.atleast_1d(np.asarray(dv, dtype=float)).ravel(), 0.0
    if name in ("Q", "QR"):
        a = float(np.asarray(dv[0], dtype=float).ravel()[0])
        bvec = np.asarray(dv[1], dtype=float).ravel()
        bad = float(max(0.0, np.linalg.norm(bvec) - a))
        if name == "Q":
            return np.concatenate([[a], bvec]), bad
        return np.concatenate([[a + bvec[0], a - bvec[0]], math.sqrt(2.0) * bvec[1:]]), bad
    if name == "EXP":  # CVXPY's ExpCone(u2, u1, u0): multipliers (ux, uy, uz) of (u2, u1, u0)
        ux, uy, uz = (float(np.asarray(v, dtype=float).ravel()[0]) for v in dv)
        if ux < 0:
            with np.errstate(over="ignore"):
                bad = max(0.0, -ux * math.exp(min(uy / ux, 700.0)) - math.e * uz)
        else:
            bad = max(0.0, ux, -uy, -uz)
        return np.array([uz, uy, ux]), float(bad)
    Y = np.asarray(dv, dtype=float)
    Y = (Y + Y.T) / 2
    return Y.ravel(order="F"), float(max(0.0, -np.linalg.eigvalsh(Y)[0]))


def check_cbf(prog: CBFProgram, problem: Any, parts: list) -> dict[str, float] | None:
    """Primal residual, dual residual and cone membership, and the duality gap of a solve
    of :meth:`CBFProgram.to_cvxpy`, from the solver's primal values and CVXPY's
    multipliers (relative as in :func:`~kernelforms.exchange.sdpa.check_solution`);
    None when a value is missing."""
    import cvxpy as cp

    values = []
    for v in problem.variables():
        if v.value is None:
            return None
    x = [v for v in problem.variables() if v.name() == "x"]
    if x:
        values.append(np.asarray(x[0].value, dtype=float).ravel())
    for j in range(len(prog.psdvar)):
        X = next(v for v in problem.variables() if v.name() == f"X{j}")
        values.append(np.asarray(X.value, dtype=float).ravel(order="F"))
    z = np.concatenate(values) if values else np.zeros(0)
    q = np.concatenate([prog.obj] + list(prog.objF)) if z.size else np.zeros(0)
    sgn = 1.0 if isinstance(problem.objective, cp.Minimize) else -1.0
    q, q0 = sgn * q, sgn * prog.obj_const
    hscale = 1.0 + max([float(np.abs(h).max()) for _, _, _, h in parts if h.size] + [0.0])
    qscale = 1.0 + (float(np.abs(q).max()) if q.size else 0.0)
    pinf = cone = 0.0
    resid = q.copy()
    dobj = q0
    for con, name, G, h in parts:
        g = G @ z + h
        pinf = max(pinf, _primal_violation(name, g))
        dual = _dual_of(con, name)
        if dual is None:
            return None
        y, bad = dual
        cone = max(cone, bad)
        resid -= G.T @ y
        dobj -= float(y @ h)
    # a symmetric matrix variable moves only along symmetric directions
    off = prog.n
    for p in prog.psdvar:
        R = resid[off:off + p * p].reshape(p, p, order="F")
        resid[off:off + p * p] = ((R + R.T) / 2).ravel(order="F")
        off += p * p
    pobj = float(q @ z + q0)
    res = float(np.abs(resid).max()) if resid.size else 0.0
    return {"primal_infeas": pinf / hscale, "dual_infeas": max(res, cone) / qscale,
            "gap": abs(pobj - dobj) / (1.0 + abs(pobj) + abs(dobj)), "pobj": sgn * pobj,
            "dobj": sgn * dobj}


# ---------------------------------------------------------------------- writer
def write_cbf(form: ConicForm, path: str | Path, comments: list[str] | None = None) -> Path:
    """Write a conic form as a CBF (version 3) file."""
    path = Path(path)
    rows_of = form.cone_rows()
    A = sp.csr_matrix(form.A)
    con_rows: list[np.ndarray] = []
    cones: list[tuple[str, int]] = []
    if form.zero:
        con_rows.append(np.arange(*rows_of["zero"]))
        cones.append(("L=", form.zero))
    if form.nonneg:
        con_rows.append(np.arange(*rows_of["nonneg"]))
        cones.append(("L+", form.nonneg))
    r = rows_of["soc"][0]
    for q in form.soc:
        con_rows.append(np.arange(r, r + q))
        cones.append(("Q", q))
        r += q
    r = rows_of["exp"][0]
    for _ in range(form.exp):
        con_rows.append(np.array([r + 2, r + 1, r]))
        cones.append(("EXP", 3))
        r += 3
    rows = np.concatenate(con_rows) if con_rows else np.zeros(0, dtype=int)
    Acon = (-A[rows]).tocoo()
    bcon = form.b[rows]
    sgn = form.sign  # MAX of the problem's objective for a maximisation
    meta = {**form.meta, "sign": form.sign}
    out = [f"# {line}" for line in (comments or [])]
    out.append(f"{META_PREFIX} {json.dumps(meta, sort_keys=True)}")
    out += ["VER", str(CBF_VERSION), "", "OBJSENSE", "MIN" if sgn > 0 else "MAX", "",
            "VAR", f"{form.n} 1", f"F {form.n}", ""]
    if form.psd:
        out += ["PSDCON", str(len(form.psd))] + [str(p) for p in form.psd] + [""]
    if rows.size:
        out += ["CON", f"{rows.size} {len(cones)}"] + [f"{c} {d}" for c, d in cones] + [""]
    nz = np.flatnonzero(form.c)
    if nz.size:
        out += ["OBJACOORD", str(nz.size)] + [f"{j} {_fmt(sgn * form.c[j])}" for j in nz] + [""]
    if form.offset != 0.0:
        out += ["OBJBCOORD", _fmt(sgn * form.offset), ""]
    if Acon.nnz:
        order = np.lexsort((Acon.col, Acon.row))
        out += ["ACOORD", str(Acon.nnz)] + [f"{Acon.row[k]} {Acon.col[k]} {_fmt(Acon.data[k])}"
                                            for k in order] + [""]
    bnz = np.flatnonzero(bcon)
    if bnz.size:
        out += ["BCOORD", str(bnz.size)] + [f"{i} {_fmt(bcon[i])}" for i in bnz] + [""]
    if form.psd:
        h_lines, d_lines = [], []
        r = rows_of["psd"][0]
        for k, p in enumerate(form.psd):
            li, lj, fac = psd_positions(p)
            d = li.size
            blockA = (-A[r:r + d]).tocoo()
            for t in np.lexsort((blockA.col, blockA.row)):
                q, var, v = blockA.row[t], blockA.col[t], blockA.data[t] * fac[blockA.row[t]]
                h_lines.append(f"{k} {var} {li[q]} {lj[q]} {_fmt(v)}")
            bvals = form.b[r:r + d] * fac
            for q in np.flatnonzero(bvals):
                d_lines.append(f"{k} {li[q]} {lj[q]} {_fmt(bvals[q])}")
            r += d
        if h_lines:
            out += ["HCOORD", str(len(h_lines))] + h_lines + [""]
        if d_lines:
            out += ["DCOORD", str(len(d_lines))] + d_lines + [""]
    from .sdpa import write_file

    return write_file(path, "\n".join(out) + "\n")


def _fmt(v: float) -> str:
    return repr(float(v))


# ---------------------------------------------------------------------- reader
_REFUSED = {
    "INT": "integer variables (INT)", "POWCONES": "power cones (POWCONES)",
    "POW*CONES": "power cones (POW*CONES)", "CHANGE": "problem sequences (CHANGE)",
}
#: fields of each coordinate section
_COORDS = {"OBJACOORD": 2, "OBJFCOORD": 4, "ACOORD": 3, "BCOORD": 2, "FCOORD": 5, "HCOORD": 5,
           "DCOORD": 4}


def _sym_rows(k: np.ndarray, l: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Column-major positions of the entries ``(k, l)`` of a symmetric ``p x p`` matrix and
    of their mirrors (off the diagonal), and the index of the entry each one comes from."""
    src = np.arange(k.size)
    off = k != l
    rows = np.concatenate([k + l * p, (l + k * p)[off]])
    return rows.astype(np.int64), np.concatenate([src, src[off]])


def _groups(which: np.ndarray, count: int) -> list[np.ndarray]:
    """The entries of each matrix ``0..count-1`` (one sort, not a mask per matrix)."""
    order = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[order], np.arange(count + 1))
    return [order[cuts[k]:cuts[k + 1]] for k in range(count)]


def read_cbf(path: str | Path, max_memory: Any = None) -> CBFProgram:
    """Read a CBF file (versions 1-4): scalar and matrix (``PSDVAR``) variables, the cones
    ``F``, ``L+``, ``L-``, ``L=``, ``Q``, ``QR``, ``EXP``, affine PSD constraints
    (``PSDCON``), and ``OBJACOORD`` / ``OBJBCOORD`` / ``OBJFCOORD`` / ``ACOORD`` /
    ``BCOORD`` / ``FCOORD`` / ``HCOORD`` / ``DCOORD``.

    Raises :class:`~kernelforms.errors.DataError` naming the line of a malformed file (junk
    after a token, a negative or out-of-range index, fewer lines than a section declares),
    the line and keyword of what this reader refuses (``INT``, power cones, ``EXP*``),
    and, before allocating anything, declared sizes that need more than ``max_memory``
    bytes (default 4 GiB).
    """
    from .sdpa import _integer, _read_text, read_metadata

    path = Path(path)
    raw = _read_text(path, "CBF file").splitlines()
    meta: dict[str, Any] = {}
    lines: list[tuple[int, str]] = []
    for no, line in enumerate(raw, 1):
        s = line.strip()
        if s.startswith(META_PREFIX):
            meta = read_metadata(s, META_PREFIX, f"{path}:{no}")
            continue
        if s and not s.startswith("#"):
            lines.append((no, s))
    pos = 0

    def err(no: int, what: str) -> DataError:
        return DataError(f"{path}:{no}: {what}")

    def take(what: str) -> tuple[int, list[str]]:
        nonlocal pos
        if pos >= len(lines):
            raise DataError(f"{path}: the file ends inside the {what} section")
        pos += 1
        no, s = lines[pos - 1]
        return no, s.split()

    def count(what: str, lo: int = 0) -> tuple[int, int]:
        no, toks = take(what)
        v = _integer(toks[0]) if len(toks) == 1 else None
        if v is None or v < lo:
            raise err(no, f"{what} expects one integer >= {lo} on this line, got {' '.join(toks)!r}")
        return no, v

    def room(no: int, what: str, k: int) -> None:
        if k > len(lines) - pos:
            raise err(no, f"{what} declares {k} lines but the file has only {len(lines) - pos} left")

    def cones(what: str, k: int) -> list[tuple[str, int]]:
        out = []
        for _ in range(k):
            no, toks = take(what)
            if len(toks) != 2 or _integer(toks[1]) is None or _integer(toks[1]) < 0:
                raise err(no, f"{what} expects 'CONE dim' (dim an integer >= 0), got {' '.join(toks)!r}")
            name, d = toks[0], int(_integer(toks[1]))
            if name not in CONES:
                kind = "power cones" if "POW" in name or name.startswith("@") else f"the cone {name!r}"
                raise err(no, f"{kind} ({name}) are not supported by this reader (it reads "
                              f"{', '.join(CONES)})")
            if (name == "EXP" and d != 3) or (name == "Q" and d < 1) or (name == "QR" and d < 2):
                raise err(no, f"a {name} cone of dimension {d}")
            out.append((name, d))
        return out

    seen: dict[str, int] = {}
    sense, nvar, var_cones, ncon, con_cones = "MIN", None, [], 0, []
    psdvar: list[int] = []
    psdcon: list[int] = []
    coords: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # values, line numbers
    obj_const = 0.0
    first = True
    while pos < len(lines):
        no, toks = take("keyword")
        key = toks[0]
        if len(toks) != 1:
            raise err(no, f"a keyword line holds the keyword alone; got {' '.join(toks)!r}")
        if first and key != "VER":
            raise err(no, f"a CBF file starts with VER, got {key!r}")
        first = False
        if key in seen:
            raise err(no, f"{key} given twice (first at line {seen[key]})")
        seen[key] = no
        if key == "VER":
            n2, ver = count("VER", 1)
            if ver > 4:
                raise err(n2, f"CBF version {ver} is newer than this reader (<= 4)")
        elif key == "OBJSENSE":
            n2, t = take("OBJSENSE")
            if t not in (["MIN"], ["MAX"]):
                raise err(n2, f"OBJSENSE must be MIN or MAX, got {' '.join(t)!r}")
            sense = t[0]
        elif key in ("VAR", "CON"):
            n2, t = take(key)
            vals = [_integer(v) for v in t]
            if len(t) != 2 or any(v is None or v < 0 for v in vals):
                raise err(n2, f"{key} expects two integers >= 0 (entries, cones), got {' '.join(t)!r}")
            room(n2, key, vals[1])
            cs = cones(key, vals[1])
            if sum(d for _, d in cs) != vals[0]:
                raise err(n2, f"the {key} cones cover {sum(d for _, d in cs)} of {vals[0]} entries")
            if key == "VAR":
                nvar, var_cones = vals[0], cs
            else:
                ncon, con_cones = vals[0], cs
        elif key in ("PSDVAR", "PSDCON"):
            n2, k = count(key)
            room(n2, key, k)
            orders = []
            for _ in range(k):
                n3, p = count(key, 1)
                orders.append(p)
            if key == "PSDVAR":
                psdvar = orders
            else:
                psdcon = orders
        elif key == "OBJBCOORD":
            n2, t = take(key)
            try:
                if len(t) != 1:
                    raise ValueError
                obj_const = float(t[0])
            except ValueError:
                raise err(n2, f"OBJBCOORD expects one number, got {' '.join(t)!r}") from None
            if not math.isfinite(obj_const):
                raise err(n2, "OBJBCOORD is not finite")
        elif key in _COORDS:
            width = _COORDS[key]
            n2, k = count(key)
            room(n2, key, k)
            vals = np.empty((k, width))
            nos = np.empty(k, dtype=np.int64)
            for r in range(k):
                n3, t = take(key)
                nos[r] = n3
                try:
                    if len(t) != width:
                        raise ValueError
                    vals[r] = [float(v) for v in t]
                except ValueError:
                    raise err(n3, f"{key} expects {width - 1} integer index(es) and a value, got "
                                  f"{' '.join(t)!r}") from None
            if k:
                idx = vals[:, :-1]
                bad = ~np.isfinite(vals).all(axis=1) | (idx != np.round(idx)).any(axis=1) | (idx < 0).any(axis=1)
                if bad.any():
                    r = int(np.flatnonzero(bad)[0])
                    raise err(int(nos[r]), f"{key}: indices must be integers >= 0 and the value finite, "
                                           f"got {vals[r].tolist()}")
            coords[key] = (vals, nos)
        elif key in _REFUSED:
            raise err(no, f"{_REFUSED[key]} are not supported by this reader (keyword {key})")
        else:
            raise err(no, f"unknown CBF keyword {key!r}")
    if nvar is None:
        raise DataError(f"{path}: no VAR section")
    from .standard import BYTES_PER_PSD_ENTRY, memory_guard

    need = 8.0 * 8 * (nvar + ncon) + BYTES_PER_PSD_ENTRY * sum(float(p) ** 2 for p in psdvar + psdcon)
    memory_guard(path, f"its sizes ({nvar} variables, {ncon} rows, PSD orders "
                       f"{', '.join(map(str, (psdvar + psdcon)[:6])) or 'none'})", need, max_memory)

    def cols(key: str, q: int, bound: int, what: str, rows: np.ndarray | None = None) -> np.ndarray:
        vals, nos = coords[key]
        c = vals[:, q]
        lim = np.full(c.size, bound, dtype=float) if rows is None else rows
        out = c >= lim
        if out.any():
            r = int(np.flatnonzero(out)[0])
            raise err(int(nos[r]), f"{key}: {what} {int(c[r])} is out of range (it must be < {int(lim[r])})")
        return c.astype(np.int64)

    def section(key: str) -> np.ndarray | None:
        return coords[key][0] if key in coords and coords[key][0].size else None

    obj = np.zeros(nvar)
    if section("OBJACOORD") is not None:
        np.add.at(obj, cols("OBJACOORD", 0, nvar, "the variable"), coords["OBJACOORD"][0][:, 1])
    A = sp.csr_matrix((ncon, nvar))
    if section("ACOORD") is not None:
        v = coords["ACOORD"][0]
        A = sp.csr_matrix((v[:, 2], (cols("ACOORD", 0, ncon, "the row"), cols("ACOORD", 1, nvar, "the variable"))),
                          shape=(ncon, nvar))
    b = np.zeros(ncon)
    if section("BCOORD") is not None:
        np.add.at(b, cols("BCOORD", 0, ncon, "the row"), coords["BCOORD"][0][:, 1])

    def matrix_positions(key: str, first: int, orders: list[int], what: str) -> tuple[np.ndarray, np.ndarray]:
        """Which matrix each entry belongs to, and its (k, l) checked against the order."""
        which = cols(key, first, len(orders), what)
        order = np.asarray(orders, dtype=float)[which] if orders else np.zeros(0)
        cols(key, first + 1, 0, "the row index", rows=order)
        cols(key, first + 2, 0, "the column index", rows=order)
        return which, order

    def add_matrices(key, sizes, what, out):
        """Entries ``(matrix, row, col, value)`` of ``key`` added into the vectorised
        symmetric matrices ``out`` (one per size): OBJFCOORD and DCOORD."""
        v = coords[key][0]
        which, _ = matrix_positions(key, 0, sizes, what)
        for j, (p, sel) in enumerate(zip(sizes, _groups(which, len(sizes)))):
            rows, src = _sym_rows(v[sel, 1].astype(np.int64), v[sel, 2].astype(np.int64), p)
            np.add.at(out[j], rows, v[sel, 3][src])

    objF = [np.zeros(p * p) for p in psdvar]
    F = [sp.csr_matrix((ncon, p * p)) for p in psdvar]
    if section("OBJFCOORD") is not None:
        add_matrices("OBJFCOORD", psdvar, "the PSDVAR", objF)
    if section("FCOORD") is not None:
        v = coords["FCOORD"][0]
        row = cols("FCOORD", 0, ncon, "the row")
        which, _ = matrix_positions("FCOORD", 1, psdvar, "the PSDVAR")
        for j, (p, sel) in enumerate(zip(psdvar, _groups(which, len(psdvar)))):
            rows, src = _sym_rows(v[sel, 2].astype(np.int64), v[sel, 3].astype(np.int64), p)
            F[j] = sp.csr_matrix((v[sel, 4][src], (row[sel][src], rows)), shape=(ncon, p * p))
    H = [sp.csr_matrix((p * p, nvar)) for p in psdcon]
    D = [np.zeros(p * p) for p in psdcon]
    if section("HCOORD") is not None:
        v = coords["HCOORD"][0]
        which = cols("HCOORD", 0, len(psdcon), "the PSDCON")
        var = cols("HCOORD", 1, nvar, "the variable")
        order = np.asarray(psdcon, dtype=float)[which]
        cols("HCOORD", 2, 0, "the row index", rows=order)
        cols("HCOORD", 3, 0, "the column index", rows=order)
        for k, (p, sel) in enumerate(zip(psdcon, _groups(which, len(psdcon)))):
            rows, src = _sym_rows(v[sel, 2].astype(np.int64), v[sel, 3].astype(np.int64), p)
            H[k] = sp.csr_matrix((v[sel, 4][src], (rows, var[sel][src])), shape=(p * p, nvar))
    if section("DCOORD") is not None:
        add_matrices("DCOORD", psdcon, "the PSDCON", D)
    return CBFProgram(sense=sense, var_cones=var_cones, con_cones=con_cones, psdcon=psdcon,
                      obj=obj, obj_const=obj_const, A=A, b=b, H=H, D=D, psdvar=psdvar, objF=objF,
                      F=F, meta=meta)
