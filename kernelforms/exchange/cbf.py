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

The reader (:func:`read_cbf`) reads these keywords (and the cones ``F``, ``L+``, ``L-``,
``L=``, ``Q``, ``QR``, ``EXP`` for variables and rows); it refuses what it does not
implement (``PSDVAR``, ``INT``, power cones, ``EXP*``) with the keyword in the message.
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
    """A CBF instance restricted to scalar variables (see the module docstring)."""

    sense: str
    var_cones: list[tuple[str, int]]
    con_cones: list[tuple[str, int]]
    psdcon: list[int]
    obj: np.ndarray
    obj_const: float
    A: Any
    b: np.ndarray
    H: list[Any] = field(default_factory=list)  # per PSDCON: (positions x n) sparse
    D: list[np.ndarray] = field(default_factory=list)  # per PSDCON: value per position
    pos: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (i >= j) per PSDCON
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.obj.size)

    def to_cvxpy(self) -> tuple[Any, Any]:
        """A ``cvxpy.Problem`` of the instance and its variable ``x``."""
        import cvxpy as cp

        x = cp.Variable(self.n, name="x")
        cons: list[Any] = []
        _cone_constraints(cons, x, self.var_cones)
        if self.b.size:
            _cone_constraints(cons, self.A @ x + self.b, self.con_cones)
        for p, Hk, Dk, (i, j) in zip(self.psdcon, self.H, self.D, self.pos):
            k = np.arange(i.size)
            off = i != j
            rows = np.concatenate([i + j * p, (j + i * p)[off]])
            cols = np.concatenate([k, k[off]])
            P = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(p * p, i.size))
            cons.append(cp.reshape(P @ (Hk @ x + Dk), (p, p), order="F") >> 0)
        obj = self.obj @ x + self.obj_const
        prob = cp.Problem(cp.Minimize(obj) if self.sense == "MIN" else cp.Maximize(obj), cons)
        return prob, x


def _cone_constraints(cons: list, g: Any, cones: list[tuple[str, int]]) -> None:
    import cvxpy as cp

    r = 0
    for name, d in cones:
        e = g[r:r + d]
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
        r += d


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
    path.write_text("\n".join(out) + "\n", encoding="ascii")
    return path


def _fmt(v: float) -> str:
    return repr(float(v))


# ---------------------------------------------------------------------- reader
_UNSUPPORTED = {
    "PSDVAR": "matrix variables (PSDVAR)", "OBJFCOORD": "matrix variables (OBJFCOORD)",
    "FCOORD": "matrix variables (FCOORD)", "INT": "integer variables (INT)",
    "POWCONES": "power cones (POWCONES)", "POW*CONES": "power cones (POW*CONES)",
    "CHANGE": "problem sequences (CHANGE)",
}


