"""A config reads nothing from the environment, however the read is spelled, and sets only
variables that cannot load code or name a file: each attack is replayed through zoo-train (or a
tool's KEY=VALUE), and the secret it reaches for appears in no file and no message."""

from __future__ import annotations

import pytest

from zoo.config.errors import ConfigError
from zoo.config.safety.environment import ENV_SET_ALLOWED, check_env_set, check_value

SECRET = "s3cr3t-value-9417"
KEY = "logger.mlflow.experiment"  # a text key every run writes into config.yaml


def _written(root) -> list[str]:
    """The files under `root` that hold the secret."""
    return [str(p) for p in root.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]


def _unrefused(result, root, words: str = "refused") -> list[str]:
    """What the outcome lacks of a refusal before anything was written (exit 2, one line with
    `words`, the secret nowhere): empty when it is one."""
    lines = result.stderr.strip().splitlines()
    wrong = [] if result.returncode == 2 else [f"exit {result.returncode}: {result.stderr[-2000:]}"]
    if len(lines) != 1 or words not in lines[0]:
        wrong.append(f"not one line with {words!r}: {result.stderr[-2000:]}")
    if SECRET in result.stdout + result.stderr:
        wrong.append("the secret was printed")
    wrong += [f"written: {path}" for path in _written(root)]
    if (root / "run").exists():  # refused before anything was written
        wrong.append("the run directory was made")
    return wrong


def _refused(result, root, words: str = "refused") -> None:
    assert _unrefused(result, root, words) == []


SPELLINGS = {
    "space-before": "${ oc.env:ZOO_TEST_SECRET}",
    "space-around-colon": "${oc.env : ZOO_TEST_SECRET}",
    "inside-select": "'${oc.select:nothing.here,${oc.env:ZOO_TEST_SECRET}}'",
    "with-default": "${oc.env:ZOO_TEST_SECRET,fallback}",
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_an_override_reading_the_environment_is_refused_however_spelled(cli_here, tmp_path, monkeypatch, spelling):
    from tests.cli.conftest import tiny_overrides

    monkeypatch.setenv("ZOO_TEST_SECRET", SECRET)
    result = cli_here("train", *tiny_overrides(tmp_path / "run"), f"{KEY}={SPELLINGS[spelling]}")
    assert _unrefused(result, tmp_path, "read from the environment") == []


FILES = {
    # the resolver's name read from another key
    "computed-name": "logger:\n  mlflow:\n    tags:\n      reader: oc.env\n"
    "    experiment: ${${logger.mlflow.tags.reader}:ZOO_TEST_SECRET}\n",
    # text that oc.decode turns into an interpolation when it runs
    "decode": "logger:\n  mlflow:\n    experiment: ${oc.decode:'\\${oc.env:ZOO_TEST_SECRET}'}\n",
    # a mapping that oc.create makes at run time
    "create": "logger:\n  mlflow:\n    tags: '${oc.create:{a: ''\\${oc.env:ZOO_TEST_SECRET}''}}'\n",
    # an escaped read, live once config.yaml is read back
    "escaped": "logger:\n  mlflow:\n    experiment: 'x\\${oc.env:ZOO_TEST_SECRET}'\n",
    # the run directory, which summary.json and the trackers name
    "run-dir": "hydra:\n  run:\n    dir: RUN-${oc.env:ZOO_TEST_SECRET}\n",
}


@pytest.mark.parametrize("case", sorted(FILES))
def test_a_config_file_reading_the_environment_is_refused(cli_here, tmp_path, monkeypatch, case):
    from tests.cli.conftest import tiny_overrides

    monkeypatch.setenv("ZOO_TEST_SECRET", SECRET)
    text = FILES[case].replace("RUN", str(tmp_path / "run"))
    (tmp_path / "evil.yaml").write_text("defaults:\n  - config\n  - _self_\n" + text)
    overrides = [o for o in tiny_overrides(tmp_path / "run") if case != "run-dir" or not o.startswith("hydra.run")]
    result = cli_here("train", "-cd", str(tmp_path), "-cn", "evil", *overrides)
    _refused(result, tmp_path)
    assert not list(tmp_path.glob("run*"))


def test_a_sweep_value_reading_the_environment_is_refused(cli_here, tmp_path, monkeypatch):
    from tests.cli.conftest import tiny_overrides

    monkeypatch.setenv("ZOO_TEST_SECRET", SECRET)
    result = cli_here(
        "train",
        "-m",
        *tiny_overrides(),
        f"hydra.sweep.dir={tmp_path / 'run'}",
        f"{KEY}=plain,${{ oc.env:ZOO_TEST_SECRET}}",
    )
    assert _unrefused(result, tmp_path, "read from the environment") == []


def test_a_tools_key_value_reading_the_environment_is_refused(cli_here, tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_TEST_SECRET", SECRET)
    (tmp_path / "sweep").mkdir()
    result = cli_here("compare", str(tmp_path / "sweep"), "out=${ oc.env:ZOO_TEST_SECRET}")
    assert _unrefused(result, tmp_path, "read from the environment") == []


@pytest.mark.parametrize(
    "text",
    [
        "${model.d_model}",
        "${zoo.share_of_steps:0.1}",
        "plain $ text {x}",
        "${oc.select:data.seq_len,32}",
        "${hydra:runtime.output_dir}/x",
    ],
)
def test_interpolations_that_read_only_the_config_are_kept(text):
    check_value(text, "key")


# -- hydra.job.env_set ------------------------------------------------------------------------

LOADS_OR_NAMES_FILES = [
    "NCCL_NET_PLUGIN",
    "NCCL_TUNER_PLUGIN",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_DEBUG_FILE",
    "NCCL_TOPO_FILE",
    "NCCL_GRAPH_FILE",
    "NCCL_TOPO_DUMP_FILE",
    "NCCL_GRAPH_DUMP_FILE",
    "NCCL_NET",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "LD_PRELOAD",
    "PYTHONPATH",
]


@pytest.mark.parametrize("name", LOADS_OR_NAMES_FILES)
def test_env_set_refuses_variables_that_load_code_or_name_files(cli_here, tmp_path, name):
    from tests.cli.conftest import tiny_overrides

    target = tmp_path / "elsewhere.txt"
    result = cli_here("train", *tiny_overrides(tmp_path / "run"), f"+hydra.job.env_set.{name}={target}")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"hydra.job.env_set.{name} is refused" in lines[0], result.stderr[-2000:]
    assert not target.exists() and not (tmp_path / "run").exists()


def test_env_set_takes_its_listed_variables_with_plain_values_only():
    check_env_set(
        {"OMP_NUM_THREADS": 4, "NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_SOCKET_IFNAME": "eth0"}
    )
    assert not any(name.endswith(("_FILE", "_PLUGIN", "PATH")) for name in ENV_SET_ALLOWED)
    with pytest.raises(ConfigError, match="must be a number or a word"):
        check_env_set({"NCCL_DEBUG": "INFO /tmp/x"})
    with pytest.raises(ConfigError, match="NCCL_FOO is refused"):
        check_env_set({"NCCL_FOO": "1"})
