"""A `-cd` directory's config that zoo's own tree also holds (its `config.yaml`, or a group
option such as `optim/adamw.yaml`) is never read, since Hydra searches zoo's tree first: the run
used to train zoo's config without a word. It is refused on one line saying what to name it."""

from __future__ import annotations


def _refused(cli_here, tmp_path, *args) -> str:
    run = tmp_path / "run"
    result = cli_here("train", *args, f"hydra.run.dir={run}", "trainer.max_steps=2")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not run.exists()
    return lines[0]


def test_a_config_directory_whose_file_is_named_config_yaml_is_refused(cli_here, tmp_path):
    cd = tmp_path / "cd"
    cd.mkdir()
    (cd / "config.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 123\n")
    line = _refused(cli_here, tmp_path, "-cd", str(cd))
    assert "its config.yaml is never read" in line and "-cn my_run" in line


def test_a_config_yaml_beside_a_recipe_chosen_with_cn_is_refused(cli_here, tmp_path):
    """`-cn mine` whose defaults name `config` reads zoo's config.yaml, never the directory's."""
    cd = tmp_path / "cd"
    cd.mkdir()
    (cd / "config.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 123\n")
    (cd / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 7\n")
    line = _refused(cli_here, tmp_path, "-cd", str(cd), "-cn", "mine")
    assert "its config.yaml is never read" in line


def test_a_group_option_of_zoos_name_in_a_config_directory_is_refused(cli_here, tmp_path):
    cd = tmp_path / "cd"
    (cd / "optim").mkdir(parents=True)
    (cd / "optim" / "adamw.yaml").write_text("kind: adamw\nlr: 0.777\n")
    (cd / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 123\n")
    line = _refused(cli_here, tmp_path, "-cd", str(cd), "-cn", "mine")
    assert "its optim/adamw.yaml is never read" in line and "optim=my_adamw" in line


def test_a_config_directory_named_as_hydra_names_it_is_read(cli_here, tmp_path):
    """The same file under a name of its own, chosen with -cn, is the run's config."""
    cd = tmp_path / "cd"
    cd.mkdir()
    (cd / "my_run.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 123\n")
    result = cli_here("train", "-cd", str(cd), "-cn", "my_run", "--cfg", "job")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\nseed: 123\n" in result.stdout
