"""Hostile and malformed exchange files, bad arguments, failed writes (kernelforms.exchange).

Each test is named after its symptom: what used to allocate gigabytes, loop, wrap around,
be silently ignored or escape as a raw traceback now gives a kernelforms error (or an
honest status) before any work.  The fuzz tests mutate valid SDPA and CBF files thousands
of times and accept only a parsed program or a kernelforms error.
"""

from __future__ import annotations

import errno
import random
import tracemalloc

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import exchange as ex
from kernelforms.errors import DataError, KernelformsError, OptionError, ProblemError
from kernelforms.exchange.cbf import read_cbf
from kernelforms.exchange.sdpa import read_csdp_solution, read_sdpa, read_sdpa_result
from kernelforms.result import Status
from test_formulations import INSTANCES

pytest.importorskip("cvxpy")

#: a reader refusing a hostile file may use this much memory (tracemalloc peak)
SMALL = 20 * 2**20


def _write(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    return f


def _refused_small(fn, match):
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match=match):
            fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < SMALL, peak


# ---------------------------------------------------------------------------- sizes
def test_cbf_declaring_a_billion_variables_does_not_allocate(tmp_path):
    f = _write(tmp_path, "big.cbf", "VER\n3\nVAR\n1000000000 1\nF 1000000000\n")
    assert f.stat().st_size < 50
    _refused_small(lambda: read_cbf(f), r"big\.cbf: .*1000000000 variables.*max_memory")
    _refused_small(lambda: ex.read_program(f), "max_memory")


def test_cbf_psdcon_30000_without_its_lines_is_refused(tmp_path):
    f = _write(tmp_path, "many.cbf", "VER\n3\nVAR\n1 1\nF 1\nPSDCON\n30000\n2\n")
    _refused_small(lambda: read_cbf(f), r"many\.cbf:7: PSDCON declares 30000 lines but the file has only 1")


def test_cbf_huge_psd_order_is_refused_before_allocating(tmp_path):
    f = _write(tmp_path, "order.cbf", "VER\n3\nVAR\n1 1\nF 1\nPSDCON\n1\n100000\n")
    _refused_small(lambda: read_cbf(f), "PSD orders 100000.*max_memory")
    # a larger max_memory lets a moderate order through
    prog = read_cbf(_write(tmp_path, "ok.cbf", "VER\n3\nVAR\n1 1\nF 1\nPSDCON\n1\n3\n"))
    assert prog.psdcon == [3]


@pytest.mark.parametrize("size", ["100000", "1000000000", "-1000000000", "1e9"])
def test_sdpa_huge_block_sizes_are_refused_before_allocating(tmp_path, size):
    f = _write(tmp_path, "big.dat-s", f"1\n1\n{size}\n1.0\n1 1 1 1 1.0\n")
    _refused_small(lambda: read_sdpa(f), r"big\.dat-s: the block sizes .*max_memory")
    _refused_small(lambda: ex.read_program(f), "max_memory")
    _refused_small(lambda: ex.solve_exported(f, tmp_path / "big.sol"), "max_memory")


def test_sdpa_max_memory_is_the_knob(tmp_path):
    f = _write(tmp_path, "b.dat-s", "1\n1\n2000\n1.0\n1 1 1 1 1.0\n")
    with pytest.raises(DataError, match="max_memory"):
        read_sdpa(f, max_memory="1MB")
    assert read_sdpa(f).blocks[0].order == 2000
    with pytest.raises(OptionError, match="max_memory"):
        read_sdpa(f, max_memory=-1)


# ---------------------------------------------------------------------------- writes
def test_failed_export_leaves_no_truncated_file(tmp_path, monkeypatch):
    """A full disk at the rename: the earlier file stays whole, no temporary file is left,
    and the error is a kernelforms error naming the path."""
    import kernelforms.report as report

    problem = INSTANCES["P1"]
    target = ex.export(problem, "sdp", tmp_path / "p1.dat-s")
    before = target.read_text()

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report.os, "replace", full)
    for name in ("p1.dat-s", "p1.cbf"):
        with pytest.raises(KernelformsError, match=f"{name}.*No space left"):
            ex.export(problem, "sdp", tmp_path / name)
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1.dat-s"]


