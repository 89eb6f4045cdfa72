"""zoo-train reads its command line before Hydra does (`zoo.cli.hydra_args`): the same words
must mean the same to both. Held against Hydra's own parser, which nobody here wrote; and the
rest of zoo stays off Hydra's private API and off sys.argv."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zoo.cli.hydra_args import HydraArgs, parse_hydra_args, sweep_arms, sweep_variants

ZOO = Path(__file__).resolve().parents[2] / "zoo"

COMMAND_LINES = [
    [],
    ["model=llama", "trainer.max_steps=5"],
    ["-m", "seed=0,1", "model/position=rope,alibi"],
    ["--multirun", "seed=0"],
    ["-cn", "quick", "-cd", "/tmp/conf", "seed=1"],
    ["--config-name=quick", "--config-dir", "conf2", "a=b"],
    ["-cp", "pkg://zoo.conf", "x=1"],
    ["--cfg", "job", "--resolve", "-p", "model"],
    ["-c", "hydra", "a=1"],
    ["--info"],
    ["--info", "searchpath"],
    ["-i", "defaults", "k=v"],
    ["--help", "a=1"],
    ["-h"],
    ["--hydra-help"],
    ["-sc"],
    ["--run", "a=1"],
    ["--experimental-rerun", "config.pickle"],
    ["a=1", "-m", "b=2,3"],
    ["+trainer.new=1", "~logger", "++seed=3"],
]


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=lambda a: " ".join(a) or "(none)")
def test_the_command_line_reads_as_hydra_reads_it(argv):
    from hydra._internal.utils import get_args_parser  # the reference: Hydra's own parser

    theirs, _ = get_args_parser().parse_known_args(argv)
    ours = parse_hydra_args(argv)
    assert not ours.unreadable
    for name in HydraArgs.__dataclass_fields__:
        if name in ("version", "unreadable"):
            continue  # Hydra's --version prints and exits, and its parser exits on a bad flag
        assert getattr(ours, name) == getattr(theirs, name), name


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["-cn", "quick"],
        ["-m"],
        ["a=1", "b=2"],
        ["a=1", "-cn", "quick"],
        ["-m", "hydra/sweeper=optuna", "optim.lr=tag(log,interval(1e-4,3e-2))", "-cn", "quick"],
        ["-cn", "quick", "a=1", "-cd", "conf"],
        ["--multirun", "seed=0,1", "--config-name=quick"],
    ],
    ids=lambda a: " ".join(a) or "(none)",
)
def test_the_directory_zoo_chooses_is_read_by_hydras_own_parser(argv):
    """zoo-train adds hydra.run.dir=... to the command line it hands Hydra; Hydra's parser (strict, as
    `hydra.main` runs it) must read it with the user's overrides, wherever the flags stand."""
    from hydra._internal.utils import get_args_parser

    from zoo.cli.hydra_args import with_overrides

    extra = "hydra.run.dir='runs/x'"
    placed = with_overrides(["zoo-train", *argv], parse_hydra_args(argv), [extra])
    theirs = get_args_parser().parse_args(placed[1:])
    assert theirs.overrides == [*parse_hydra_args(argv).overrides, extra]
    assert [w for w in placed if w != extra] == ["zoo-train", *argv]


@pytest.mark.parametrize(
    "argv, overrides",
    [
        (["a=1", "-cn", "quick", "b=2"], ["a=1", "b=2"]),
        (["-m", "a=1,2", "-cn", "quick", "a=3", "--cfg", "job", "b=4"], ["a=1,2", "a=3", "b=4"]),
        (["a=1", "-cn", "quick", 'hydra.run.dir="runs/x"', "hydra.job.name=train_ddp_process_1"], None),
        (["-cn", "quick", "a=1"], ["a=1"]),
    ],
)
def test_overrides_apart_from_the_others_join_them_in_order(argv, overrides):
    """What Lightning's launcher writes for its ranks (the run directory after a final flag) and a
    user's `a=1 -cn quick b=2` reach Hydra's own strict parser as one group, in the order written."""
    from hydra._internal.utils import get_args_parser

    from zoo.cli.hydra_args import in_one_group

    grouped = in_one_group(["zoo-train", *argv])
    theirs = get_args_parser().parse_args(grouped[1:])
    expected = overrides if overrides is not None else [w for w in argv if "=" in w]
    assert theirs.overrides == expected and theirs.config_name == "quick"
    assert sorted(grouped[1:]) == sorted(argv)


