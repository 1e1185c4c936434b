"""Files of the package: a report's JSON (:class:`ReportJSON`: to / from a dict, text, a
file), reading JSON with errors that name the source, and writing any file through a
temporary name and a rename (:func:`atomic_file`)."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Self

from ..errors import DataError, KernelformsError, OptionError
from ..result import RESULT_FIELDS, Result, Status
from .verdict import DEFAULT_VTOL, EXIT_CODES, check_tolerance, relative_gap

#: JSON schema tag of :meth:`Report.to_json`: version 2 writes a row's typed fields
#: (:data:`~kernelforms.result.RESULT_FIELDS`) beside its other fields, version 1 wrote them
#: in the row's "extras" (read all the same)
JSON_FORMAT = "kernelforms-report/2"
#: the formats :meth:`ReportJSON.from_dict` reads
JSON_FORMATS = ("kernelforms-report/1", JSON_FORMAT)
#: the typed fields version 1 kept in a row's "extras" under another name
_V1_NAMES = {"edge_multipliers": "multipliers", "gap_tol_from_rtol": "gap_tol_asked"}


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



class ReportJSON:
    """The JSON half of :class:`~kernelforms.report.Report`: :meth:`to_dict`, :meth:`to_json`,
    :meth:`from_dict`, :meth:`from_json`."""

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
            # the typed fields that are set (size: in summary()), then the method's own extras
            for key in RESULT_FIELDS:
                value = getattr(r, key)
                if key not in d and value is not None:
                    d[key] = _jsonable(value.value if isinstance(value, Status) else value)
            d["extras"] = _jsonable(dict(r.extras))
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
    def from_dict(cls, data: Any, *, source: str = "report") -> Self:
        """Rebuild a report (without kernels) from :meth:`to_dict` output.

        Raises :class:`~kernelforms.errors.DataError` naming ``source`` and the field when
        ``data`` is not a report.
        """
        bad = lambda where, what, got: DataError(  # noqa: E731
            f"{source} is not a valid kernelforms report: {where} must be {what}; got {_short(got)}")
        if not isinstance(data, dict):
            raise bad("the top level", f"a JSON object (format {JSON_FORMAT})", data)
        if data.get("format", JSON_FORMAT) not in JSON_FORMATS:
            raise bad("'format'", " or ".join(map(repr, JSON_FORMATS)), data.get("format"))
        v1 = data.get("format", JSON_FORMAT) == JSON_FORMATS[0]
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
            # the typed fields: beside the others (version 2, and "size" in version 1) or in
            # "extras" (version 1, some under another name)
            extras = dict(d.get("extras") or {})
            typed = {key: d[key] for key in RESULT_FIELDS if d.get(key) is not None}
            if v1:
                for key in list(extras):
                    name = _V1_NAMES.get(key, key)
                    if name in RESULT_FIELDS:
                        value = extras.pop(key)
                        if value is not None:
                            typed.setdefault(name, value)
            typed = _typed_fields(typed, where, bad)
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
                message=d.get("message") or "", extras=extras, **typed))
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
    def from_json(cls, text_or_path: str | os.PathLike) -> Self:
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


def _json_float(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _typed_fields(typed: dict[str, Any], where: str, bad: Any) -> dict[str, Any]:
    """A row's typed fields read from JSON as :class:`~kernelforms.result.Result` holds them:
    the arrays (``multipliers``, ``unbounded_direction``) as numpy arrays (dropped when the
    file kept only their shape), ``claimed_status`` a :class:`Status`, numbers checked."""
    import numpy as np

    out = dict(typed)
    for key in ("multipliers", "unbounded_direction"):
        if key in out:
            value = out[key]
            if not isinstance(value, list):
                del out[key]  # written as "<array (shape)>": too large to keep
                continue
            try:
                out[key] = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                raise bad(f"{where}.{key}", "a list of numbers", value) from None
    if "claimed_status" in out:
        try:
            out["claimed_status"] = Status(out["claimed_status"])
        except ValueError:
            raise bad(f"{where}.claimed_status", "a status", out["claimed_status"]) from None
    for key in ("certified_gap", "lower_bound", "upper_bound", "certificate_time", "solver_eps",
                "gap_tol_asked", "unbounded_rate"):
        if key in out:
            out[key] = _field_float(out, key, math.nan, where, bad)
    for key in ("memory_estimate", "solver_duals_size", "rank_used"):
        if key in out and (isinstance(out[key], bool) or not isinstance(out[key], int)):
            raise bad(f"{where}.{key}", "an integer", out[key])
    return out


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


def warn_write(path: Any, exc: BaseException) -> str:
    """Warn (:class:`ReportWriteWarning`) that ``path`` could not be written; returns the note."""
    note = f"could not write the report to {os.fspath(path)!r}: {exc}; the report is returned"
    warnings.warn(note, ReportWriteWarning, stacklevel=3)
    return note