def test_export_to_an_existing_directory_is_refused(tmp_path):
    (tmp_path / "d.dat-s").mkdir()
    with pytest.raises(OptionError, match="is a directory"):
        ex.export(INSTANCES["P1"], "sdp", tmp_path / "d.dat-s")


def test_export_to_proc_is_refused():
    with pytest.raises(OptionError, match="cannot be written"):
        ex.export(INSTANCES["P1"], "sdp", "/proc/kernelforms_x.dat-s")


@pytest.mark.parametrize("bad", [None, "p1", 3, np.eye(3)])
def test_export_of_a_non_problem_is_refused(tmp_path, bad):
    with pytest.raises(OptionError, match="kernelforms problem"):
        ex.export(bad, "sdp", tmp_path / "a.dat-s")


def test_export_all_into_an_existing_file_is_refused(tmp_path):
    f = _write(tmp_path, "file", "x")
    with pytest.raises(OptionError, match="not a directory"):
        ex.export_all(INSTANCES["P1"], f)
    assert f.read_text() == "x"


def test_solve_exported_with_an_unknown_solver_is_refused(tmp_path):
    dat = ex.export(INSTANCES["P1"], "sdp", tmp_path / "p1.dat-s")
    with pytest.raises(OptionError, match="'solver' parameter.*NOPE"):
        ex.solve_exported(dat, tmp_path / "p1.sol", solver="NOPE")
    assert not (tmp_path / "p1.sol").exists()
    with pytest.raises(OptionError, match="option of CLARABEL"):
        ex.solve_exported(dat, tmp_path / "p1.sol", bogus=1)
    with pytest.raises(OptionError, match="is CBF"):
        ex.solve_exported(ex.export(INSTANCES["P1"], "sdp", tmp_path / "p1.cbf"), tmp_path / "p1.sol")


# ---------------------------------------------------------------------------- SDPA / CSDP readers
@pytest.mark.parametrize("meta,match", [('{"sign": "abc"}', "'sign' must be 1 or -1"),
                                        ('{"offset": "abc"}', "'offset' must be a finite number"),
                                        ('{"offset": NaN}', "'offset' must be a finite number"),
                                        ('[1, 2]', "JSON object"), ('{oops', "not JSON")])
def test_sdpa_metadata_with_non_numeric_sign_or_offset_is_refused(tmp_path, meta, match):
    f = _write(tmp_path, "m.dat-s", f"* kernelforms: {meta}\n1\n1\n1\n1.0\n1 1 1 1 1.0\n")
    with pytest.raises(DataError, match=rf"m\.dat-s:1: .*{match}"):
        read_sdpa(f)


@pytest.mark.parametrize("body,match", [
    ("1\n1\n2\n1.0\n1 1 1 1 1.0 7\n", "5 fields"),
    ("1\n1\n2\n1.0\n1 1 1 3 1.0\n", "outside block 1"),
    ("1\n1\n2\n1.0\n2 1 1 1 1.0\n", "matrix number"),
    ("1\n1\n2\n1.0\n1 1 1.5 1 1.0\n", "integer"),
    ("1\n1\n2\n1.0\n1 1 1 1 nan\n", "finite"),
    ("1\n1\nx 2\n1.0\n", "nonzero integer"),
    ("1.5\n1\n2\n1.0\n", "integer >= 1"),
    ("1\n1\n1e999\n1.0\n", "nonzero integer"),
    ("1000000000\n1\n2\n1.0\n", "c has fewer than m = 1000000000"),
    ("1\n2\n2 2\n1.0\n1 2 1 2 1.0\n1 1 1 1 1.0\n1 2 2 1 3.0\n", r":7: block 2 has the entry \(1, 2\) given twice"),
    ("1\n2\n2 -2\n1.0\n1 1 1 2 1.0\n1 2 1 2 1.0\n", r":6: block 2 is diagonal"),
])
def test_sdpa_malformed_entries_name_the_line(tmp_path, body, match):
    with pytest.raises(DataError, match=match):
        read_sdpa(_write(tmp_path, "b.dat-s", body))


@pytest.fixture(scope="module")
def p1(tmp_path_factory):
    d = tmp_path_factory.mktemp("p1hostile")
    problem = INSTANCES["P1"]
    dat = ex.export(problem, "sdp", d / "p1.dat-s")
    ex.solve_exported(dat, d / "p1.sol")
    ex.solve_exported(dat, d / "p1.out")
    return problem, d