def read_cbf(path: str | Path) -> CBFProgram:
    """Read a CBF file (scalar variables; see the module docstring for the cones).

    Raises :class:`~kernelforms.errors.DataError` naming the line of a malformed file or
    the keyword this reader does not implement.
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError as exc:
        raise DataError(f"cannot read the CBF file {str(path)!r}: {exc}") from exc
    meta: dict[str, Any] = {}
    lines: list[tuple[int, str]] = []
    for no, line in enumerate(raw, 1):
        s = line.strip()
        if s.startswith(META_PREFIX):
            try:
                meta = json.loads(s[len(META_PREFIX):])
            except json.JSONDecodeError:
                pass
            continue
        if s and not s.startswith("#"):
            lines.append((no, s))
    pos = 0

    def take() -> tuple[int, str]:
        nonlocal pos
        if pos >= len(lines):
            raise DataError(f"{path}: the file ends inside a section")
        pos += 1
        return lines[pos - 1]

    def ints(no: int, s: str, k: int) -> list[int]:
        try:
            v = [int(t) for t in s.split()[:k]]
        except ValueError as exc:
            raise DataError(f"{path}:{no}: expected {k} integer(s), got {s!r}") from exc
        if len(v) < k:
            raise DataError(f"{path}:{no}: expected {k} integer(s), got {s!r}")
        return v

    def cones(count: int) -> list[tuple[str, int]]:
        out = []
        for _ in range(count):
            no, s = take()
            parts = s.split()
            if len(parts) != 2:
                raise DataError(f"{path}:{no}: expected 'CONE dim', got {s!r}")
            if parts[0] not in CONES:
                raise DataError(f"{path}:{no}: cone {parts[0]!r} is not supported by this reader "
                                f"(it reads {', '.join(CONES)})")
            out.append((parts[0], ints(no, parts[1], 1)[0]))
        return out

    def triplets(width: int) -> np.ndarray:
        no, s = take()
        count = ints(no, s, 1)[0]
        rows = []
        for _ in range(count):
            no, s = take()
            parts = s.split()
            if len(parts) != width:
                raise DataError(f"{path}:{no}: expected {width} fields, got {s!r}")
            try:
                rows.append([float(t) for t in parts])
            except ValueError as exc:
                raise DataError(f"{path}:{no}: {exc}") from exc
        return np.array(rows, dtype=float).reshape(-1, width)

    sense, nvar, var_cones, ncon, con_cones, psdcon = "MIN", None, [], 0, [], []
    objacoord = acoord = bcoord = hcoord = dcoord = None
    obj_const = 0.0
    while pos < len(lines):
        no, key = take()
        key = key.split()[0]
        if key == "VER":
            ver = ints(*take(), 1)[0]
            if ver > 4:
                raise DataError(f"{path}: CBF version {ver} is newer than this reader (<= 4)")
        elif key == "OBJSENSE":
            _, sense = take()
            if sense not in ("MIN", "MAX"):
                raise DataError(f"{path}: OBJSENSE must be MIN or MAX, got {sense!r}")
        elif key == "VAR":
            n2, s = take()
            nvar, k = ints(n2, s, 2)
            var_cones = cones(k)
        elif key == "CON":
            n2, s = take()
            ncon, k = ints(n2, s, 2)
            con_cones = cones(k)
        elif key == "PSDCON":
            n2, s = take()
            psdcon = [ints(*take(), 1)[0] for _ in range(ints(n2, s, 1)[0])]
        elif key == "OBJACOORD":
            objacoord = triplets(2)
        elif key == "OBJBCOORD":
            n2, s = take()
            obj_const = float(s)
        elif key == "ACOORD":
            acoord = triplets(3)
        elif key == "BCOORD":
            bcoord = triplets(2)
        elif key == "HCOORD":
            hcoord = triplets(5)
        elif key == "DCOORD":
            dcoord = triplets(4)
        elif key in _UNSUPPORTED:
            raise DataError(f"{path}:{no}: {_UNSUPPORTED[key]} are not supported by this reader")
        else:
            raise DataError(f"{path}:{no}: unknown CBF keyword {key!r}")
    if nvar is None:
        raise DataError(f"{path}: no VAR section")
    for what, cs, total in (("VAR", var_cones, nvar), ("CON", con_cones, ncon)):
        if sum(d for _, d in cs) != total:
            raise DataError(f"{path}: the {what} cones cover {sum(d for _, d in cs)} of {total} entries")
    obj = np.zeros(nvar)
    if objacoord is not None and objacoord.size:
        np.add.at(obj, objacoord[:, 0].astype(int), objacoord[:, 1])
    if acoord is not None and acoord.size:
        A = sp.csr_matrix((acoord[:, 2], (acoord[:, 0].astype(int), acoord[:, 1].astype(int))),
                          shape=(ncon, nvar))
    else:
        A = sp.csr_matrix((ncon, nvar))
    b = np.zeros(ncon)
    if bcoord is not None and bcoord.size:
        np.add.at(b, bcoord[:, 0].astype(int), bcoord[:, 1])
    H, D, P = [], [], []
    for k, p in enumerate(psdcon):
        li, lj, _ = psd_positions(p)
        index = {(int(a), int(c)): t for t, (a, c) in enumerate(zip(li, lj))}

        def at(i: np.ndarray, j: np.ndarray) -> np.ndarray:
            hi, lo = np.maximum(i, j).astype(int), np.minimum(i, j).astype(int)
            try:
                return np.array([index[(a, c)] for a, c in zip(hi, lo)], dtype=int)
            except KeyError as exc:
                raise DataError(f"{path}: an entry of PSDCON {k} lies outside its order {p}") from exc

        Hk = sp.csr_matrix((li.size, nvar))
        if hcoord is not None and hcoord.size:
            sel = hcoord[hcoord[:, 0] == k]
            Hk = sp.csr_matrix((sel[:, 4], (at(sel[:, 2], sel[:, 3]), sel[:, 1].astype(int))),
                               shape=(li.size, nvar))
        Dk = np.zeros(li.size)
        if dcoord is not None and dcoord.size:
            sel = dcoord[dcoord[:, 0] == k]
            np.add.at(Dk, at(sel[:, 1], sel[:, 2]), sel[:, 3])
        H.append(Hk)
        D.append(Dk)
        P.append((li, lj))
    return CBFProgram(sense=sense, var_cones=var_cones, con_cones=con_cones, psdcon=psdcon,
                      obj=obj, obj_const=obj_const, A=A, b=b, H=H, D=D, pos=P, meta=meta)
