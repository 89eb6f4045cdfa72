"""Reading a run directory's config for a comparison: keys a run predates."""

from __future__ import annotations


def test_a_model_key_a_run_predates_reads_as_its_default():
    """A run recorded before model.parametrization existed is the same arm as one that sets it
    to its default, standard; a run that sets it elsewhere is not."""
    from zoo.compare.runs import with_model_defaults

    old = {"model.d_model": 64, "seed": 0}
    assert with_model_defaults(old)["model.parametrization"] == "standard"
    assert with_model_defaults({**old, "model.parametrization": "mup"})["model.parametrization"] == "mup"
    assert with_model_defaults({"seed": 0}) == {"seed": 0}  # no model section: nothing to fill