@pytest.mark.parametrize("argv", [["--cfg=other"], ["--info", "bogus"], ["-c"]])
def test_a_command_line_hydra_refuses_is_unreadable_here_too(argv):
    from hydra._internal.utils import get_args_parser

    with pytest.raises(SystemExit):  # Hydra's parser: a usage line and exit 2
        get_args_parser().parse_known_args(argv)
    assert parse_hydra_args(argv).unreadable and parse_hydra_args(argv).runs_nothing


def test_a_command_that_only_prints_runs_nothing():
    assert parse_hydra_args(["--cfg", "job"]).runs_nothing
    assert parse_hydra_args(["--version"]).runs_nothing
    assert not parse_hydra_args(["-m", "seed=0,1"]).runs_nothing


def test_a_sweep_is_checked_once_per_value_of_each_key():
    assert sweep_variants(["a=1,2", "b=x", "c=3,4,5"]) == [
        ["a=1", "b=x", "c=3"],
        ["a=2", "b=x", "c=3"],
        ["a=1", "b=x", "c=4"],
        ["a=1", "b=x", "c=5"],
    ]
    assert sweep_variants(["a=1"]) == [["a=1"]]


def test_an_interval_is_checked_at_its_two_ends():
    """The Optuna sweeper's search space (`interval`, tagged or not) cannot be listed; its ends
    stand for it, a whole number as an int so that an integer key takes it."""
    assert sweep_variants(["a=interval(1,4)", "b=tag(log,interval(1e-4,1e-2))", "c=x"]) == [
        ["a=1", "b=0.0001", "c=x"],
        ["a=4", "b=0.0001", "c=x"],
        ["a=1", "b=0.01", "c=x"],
    ]


