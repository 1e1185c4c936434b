"""The typed fields of Result (certificate, size, memory estimate) and the report JSON
layouts: a report written before these were fields still loads, and prints the same."""

from __future__ import annotations

import copy
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.result import TYPED_EXTRAS, Result, Status

#: written by kernelforms 0.1.0 before the fields existed (everything under "extras",
#: the size beside them): `compare(pcp iris n=20, ["sdp:clarabel", "admm", "dual:clarabel"])`
OLD_REPORT = Path(__file__).parent / "data" / "report_old_layout.json"


def test_report_json_of_the_old_layout_loads_into_the_typed_fields():
    old = json.loads(OLD_REPORT.read_text())
    rep = kf.Report.from_json(OLD_REPORT)
    for stored, row in zip(old["rows"], rep.rows):
        assert row.size == stored["size"]
        for key in ("certifying", "certified_gap", "lower_bound", "certificate_time", "memory_estimate"):
            assert getattr(row, key) == stored["extras"].get(key), (row.method, key)
        assert row.upper_bound is None and row.certificate_note is None
        # the method's own diagnostics stay in extras, without the typed keys
        assert set(row.extras.own()) == set(stored["extras"]) - set(TYPED_EXTRAS)
    sdp, admm, dual = rep.rows
    assert sdp.certifying is True and admm.certifying is False
    assert admm.extras["rho_final"] == old["rows"][1]["extras"]["rho_final"]
    text = str(rep)
    assert "3.3e-05" in text and "factor 20 x 8" in text and "PSD 20, 400 vars, 0 lin" in text
    assert "certified: sdp:clarabel (solver certificate), admm (own certificate, cert.gap 3.3e-05)" in text
    assert rep.verdict == "agree"


def test_report_json_keeps_the_typed_fields_where_older_readers_find_them():
    old = json.loads(OLD_REPORT.read_text())
    again = json.loads(kf.Report.from_json(OLD_REPORT).to_json())
    assert again["rows"] == old["rows"]  # certificate and memory under "extras", size beside
    assert again["verdict"] == old["verdict"] and again["reference"] == old["reference"]


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


def test_extras_of_a_typed_key_reads_and_writes_the_field():
    # a solver that writes its own bound into extras (the old way) sets the field
    r = Result("m", Status.CONVERGED, extras={"lower_bound": 1.5, "sweeps": 3, "size": "PSD 3"})
    assert r.lower_bound == 1.5 and r.size == "PSD 3" and r.extras.own() == {"sweeps": 3}
    assert r.extras["lower_bound"] == 1.5 and "upper_bound" not in r.extras
    r.extras["certified_gap"] = 1e-6
    r.extras.setdefault("certifying", True)
    r.extras.setdefault("certifying", False)
    assert r.certified_gap == 1e-6 and r.certifying is True
    r.certificate_note = "note"
    assert r.extras.get("certificate_note") == "note"
    del r.extras["certificate_note"]
    assert r.certificate_note is None
    with pytest.raises(KeyError):
        r.extras["upper_bound"]
    assert dict(r.extras) == r.extras.copy() == {"sweeps": 3, "certifying": True, "certified_gap": 1e-6,
                              "lower_bound": 1.5, "size": "PSD 3"}
    # an explicit field wins over the same key in extras
    assert Result("m", Status.OPTIMAL, lower_bound=2.0, extras={"lower_bound": 1.0}).lower_bound == 2.0


@pytest.mark.parametrize("clone", [lambda r: pickle.loads(pickle.dumps(r)), copy.copy, copy.deepcopy])
def test_a_copied_result_has_its_own_extras(clone):
    r = Result("m", Status.CONVERGED, certified_gap=1e-3, extras={"sweeps": 3})
    c = clone(r)
    c.extras["certified_gap"] = 5.0
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