def test_csdp_entries_for_a_matrix_that_does_not_exist_are_refused(p1, tmp_path):
    problem, d = p1
    f = _write(tmp_path, "p1.sol", (d / "p1.sol").read_text() + "7 1 1 1 1.0\n")
    with pytest.raises(DataError, match=r"p1\.sol:\d+: matrix number 7"):
        read_csdp_solution(read_sdpa(d / "p1.dat-s"), f)
    with pytest.raises(DataError, match="matrix number 7"):
        ex.ExternalSolution(f, method="sdp").run(problem)


@pytest.mark.parametrize("where", ["x", "Y"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_external_solution_with_nan_or_inf_is_a_numerical_error(p1, tmp_path, where, value):
    """No LinAlgError escapes kf.solve: the row says numerical_error."""
    problem, d = p1
    lines = (d / "p1.sol").read_text().splitlines()
    if where == "x":
        lines[0] = " ".join([value] + lines[0].split()[1:])
    else:
        k = next(i for i, s in enumerate(lines) if s.startswith("2 "))
        lines[k] = " ".join(lines[k].split()[:4] + [value])
    f = _write(tmp_path, "p1.sol", "\n".join(lines) + "\n")
    res = kf.solve(problem, ex.ExternalSolution(f, method="sdp"))
    assert res.status is Status.NUMERICAL_ERROR and "NaN or inf" in res.message
    # the same through a vector file
    g = _write(tmp_path, "p1.x", " ".join([value] + lines[0].split()[1:]))
    if where == "x":
        assert kf.solve(problem, ex.ExternalSolution(g, method="sdp")).status is Status.NUMERICAL_ERROR


def test_ragged_xvec_is_refused(p1, tmp_path):
    problem, d = p1
    text = (d / "p1.out").read_text()
    head, tail = text.split("xVec = \n{", 1)
    f = _write(tmp_path, "p1.out", head + "xVec = \n{{1.0,2.0}," + tail)
    with pytest.raises(DataError, match="xVec"):
        ex.ExternalSolution(f, method="sdp").run(problem)


@pytest.mark.parametrize("meta,match", [("{oops", "not JSON"), ("[1]", "JSON object"),
                                        ('{"sign": "x", "method": "sdp"}', "'sign'")])
def test_external_solution_with_bad_program_metadata_is_refused(p1, tmp_path, meta, match):
    problem, d = p1
    prog = _write(tmp_path, "p.dat-s", f"* kernelforms: {meta}\n1\n1\n1\n1.0\n")
    with pytest.raises(ProblemError, match=match):
        ex.ExternalSolution(d / "p1.sol", method="sdp", program=prog).run(problem)


def test_external_solution_given_a_directory_says_it_is_a_directory(tmp_path):
    (tmp_path / "d.sol").mkdir()
    with pytest.raises(DataError, match="is a directory"):
        ex.ExternalSolution(tmp_path / "d.sol").run(INSTANCES["P1"])


def test_csdp_file_without_its_dual_is_not_optimal(p1, tmp_path):
    problem, d = p1
    lines = [s for s in (d / "p1.sol").read_text().splitlines() if not s.startswith("2 ")]
    f = _write(tmp_path, "p1.sol", "\n".join(lines) + "\n")
    res = ex.ExternalSolution(f, method="sdp", returncode=0).run(problem)
    assert res.status is Status.OPTIMAL_INACCURATE and "no dual in the file" in res.message


def test_sdpa_result_with_an_unknown_phase_is_refused(p1, tmp_path):
    problem, d = p1
    f = _write(tmp_path, "p1.out", (d / "p1.out").read_text().replace("pdOPT", "pdGREAT"))
    with pytest.raises(DataError, match="pdGREAT"):
        read_sdpa_result(read_sdpa(d / "p1.dat-s"), f)


# ---------------------------------------------------------------------------- CBF reader
CBF_OK = """VER
3
OBJSENSE
MIN
VAR
2 1
F 2
PSDCON
1
2
CON
1 1
L+ 1
OBJACOORD
1
0 1.0
ACOORD
1
0 1 1.0
BCOORD
1
0 1.0
HCOORD
2
0 0 0 0 1.0
0 1 1 1 1.0
DCOORD
1
0 1 0 1.0
"""


def test_cbf_template_reads_and_solves():
    """The file the mutations below start from: min x0 s.t. x1 + 1 >= 0,
    [[x0, 1], [1, x1]] PSD: x0 x1 >= 1 and x1 >= -1 only bound x0 > 0 (infimum 0)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        prog = read_cbf(_write(Path(d), "t.cbf", CBF_OK))
    assert prog.n == 2 and prog.psdcon == [2] and prog.D[0].tolist() == [0.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("old,new,match", [
    ("VAR\n2 1\nF 2", "VAR\n-5 1\nF -5", r":6: VAR expects two integers >= 0"),
    ("ACOORD\n1\n0 1 1.0", "ACOORD\n1\n0 2 1.0", r":19: ACOORD: the variable 2 is out of range"),
    ("ACOORD\n1\n0 1 1.0", "ACOORD\n1\n3 1 1.0", r":19: ACOORD: the row 3 is out of range"),
    ("ACOORD\n1\n0 1 1.0", "ACOORD\n1\n-1 1 1.0", r":19: ACOORD: indices must be integers >= 0"),
    ("BCOORD\n1\n0 1.0", "BCOORD\n1\n1 1.0", r":22: BCOORD: the row 1 is out of range"),
    ("0 1 1 1 1.0", "1 1 1 1 1.0", r":26: HCOORD: the PSDCON 1 is out of range"),
    ("0 1 1 1 1.0", "0 5 1 1 1.0", r":26: HCOORD: the variable 5 is out of range"),
    ("0 1 1 1 1.0", "0 1 2 1 1.0", r":26: HCOORD: the row index 2 is out of range"),
    ("0 1 0 1.0", "0 1 0 1.0 junk", r":29: DCOORD expects 3 integer"),
    ("L+ 1", "Q 0", r":13: a Q cone of dimension 0"),
    ("L+ 1", "L+ 1 x", r":13: CON expects 'CONE dim'"),
    ("L+ 1", "EXP* 1", r":13: the cone 'EXP\*'"),
    ("L+ 1", "@0:POW 1", r":13: power cones \(@0:POW\)"),
    ("OBJACOORD\n1\n0 1.0", "OBJBCOORD\nabc", r":15: OBJBCOORD expects one number"),
    ("OBJSENSE\nMIN", "OBJSENSE\nMIN MAX", r":4: OBJSENSE must be MIN or MAX"),
    ("PSDCON\n1\n2", "PSDCON\n1\n0", r":10: PSDCON expects one integer >= 1"),
    ("VER\n3", "VER\n9", r":2: CBF version 9"),
    ("OBJSENSE\nMIN", "INT\n1\n0", r":3: integer variables \(INT\).*keyword INT"),
    ("OBJSENSE\nMIN", "POWCONES\n0", r":3: power cones \(POWCONES\)"),
    ("OBJSENSE\nMIN", "OBJSENSE\nMIN\nOBJSENSE\nMIN", r":5: OBJSENSE given twice"),
    ("VER\n3", "OBJSENSE\nMIN\nVER\n3", r":1: a CBF file starts with VER"),
])
def test_cbf_malformed_files_name_the_line(tmp_path, old, new, match):
    assert old in CBF_OK
    f = _write(tmp_path, "t.cbf", CBF_OK.replace(old, new, 1))
    with pytest.raises(DataError, match=r"t\.cbf" + match):
        read_cbf(f)


def test_cbf_hcoord_for_a_psdcon_that_does_not_exist_is_refused(tmp_path):
    text = CBF_OK.replace("PSDCON\n1\n2\n", "").replace("DCOORD\n1\n0 1 0 1.0\n", "")
    with pytest.raises(DataError, match="HCOORD: the PSDCON 0 is out of range"):
        read_cbf(_write(tmp_path, "t.cbf", text))


# ---------------------------------------------------------------------------- fuzz
try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    HAVE_HYPOTHESIS = False
else:
    HAVE_HYPOTHESIS = True

SDPA_OK = '''" min x1  s.t.  [[x1, 1], [1, x2]] PSD,  x2 <= 4
* kernelforms: {"offset": 0.5, "sign": 1}
2 =mdim
2 =nblocks
{2, -1}
{1.0, 0.0}
0 1 1 2 -1.0
1 1 1 1 1.0
2 1 2 2 1.0
0 2 1 1 -4.0
2 2 1 1 -1.0
'''
#: what a mutation may put in place of a token
TOKENS = ["0", "-1", "1", "2", "3", "-5", "1.5", "1e9", "1e400", "-0", "nan", "inf", "abc", "", "{", "}",
          "F", "L+", "Q", "EXP", "PSDVAR", "PSDCON", "HCOORD", "VAR", "CON", "INT", "@0:POW", "99999999999",
          "0 0", "1 1 1", "#", "* kernelforms: {\"sign\": 2}", "# kernelforms: []"]


def _mutate(text: str, rnd: random.Random, n_mut: int) -> str:
    lines = text.splitlines()
    for _ in range(n_mut):
        op = rnd.randrange(6)
        k = rnd.randrange(len(lines)) if lines else 0
        if op == 5 and lines:  # another number in place of a number: often still a valid file
            toks = lines[k].split()
            nums = [i for i, t in enumerate(toks) if t.lstrip("-").replace(".", "").isdigit()]
            if nums:
                toks[rnd.choice(nums)] = rnd.choice(["0", "1", "2", "-1", "0.5", "3"])
                lines[k] = " ".join(toks)
        elif op == 0 and lines:  # replace a token
            toks = lines[k].split() or [""]
            toks[rnd.randrange(len(toks))] = rnd.choice(TOKENS)
            lines[k] = " ".join(toks)
        elif op == 1 and lines:  # drop a line
            del lines[k]
        elif op == 2 and lines:  # duplicate a line
            lines.insert(k, lines[k])
        elif op == 3:  # insert a token line
            lines.insert(k, rnd.choice(TOKENS))
        elif lines:  # append junk to a line
            lines[k] += " " + rnd.choice(TOKENS)
    return "\n".join(lines) + "\n"


#: mutated programs per reader; solution files: 200 per reader (1,600 files in all)
EXAMPLES = 600


def _reads_or_refuses(reader, path) -> bool:
    try:
        reader(path)
    except KernelformsError:
        return False
    return True


@pytest.mark.skipif(not HAVE_HYPOTHESIS, reason="hypothesis is not installed")
def test_fuzzed_sdpa_and_cbf_files_give_a_program_or_a_kernelforms_error(tmp_path):
    """Thousands of mutated files (token swaps, dropped, repeated and junk lines): each is
    parsed or refused with a kernelforms error; nothing else escapes."""
    counts = {"sdpa": [0, 0], "cbf": [0, 0]}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32 - 1), n_mut=st.integers(1, 4))
    def run(seed, n_mut):
        rnd = random.Random(seed)
        for fmt, template, reader in (("sdpa", SDPA_OK, lambda p: read_sdpa(p, max_memory="64MB")),
                                      ("cbf", CBF_OK, lambda p: read_cbf(p, max_memory="64MB"))):
            path = tmp_path / f"f.{fmt}"
            path.write_text(_mutate(template, rnd, n_mut))
            counts[fmt][_reads_or_refuses(reader, path)] += 1

    run()
    for fmt, (refused, parsed) in counts.items():
        assert refused + parsed == EXAMPLES, fmt
        assert refused > 100 and parsed > 20, (fmt, refused, parsed)  # the mutations do both


@pytest.mark.skipif(not HAVE_HYPOTHESIS, reason="hypothesis is not installed")
def test_fuzzed_solution_files_give_a_solution_or_a_kernelforms_error(p1, tmp_path):
    problem, d = p1
    prog = read_sdpa(d / "p1.dat-s")
    sol_text, out_text = (d / "p1.sol").read_text(), (d / "p1.out").read_text()

    @settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32 - 1), n_mut=st.integers(1, 3))
    def run(seed, n_mut):
        rnd = random.Random(seed)
        for name, text, reader in (("s.sol", sol_text, read_csdp_solution),
                                   ("s.out", out_text, read_sdpa_result)):
            path = tmp_path / name
            path.write_text(_mutate(text, rnd, n_mut))
            _reads_or_refuses(lambda p: reader(prog, p), path)

    run()