@pytest.mark.parametrize(
    "overrides",
    [
        ["a=1,2", "b=x", "c=3,4,5"],
        ["arm/window=baseline,sliding", "seed=0,1,2", "model.n_heads=3", "seed=5,6"],  # params, then the command line
        ["seed=0,1", "a=range(1,4)", "seed=7"],
        ["+x=1,2", "~y", "z=choice(p,q)"],
    ],
)
def test_a_sweeps_arms_are_the_ones_hydras_sweeper_runs(overrides):
    """Held against Hydra's basic sweeper: the same arms, in the same order."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (theirs,) = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(overrides), None)
    ours = sweep_arms(overrides, limit=100)
    assert ours is not None and len(ours) == len(theirs)
    parsed = [OverridesParser.create().parse_overrides(arm) for arm in ours]
    assert [[o.get_key_element() + "=" + o.get_value_element_as_str() for o in arm] for arm in parsed] == theirs


@pytest.mark.parametrize(
    "overrides",
    [
        ["a=choice(1,2)", "b=x", "c=3,4"],
        ["a=4", "a=choice(3,5)", "b=choice(p,q)"],  # a fixed value wins wherever it stands
        ["a=choice(3,5)", "a=4"],
        ["a=choice(1,2)", "a=choice(7,8,9)"],
    ],
)
def test_an_optuna_sweeps_arms_are_its_search_space(overrides):
    """Held against the Optuna sweeper's own reading of the command line: its fixed values, and
    every point of its search space."""
    import itertools

    from hydra_plugins.hydra_optuna_sweeper._impl import create_params_from_overrides

    space, fixed = create_params_from_overrides(overrides)
    for name in fixed:
        space.pop(name, None)
    points = [dict(zip(space, values)) for values in itertools.product(*(d.choices for d in space.values()))]
    theirs = sorted(
        sorted({**{k: str(v) for k, v in fixed.items()}, **{k: str(v) for k, v in p.items()}}.items()) for p in points
    )
    ours = sweep_arms(overrides, limit=100, sweeper="optuna")
    assert ours is not None
    assert sorted(sorted(tuple(word.split("=", 1)) for word in arm) for arm in ours) == theirs


def test_optunas_range_and_interval_are_distributions_not_listed():
    """Optuna reads range(5,8) as the integers 5 to 8 (its upper end included) and samples it:
    its arms are not a list to check (the basic sweeper's range(5,8) is 5, 6, 7)."""
    assert sweep_arms(["a=range(5,8)"], limit=100, sweeper="optuna") is None
    assert sweep_arms(["a=interval(0,1)"], limit=100, sweeper="optuna") is None
    assert sweep_arms(["a=range(5,8)"], limit=100) == [["a=5"], ["a=6"], ["a=7"]]
    assert sweep_arms(["a=1,2"], limit=100, sweeper="nevergrad") is None  # a sweeper zoo does not know


@pytest.mark.parametrize("path", ["runs/model.n_heads=4", "runs/a,b", "runs/it's", "runs/x y"])
def test_a_chosen_directory_reads_back_through_hydras_parser_as_written(path):
    """zoo-train hands Hydra its run directory, and prints it in the resume command, quoted: a job
    named by its overrides (`model.n_heads=4`) holds an `=` Hydra refuses unquoted."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from zoo.cli.gate import dir_override

    (override,) = OverridesParser.create().parse_overrides([dir_override("run", Path(path))])
    assert override.key_or_group == "hydra.run.dir" and override.value() == path


def test_a_sweep_reading_hydras_job_or_naming_its_directory_by_it_is_not_refused(tmp_path, monkeypatch):
    """`seed=${hydra:job.num}` resolves only in Hydra's job, and a job directory written as
    `${hydra.job.num}` on the command line resolves only there too: checked, not refused."""
    from zoo.cli.gate import check_command_line, claim_sweep

    monkeypatch.chdir(tmp_path)
    checked = check_command_line(parse_hydra_args(["-m", "seed=${hydra:job.num}", "model.n_heads=4,8"]))
    assert checked is not None and checked.multirun
    words = ["-m", "hydra.sweep.subdir=${hydra.job.num}_${seed}", "seed=1,2", f"hydra.sweep.dir={tmp_path / 's'}"]
    checked = check_command_line(parse_hydra_args(words))
    assert checked is not None and claim_sweep(checked, shared=False) == tmp_path / "s"


def test_a_sweep_that_cannot_be_listed_has_no_arms_here():
    assert sweep_arms(["a=interval(1,4)", "b=1,2"], limit=100) is None  # Optuna's search space
    assert sweep_arms(["a=1,2,3", "b=1,2,3"], limit=8) is None  # 9 arms
    assert sweep_arms(["a=1,2,3", "b=1,2,3"], limit=9) is not None


def _modules():
    for path in sorted(ZOO.rglob("*.py")):
        yield path.relative_to(ZOO.parent).as_posix(), ast.parse(path.read_text())


def test_no_module_reaches_hydras_private_api():
    """zoo uses Hydra's public API only: no module of zoo, nor its search-path plugin, imports
    or names hydra._internal."""
    plugin = ZOO.parent / "hydra_plugins" / "zoo_recipes" / "__init__.py"
    users = [p for p in [*sorted(ZOO.rglob("*.py")), plugin] if "hydra._internal" in p.read_text()]
    assert users == []


def test_no_module_writes_sys_argv_but_zoo_train():
    """`zoo TOOL ARGS` hands the tool its arguments (each main takes them); zoo-train alone sets
    Hydra's command line, which `hydra.main` reads from sys.argv only, with the directory it
    chose (zoo/cli/train.py, restored after); no other module writes sys.argv."""
    writers = set()
    for name, tree in _modules():
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign)
                else []
            )
            calls = [node.func] if isinstance(node, ast.Call) else []
            for target in targets:
                base = target.value if isinstance(target, ast.Subscript) else target
                if ast.unparse(base) == "sys.argv":
                    writers.add(name)
            for func in calls:
                if (
                    isinstance(func, ast.Attribute)
                    and ast.unparse(func.value) == "sys.argv"
                    and func.attr in ("append", "extend", "insert", "pop", "remove", "clear")
                ):
                    writers.add(name)
    assert writers == {"zoo/cli/train.py"}
