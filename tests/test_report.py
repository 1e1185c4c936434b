"""The typed fields of Result (certificate, size, multipliers, claimed status, rank path,
...) and the report JSON layouts: a report written before these were fields (version 1,
everything under "extras") still loads, and prints the same."""

from __future__ import annotations

import copy
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.result import RESULT_FIELDS, Result, Status

DATA = Path(__file__).parent / "data"
#: written by kernelforms 0.1.0 before the fields existed (everything under "extras",
#: the size beside them): `compare(pcp iris n=20, ["sdp:clarabel", "admm", "dual:clarabel"])`
OLD_REPORT = DATA / "report_old_layout.json"
#: written by main 0189862 (format 1: the typed fields of the time under "extras", and the
#: keys other layers read by string: solver_duals, claimed_status, solves, gap_tol_from_rtol,
#: rank_path, rank_growth, edge_multipliers): NPKL square on a random 20-point graph
#: (sdp:clarabel, simplenpkl B=10, bcd) and MVU on a 30-point roll, k = 4 (sdp:clarabel,
#: lowrank, mvu)
V1_NPKL = DATA / "report_0189862_npkl.json"
V1_MVU = DATA / "report_0189862_mvu.json"
#: the fields format 1 wrote under another name in "extras"
RENAMED = {"edge_multipliers": "multipliers", "gap_tol_from_rtol": "gap_tol_asked"}


def test_report_json_of_the_old_layout_loads_into_the_typed_fields():
    old = json.loads(OLD_REPORT.read_text())
    rep = kf.Report.from_json(OLD_REPORT)
    for stored, row in zip(old["rows"], rep.rows):
        assert row.size == stored["size"]
        for key in ("certifying", "certified_gap", "lower_bound", "certificate_time", "memory_estimate"):
            assert getattr(row, key) == stored["extras"].get(key), (row.method, key)
        assert row.upper_bound is None and row.certificate_note is None
        # the method's own diagnostics stay in extras (a plain dict), without the typed keys
        assert type(row.extras) is dict
        assert set(row.extras) == set(stored["extras"]) - set(RESULT_FIELDS)
    sdp, admm, dual = rep.rows
    assert sdp.certifying is True and admm.certifying is False
    assert admm.extras["rho_final"] == old["rows"][1]["extras"]["rho_final"]
    text = str(rep)
    assert "3.3e-05" in text and "factor 20 x 8" in text and "PSD 20, 400 vars, 0 lin" in text
    assert "certified: sdp:clarabel (solver certificate), admm (own certificate, cert.gap 3.3e-05)" in text
    assert rep.verdict == "agree"


@pytest.mark.parametrize("path", [OLD_REPORT, V1_NPKL, V1_MVU])
def test_report_json_writes_the_typed_fields_beside_the_others(path):
    old = json.loads(path.read_text())
    again = json.loads(kf.Report.from_json(path).to_json())
    assert old["format"] == "kernelforms-report/1" and again["format"] == "kernelforms-report/2"
    assert again["verdict"] == old["verdict"] and again["reference"] == old["reference"]
    for was, now in zip(old["rows"], again["rows"]):
        moved = {RENAMED.get(k, k): v for k, v in was["extras"].items()
                 if RENAMED.get(k, k) in RESULT_FIELDS}
        assert moved, was["method"]  # every row of these files had some
        for key, value in moved.items():
            assert now[key] == value, (was["method"], key)
        assert now["extras"] == {k: v for k, v in was["extras"].items() if RENAMED.get(k, k) not in moved}
        assert {k: v for k, v in now.items() if k not in moved and k != "extras"} == \
            {k: v for k, v in was.items() if k != "extras"}
    # and the new file reads back to the same report
    back = kf.Report.from_dict(again)
    assert json.loads(back.to_json()) == again


def test_report_json_of_0189862_reads_the_cross_layer_keys_into_fields():
    rep = kf.Report.from_json(V1_NPKL)
    sdp, simple, bcd = rep.rows
    assert isinstance(sdp.solver_duals, dict) and sdp.solver_eps is not None and sdp.size_detail
    assert simple.claimed_status is Status.CONVERGED and simple.status is Status.OPTIMAL_INACCURATE
    assert simple.solves == "the problem plus tr(K^2) <= 10 (SimpleNPKL)"
    assert bcd.gap_tol_asked == 5e-5 and bcd.rank_path == [5] and "certified" in bcd.rank_growth
    assert "gap_tol_from_rtol" not in bcd.extras and "rank" in bcd.extras  # its own diagnostic stays
    text = str(rep)
    # the verdict readers use the fields: the words of main 0189862's report
    assert "by design it solves the problem plus tr(K^2) <= 10 (SimpleNPKL), not this problem" in text
    assert "bcd: run with gap_tol 5e-05 = rtol / 2" in text
    assert {v.method: v.outcome for v in rep.row_verdicts()} == \
        {r["method"]: r["verdict"] for r in json.loads(V1_NPKL.read_text())["rows"]}
    mvu = kf.Report.from_json(V1_MVU)
    _, low, alm = mvu.rows
    stored = json.loads(V1_MVU.read_text())["rows"]
    for row, was in ((low, stored[1]), (alm, stored[2])):
        assert isinstance(row.multipliers, np.ndarray) and row.multipliers.shape == (72,)
        assert row.multipliers.tolist() == was["extras"]["edge_multipliers"]
    assert low.rank_path == [8] and alm.gap_tol_asked == 5e-5 and alm.rank_used >= 1


