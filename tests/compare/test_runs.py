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


def test_an_interpolated_setting_reads_as_the_value_the_run_resolved(tmp_path):
    """`.hydra/config.yaml` keeps `${zoo.steps_for_tokens:3}` as written; the report's "Held
    fixed" line names the steps the run took, from the run's resolved config.yaml."""
    from zoo.compare.design import design_line
    from zoo.compare.runs import read_run

    run = tmp_path / "0"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    (run / ".hydra" / "config.yaml").write_text(
        "seed: 0\ntrainer:\n  max_steps: ${zoo.steps_for_tokens:3}\n  val_check_interval: ${trainer.max_steps}\n"
    )
    read = read_run(run)
    assert read.config["trainer.max_steps"] == "${zoo.steps_for_tokens:3}"  # nothing resolved it
    (run / "config.yaml").write_text("seed: 0\ntrainer:\n  max_steps: 163\n  val_check_interval: 163\n")
    read = read_run(run)
    assert read.config["trainer.max_steps"] == 163 and read.config["trainer.val_check_interval"] == 163
    assert "`trainer.max_steps=163`" in design_line([read])


def test_a_task_key_a_run_predates_reads_as_its_default():
    """A run made before task.moe_balance existed is the same arm as one that has it at its default."""
    from zoo.compare.runs import with_model_defaults
    from zoo.config.schema.task import task_defaults

    old = {"task.kind": "causal_lm", "task.z_loss": 0.0}
    assert with_model_defaults(old)["task.moe_balance"] == task_defaults()["moe_balance"]
    assert with_model_defaults({**old, "task.moe_balance": 0.0})["task.moe_balance"] == 0.0


def test_runs_branched_from_their_own_seeds_parents_are_one_arm(tmp_path):
    """Each seed of a cooldown branches from its own parent checkpoint: one arm, not one per seed,
    and apart from the same settings trained from scratch."""
    from tests.compare.sweeps import write_sweep
    from zoo.compare.report import compare

    runs = [
        ({"scheduler.kind": "wsd", "seed": s, "branch_from": f"stable/{s}/checkpoints/last.ckpt"}, 3.0 + s / 100)
        for s in range(3)
    ]
    runs += [({"scheduler.kind": "wsd", "seed": s}, 3.1 + s / 100) for s in range(3)]
    write_sweep(tmp_path / "sweep", runs)
    report = compare([tmp_path / "sweep"], tmp_path / "out", plots=False)
    assert [len(arm.runs) for arm in report.arms] == [3, 3]
    assert [arm.settings["branch_from"] for arm in report.arms] == ["(branched)", "(unset)"]


def test_an_unset_d_ff_sized_by_another_key_is_not_held_at_its_default():
    """ "Held fixed" names the key that sizes d_ff (model.ff_mult, model.param_budget) when every
    run shares it, leaves d_ff out when that key varies (an arm's setting), and says "at its
    default" only when nothing sizes it."""
    from pathlib import Path

    from zoo.compare.design import design_line
    from zoo.compare.runs import Run, RunStatus

    def runs(*configs):
        return [
            Run(path=Path(str(i)), overrides=[], config={"model.d_ff": None, "seed": 0, **c}, status=RunStatus.failed)
            for i, c in enumerate(configs)
        ]

    assert "`model.d_ff` at its default" in design_line(runs({}, {"model.ff_mult": None}))
    shared = design_line(runs({"model.ff_mult": 32}, {"model.ff_mult": 32}))
    assert "`model.ff_mult=32`" in shared and "model.d_ff" not in shared
    varied = design_line(runs({"model.ff_mult": 32}, {"model.ff_mult": None}))
    assert "model.d_ff" not in varied and "model.ff_mult" not in varied
    assert "`model.param_budget=1000`" in design_line(runs({"model.param_budget": 1000}))


def test_a_baseline_is_picked_by_its_settings_as_shown_or_as_hydra_writes_them():
    """baseline=KEY=VALUE matches a setting as the report shows it ("(unset)", "32.0") or as
    Hydra reads the value (null, 32, true); it never matches a different value."""
    from pathlib import Path

    import pytest

    from zoo.compare.errors import CompareError
    from zoo.compare.report import Arm, pick_baseline
    from zoo.compare.runs import Run, RunStatus

    def arm(name, **config):
        config = {k.replace("__", "."): v for k, v in config.items()}
        return Arm(name=name, runs=[Run(path=Path(name), overrides=[], config=config, status=RunStatus.finished)])

    arms = [
        arm("wide", model__ff_mult=32.0, model__bias=True),
        arm("plain", model__ff_mult=None, model__bias=True),
        arm("no bias", model__ff_mult=None, model__bias=False),
    ]
    for spec, name in [
        ("model.ff_mult=null,model.bias=true", "plain"),
        ("model.ff_mult=(unset),model.bias=True", "plain"),
        ("model.ff_mult=32", "wide"),
        ("model.ff_mult=32.0", "wide"),
        ("model.bias=false", "no bias"),
    ]:
        assert pick_baseline(arms, spec).name == name, spec
    for spec in ("model.ff_mult=16", "model.bias=1", "model.ff_mult=[32]", "model.ff_mult=null"):
        with pytest.raises(CompareError, match="matches [02] arms"):
            pick_baseline(arms, spec)
