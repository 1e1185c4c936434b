"""`kernelforms learn` and `compare --save-factor`: the factor written is the optimum."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kernelforms.cli import main
from kernelforms.errors import DataError, OptionError
from kernelforms.learn import auto_method, read_data, read_pairs, write_factor
from kernelforms.recipes import build_from_recipe
from kernelforms.result import LowRank


def _objective(recipe, G):
    return float(build_from_recipe(recipe).objective(LowRank(np.asarray(G))))


@pytest.mark.parametrize("dataset, n", [("iris", 60), ("soybean", None)])
def test_learn_factor_is_compares_optimum(tmp_path, capsys, dataset, n):
    """The factor `learn` writes has the objective `compare` reports for the same method on
    the same instance (to 1e-9), and `compare --save-factor` writes that row's factor."""
    size = [] if n is None else ["--n-points", str(n)]
    out = tmp_path / "G.npz"
    assert main(["learn", "pcp", "--dataset", dataset, *size, "--out", str(out)]) == 0
    capsys.readouterr()
    d = tmp_path / "rows"
    d.mkdir()
    main(["compare", "pcp", "--dataset", dataset, *size, "--methods", "lowrank", "--quiet",
          "--save-factor", str(d), "--json", str(tmp_path / "r.json")])
    row = json.loads((tmp_path / "r.json").read_text())["rows"][0]
    z = np.load(out)
    saved = np.load(d / "lowrank.npz")
    recipe = dict(problem="pcp", dataset=dataset, n_points=n)
    assert str(z["method"]) == "lowrank" and str(z["status"]) == "converged"
    assert abs(float(z["objective"]) - row["objective"]) <= 1e-9 * abs(row["objective"])
    assert abs(_objective(recipe, z["factor"]) - row["objective"]) <= 1e-9 * abs(row["objective"])
    assert abs(_objective(recipe, saved["factor"]) - row["objective"]) <= 1e-9 * abs(row["objective"])
    assert str(z["fingerprint"]) == str(saved["fingerprint"]) == build_from_recipe(recipe).fingerprint()
    # the embedding is the same kernel; the certificate was computed
    E, G = z["embedding"], z["factor"]
    assert np.allclose(E @ E.T, G @ G.T, atol=1e-9)
    assert 0 <= float(z["certified_gap"]) < 1e-6
    assert json.loads(str(z["options"]))["recipe"]["dataset"] == dataset
    # no temporary file is left behind
    assert sorted(os.listdir(tmp_path)) == ["G.npz", "r.json", "rows"]


def test_learn_npy_and_user_data_with_pairs(tmp_path, capsys):
    """`--data` CSV with a header and `--pairs` rows i, j, link; `.npy` holds the factor."""
    import kernelforms as kf

    X, y = kf.datasets.load("iris")
    X, y = X[::3], y[::3]
    csv = tmp_path / "pts.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", header="a,b,c,d,label", comments="")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("i,j,link\n0,1,1\n0,20,-1\n3,45,0\n30,31,1\n")
    out = tmp_path / "G.npy"
    assert main(["learn", "pcp", "--data", str(csv), "--pairs", str(pairs), "--gamma", "10",
                 "--out", str(out)]) == 0
    G = np.load(out)
    assert G.shape[0] == 50
    P = read_pairs(str(pairs), 50)
    assert P.n_must == 2 and P.n_cannot == 2
    # labels only: pairs drawn from them
    out2 = tmp_path / "G2.npz"
    assert main(["learn", "pcp", "--data", str(csv), "--out", str(out2)]) == 0
    assert np.array_equal(np.load(out2)["labels"], y)


def test_learn_refuses_bad_input_before_any_work(tmp_path, capsys):
    assert main(["learn", "pcp", "--dataset", "iris", "--out", str(tmp_path / "G.txt")]) == 2
    assert ".npy" in capsys.readouterr().err
    assert main(["learn", "pcp", "--out", str(tmp_path / "G.npy")]) == 2
    assert "exactly one of --dataset" in capsys.readouterr().err
    assert main(["learn", "pcp", "--dataset", "iris", "--method", "nope", "--out",
                 str(tmp_path / "G.npy")]) == 2
    assert main(["learn", "pcp", "--dataset", "iris", "--out", str(tmp_path / "no" / "G.npy")]) == 2
    assert main(["compare", "pcp", "--dataset", "iris", "--n-points", "20", "--methods", "lowrank",
                 "--save-factor", str(tmp_path / "missing")]) == 2
    assert "--save-factor" in capsys.readouterr().err
    bad = tmp_path / "p.csv"
    bad.write_text("0,1,2\n")
    with pytest.raises(DataError, match="link column"):
        read_pairs(str(bad), 10)
    bad.write_text("0,11,1\n")
    with pytest.raises(DataError, match="n = 10"):
        read_pairs(str(bad), 10)
    with pytest.raises(DataError, match="does not exist"):
        read_data(str(tmp_path / "none.csv"))
    assert list(tmp_path.glob("G*")) == []


def test_read_data_formats(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 3))
    y = np.repeat([0, 1, 2], 4)
    np.save(tmp_path / "a.npy", np.column_stack([X, y]))
    np.savez(tmp_path / "b.npz", X=X, y=y)
    with open(tmp_path / "c.svm", "w") as fh:
        for xi, yi in zip(X, y):
            fh.write(f"{yi} " + " ".join(f"{j + 1}:{float(v)!r}" for j, v in enumerate(xi)) + "\n")
    for name in ("a.npy", "b.npz", "c.svm"):
        Xr, yr = read_data(str(tmp_path / name))
        assert np.allclose(Xr, X) and np.array_equal(yr, y)
    np.save(tmp_path / "bad.npy", np.array([1.0, 2.0]))
    with pytest.raises(DataError, match="2-D"):
        read_data(str(tmp_path / "bad.npy"))


def test_write_factor_is_atomic_and_needs_a_factor(tmp_path):
    from kernelforms.result import Result, Status

    p = build_from_recipe(dict(problem="pcp", dataset="iris", n_points=20))
    with pytest.raises(Exception, match="no factor"):
        write_factor(str(tmp_path / "G.npy"), Result(method="x", status=Status.ERROR), p)
    # an unwritable target leaves nothing behind
    r = Result(method="x", status=Status.CONVERGED, objective=1.0, factor=np.ones((20, 2)))
    with pytest.raises(OSError):
        write_factor(str(tmp_path / "nodir" / "G.npy"), r, p)
    assert os.listdir(tmp_path) == []


def test_auto_method_is_the_estimators_choice():
    from kernelforms.estimator import AUTO_METHODS

    for kind in ("pcp", "npkl"):
        p = build_from_recipe(dict(problem=kind, dataset="iris", n_points=20))
        assert auto_method(p) == AUTO_METHODS[kind]
    with pytest.raises(OptionError):
        from kernelforms.learn import check_factor_path

        check_factor_path("G.csv")
