"""Which sweepers and launchers zoo runs with: one rule, one table.

A sweeper or launcher is code Hydra imports and runs, named by a config group option
(`hydra/sweeper=optuna`, `hydra/launcher=submitit_slurm`). zoo admits an option when Hydra
ships it or a plugin listed here does, and refuses every other (`hydra/sweeper=nevergrad`,
`hydra/launcher=joblib`) on one line, whatever package is installed. The table names, for each
admitted option, the provider under which its package stores the option in Hydra's ConfigStore
(tests/config/safety/test_plugins.py checks each against the installed package), so that an
option cannot be admitted in the name of a package that does not define it.

Admitting an option does not open its keys: every key of `hydra.sweeper` and `hydra.launcher`
is still zoo's own value unless `zoo.config.safety.hydra_section.HYDRA_KEYS` makes it a checked
setting (a storage URL, a callable's dotted path, a sampler's `_target_` stay refused)."""

from __future__ import annotations

# provider (as the package stores its configs in Hydra's ConfigStore) -> the package that ships it
PACKAGES: dict[str, str] = {
    "hydra": "hydra-core",
    "optuna_sweeper": "hydra-optuna-sweeper",
    "submitit_launcher": "hydra-submitit-launcher",
    "zoo": "zoo (conf/hydra/launcher/, built on a listed plugin's option)",
}

# group -> option -> provider; the first option is the one zoo's own config chooses
SHIPPED: dict[str, dict[str, str]] = {
    "hydra/sweeper": {"basic": "hydra", "optuna": "optuna_sweeper"},
    "hydra/sweeper/sampler": {  # the Optuna sweeper's samplers (cmaes needs the cmaes package)
        "tpe": "optuna_sweeper",
        "random": "optuna_sweeper",
        "grid": "optuna_sweeper",
        "cmaes": "optuna_sweeper",
        "nsgaii": "optuna_sweeper",
        "motpe": "optuna_sweeper",
    },
    "hydra/launcher": {
        "basic": "hydra",
        "slurm": "zoo",
        "submitit_slurm": "submitit_launcher",
        "submitit_local": "submitit_launcher",
    },
}

RULE = "a sweeper or launcher is admitted when Hydra or a listed plugin ships it"


def listed(group: str) -> str:
    """The options of `group` with the package that ships each, for messages."""
    return ", ".join(f"{option} ({PACKAGES[provider].split(' ')[0]})" for option, provider in SHIPPED[group].items())
