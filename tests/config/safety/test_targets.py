"""Configs and checkpoints from elsewhere are data: they cannot get code run. Each attack here
would run its payload (create a file) if the guard were missing."""

from __future__ import annotations

import os

import pytest
import torch

from tests.forked import fork_tool
from zoo.config.errors import ConfigError
from zoo.config.safety.targets import instantiate, resolve_target
from zoo.training.checkpoint.files import CheckpointError, read_checkpoint


def test_allowed_objects_resolve():
    launcher = resolve_target("hydra._internal.core_plugins.basic_launcher.BasicLauncher")
    # imported after: Hydra's first scan of its plugins loads their modules anew
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    assert launcher is BasicLauncher
    optimizer = instantiate({"_target_": "torch.optim.SGD", "lr": 0.1}, params=[torch.nn.Parameter(torch.ones(2))])
    assert isinstance(optimizer, torch.optim.SGD)


@pytest.mark.parametrize(
    "name, why",
    [
        ("os.system", "may only name"),
        ("builtins.eval", "may only name"),
        ("subprocess.run", "may only name"),
        ("logging.os.system", "may only name"),  # a module on the list once, an object from elsewhere
        ("zoo.config.safety.targets.importlib.import_module", "may only name"),
        ("zoo.training.checkpoint.saving.atomic_save", "may only name"),  # zoo's own code writes files too
        ("lightning.pytorch.callbacks.ModelCheckpoint", "may only name"),
    ],
)
def test_names_outside_the_allow_list_are_refused(name, why):
    with pytest.raises(ConfigError, match=why):
        resolve_target(name)
    with pytest.raises(ConfigError):
        instantiate({"_target_": name, "_args_": ["echo unreachable"]})


EVIL = """
defaults:
  - config
  - _self_
hydra:
  callbacks:
    payload:
      _target_: {target}
      _args_: ["open('{marker}', 'w').close()"]
"""


