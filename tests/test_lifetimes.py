"""A problem and its declaration are freed when their last user lets go, by reference counting
alone: what is derived from a declaration and kept on it (the chain of reductions, the
canonical form, the oracle, the certificate's view) refers back to it weakly, so no reference
cycle keeps its arrays alive until the cyclic garbage collector runs (numpy arrays do not
prompt a collection: a loop over large problems would hold every one of them)."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

import kernelforms as kf
from kernelforms import registry

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from test_applicability_golden import INSTANCES  # noqa: E402


def instance(name):
    """A fresh instance (the golden test keeps its instances cached)."""
    return INSTANCES[name]()


@pytest.fixture
def no_cyclic_gc():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _freed_after(run):
    p = run()
    refs = weakref.ref(p), weakref.ref(p.declaration)
    del p
    return [r() is None for r in refs]


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_every_method_leaves_no_reference_cycle(name, no_cyclic_gc):
    methods = [m for m in registry.method_names()
               if not m.startswith("sdp:scs") and kf.get_method(m).applies_to(instance(name)) is None]
    assert methods, name

    def run():
        p = instance(name)
        for m in methods:
            kf.solve(p, m)
        return p

    assert _freed_after(run) == [True, True], (name, methods)


def test_compare_and_the_chain_leave_no_reference_cycle(no_cyclic_gc):
    def run():
        p = instance("pcp_p1_soft")
        kf.compare(p, ["sdp", "admm", "lowrank"])
        ch = kf.model.chain(p.declaration)
        assert ch.original is p.declaration and ch.reduced is not None
        return p

    assert _freed_after(run) == [True, True]


def test_a_chain_outliving_its_declaration_says_so():
    p = instance("pcp_p2_hard")
    ch = kf.model.chain(p.declaration)
    del p
    gc.collect()
    with pytest.raises(ReferenceError, match="keep the declaration"):
        ch.original