def test_report_json_of_the_old_layout_with_a_note_and_an_upper_bound():
    old = json.loads(OLD_REPORT.read_text())
    old["sense"] = "max"
    for r in old["rows"]:
        ex = r["extras"]
        ex["upper_bound"] = ex.pop("lower_bound") * (1 + 1e-9)
    old["rows"][1]["extras"] = {"certifying": False,
                                "certificate_note": "not computed: the time limit (1 s) ran out after the solve"}
    rep = kf.Report.from_dict(old)
    admm = rep.rows[1]
    assert admm.certificate_note.startswith("not computed") and admm.certified_gap is None
    assert rep.rows[0].upper_bound == old["rows"][0]["extras"]["upper_bound"]
    assert "admm: certificate: not computed: the time limit (1 s)" in str(rep)


def test_a_bad_typed_field_in_a_report_json_names_it():
    data = json.loads(V1_NPKL.read_text())
    data["rows"][1]["extras"]["claimed_status"] = "done"
    with pytest.raises(kf.errors.DataError, match=r"rows\[1\]\.claimed_status must be a status"):
        kf.Report.from_dict(data)
    data = json.loads(kf.Report.from_json(V1_MVU).to_json())
    data["rows"][1]["multipliers"] = ["x"]
    with pytest.raises(kf.errors.DataError, match=r"rows\[1\]\.multipliers must be a list of numbers"):
        kf.Report.from_dict(data)


def test_extras_is_a_plain_dict_of_the_method_own_diagnostics():
    # no shim: a key in extras is only a diagnostic, the typed field is the one value
    r = Result("m", Status.CONVERGED, extras={"lower_bound": 1.5, "sweeps": 3})
    assert type(r.extras) is dict and r.lower_bound is None
    assert r.extras == {"lower_bound": 1.5, "sweeps": 3}
    r.certified_gap = 1e-6
    assert "certified_gap" not in r.extras
    assert not hasattr(kf.result, "Extras") and not hasattr(kf.result, "TYPED_EXTRAS")


@pytest.mark.parametrize("clone", [lambda r: pickle.loads(pickle.dumps(r)), copy.copy, copy.deepcopy])
def test_a_copied_result_has_its_own_extras(clone):
    r = Result("m", Status.CONVERGED, certified_gap=1e-3, extras={"sweeps": 3})
    c = clone(r)
    c.certified_gap = 5.0
    c.extras["sweeps"] = 4
    assert c.certified_gap == 5.0 and r.certified_gap == 1e-3
    assert c.extras["sweeps"] == 4 and r.extras["sweeps"] == 3
    assert c.summary()["size"] is None


# ---------------------------------------------------------------------- shared helpers
def test_fit_exponent_leaves_out_unusable_points():
    from kernelforms.util import fit_exponent, loglog_fit

    ns = [100, 200, 400, 800]
    assert fit_exponent(ns, [3e-6 * n**1.5 for n in ns]) == pytest.approx(1.5)
    a, b = loglog_fit(ns, [2.0 * n for n in ns])
    assert a == pytest.approx(1.0) and b == pytest.approx(np.log(2.0))
    # missing, non-finite and non-positive values are left out; one usable size is nan
    assert fit_exponent(ns + [1600], [1e-3 * n for n in ns] + [None]) == pytest.approx(1.0)
    assert math.isnan(fit_exponent(ns, [1.0, math.nan, 0.0, -1.0]))
    assert math.isnan(fit_exponent([5, 5, 5], [1, 2, 3]))


@pytest.mark.parametrize("b,text", [(512, "512 B"), (1536, "1.5 KiB"), (1023 * 2**20, "1023 MiB"),
                                    (4 * 2**30, "4 GiB"), (1.15e4 * 2**40, "11500 TiB"),
                                    (math.inf, "unlimited")])
def test_one_byte_formatter(b, text):
    from kernelforms.solvers.base import format_bytes as from_solvers
    from kernelforms.util import format_bytes

    assert format_bytes(b) == text and from_solvers is format_bytes


def test_render_table_aligns_and_strips():
    from kernelforms.util import render_table

    lines = render_table(["a", "long head"], [["xyz", 1], ["", ""]], rule=True)
    assert lines == ["a    long head", "---  ---------", "xyz  1", ""]