@pytest.mark.parametrize("target", ["builtins.exec", "logging.os.system"])
@pytest.mark.slow  # starts a Python process that imports zoo
def test_a_config_file_naming_code_is_refused_before_hydra_builds_it(tmp_path, target):
    marker = tmp_path / "PWNED"
    (tmp_path / "evil.yaml").write_text(EVIL.format(target=target, marker=marker))
    result = fork_tool("train", "-cd", str(tmp_path), "-cn", "evil", f"hydra.run.dir={tmp_path / 'run'}", timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "hydra.callbacks.payload._target_" in result.stderr and "refused" in result.stderr
    assert not marker.exists()
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # starts a Python process that imports zoo
def test_every_value_of_a_sweep_is_checked(tmp_path):
    result = fork_tool(
        "train",
        "-m",
        "seed=0,1",
        "hydra.sweeper._target_=hydra._internal.core_plugins.basic_sweeper.BasicSweeper,builtins.eval",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        timeout=120,
    )
    assert result.returncode == 2
    # the sweeper is zoo's own: refused for its key before any value of it is resolved
    assert "hydra.sweeper._target_" in result.stderr and "refused" in result.stderr
    assert not (tmp_path / "sweep").exists()


class _Payload:
    """Unpickling this runs a command: what a malicious checkpoint would carry."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_a_checkpoint_holding_code_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "payload": _Payload(marker)}, path)
    with pytest.raises(CheckpointError, match="holds more than plain data"):
        read_checkpoint(path)
    assert not marker.exists()
    for tool in ("eval", "generate"):
        args = [f"ckpt={path}"] + (["prompt=hi"] if tool == "generate" else [])
        result = fork_tool(tool, *args, timeout=120)
        assert result.returncode == 2 and "holds more than plain data" in result.stderr, result.stderr[-2000:]
        assert not marker.exists()


BYPASSES = {
    # a container made by a resolver, not written as a mapping
    "resolver": """
defaults:
  - config
  - _self_
hydra:
  callbacks:
    payload: '${oc.create:{_target_: os.makedirs, name: ''MARKER''}}'
""",
    # a logging stream that imports a module
    "ext": """
defaults:
  - config
  - _self_
hydra:
  job_logging:
    handlers:
      console:
        stream: ext://antigravity.geohash
""",
    # sweep values given in the config file instead of on the command line
    "sweeper-params": """
defaults:
  - config
  - _self_
hydra:
  sweeper:
    params:
      hydra.launcher._target_: hydra._internal.core_plugins.basic_launcher.BasicLauncher,builtins.exec
""",
}


@pytest.mark.parametrize("case", sorted(BYPASSES))
@pytest.mark.parametrize("mode", [[], ["--help"]])
@pytest.mark.slow
def test_indirect_ways_to_name_code_are_refused(tmp_path, case, mode):
    marker = tmp_path / "PWNED"
    (tmp_path / "evil.yaml").write_text(BYPASSES[case].replace("MARKER", str(marker)))
    result = fork_tool(
        "train", *mode, "-cd", str(tmp_path), "-cn", "evil", f"hydra.run.dir={tmp_path / 'run'}", timeout=120
    )
    assert result.returncode == 2, (result.stdout[-1000:], result.stderr[-2000:])
    assert "refused" in result.stderr
    assert not marker.exists()


@pytest.mark.slow  # starts a Python process that imports zoo
def test_rerunning_a_pickled_config_is_refused(tmp_path):
    result = fork_tool("train", "--experimental-rerun", str(tmp_path / "config.pickle"), timeout=120)
    assert result.returncode == 2 and "unpickles" in result.stderr


@pytest.mark.slow  # starts a Python process that imports zoo
def test_a_malformed_config_file_is_one_line(tmp_path):
    (tmp_path / "broken.yaml").write_text("defaults:\n  - config\nmodel: [unclosed\n")
    result = fork_tool("train", "-cd", str(tmp_path), "-cn", "broken", timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "broken.yaml" in result.stderr


# -- the red-team cases: a config file that writes a file, runs code in a rank, leaks a secret ---

WRITES_A_FILE = """
defaults:
  - config
  - _self_
hydra:
  callbacks:
    overwrite:
      _target_: zoo.training.checkpoint.saving.atomic_save
      obj: {{}}
      path: {victim}
"""
SETS_PYTHONPATH = """
defaults:
  - config
  - override trainer: ddp_cpu
  - _self_
hydra:
  job:
    env_set:
      PYTHONPATH: {where}
"""
LOG_ELSEWHERE = """
defaults:
  - config
  - _self_
hydra:
  job_logging:
    handlers:
      file:
        filename: {victim}
"""
READS_A_SECRET = """
defaults:
  - config
  - _self_
logger:
  csv: ${{oc.env:ZOO_TEST_SECRET,true}}
"""


@pytest.mark.parametrize(
    "text, words",
    [
        (WRITES_A_FILE, "may only name"),
        (SETS_PYTHONPATH, "hydra.job.env_set.PYTHONPATH is refused"),
        (LOG_ELSEWHERE, "a log file lies in the run directory"),
        (READS_A_SECRET, "read from the environment"),
    ],
    ids=["writes-a-file", "sets-pythonpath", "logs-elsewhere", "reads-a-secret"],
)
@pytest.mark.slow  # starts a Python process that imports zoo
def test_a_config_file_cannot_write_files_run_code_or_record_the_environment(tmp_path, text, words):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    (tmp_path / "sitecustomize.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w').close()\n")
    (tmp_path / "evil.yaml").write_text(text.format(victim=victim, where=tmp_path))
    env = dict(__import__("os").environ, ZOO_TEST_SECRET="s3cr3t-value")
    result = fork_tool(
        "train",
        "-cd",
        str(tmp_path),
        "-cn",
        "evil",
        f"hydra.run.dir={tmp_path / 'run'}",
        "trainer.max_steps=2",
        timeout=180,
        env=env,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr[-2000:]
    assert victim.read_text() == "keep me" and not (tmp_path / "PWNED").exists()
    assert not (tmp_path / "run").exists()  # refused before anything was written
