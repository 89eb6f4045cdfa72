"""Where a run came from (`RunOrigin`): the recipe, the overrides and the config group choices
of the command that composed it, and the sweep it is an arm of. The command builds it
(`zoo.cli.train` from Hydra's job) and passes it down as data; the run's records read it
(`zoo.training.start.composed_from`: the line that says what the run was composed from, and
`zoo.training.tracking.identity.run_identity`: its name, sweep and arm for the trackers).
Nothing below the command reads Hydra's global state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType


@dataclass(frozen=True)
class RunOrigin:
    """A run's origin. The default, `RunOrigin()`, is a run composed in Python (`zoo.compose`,
    `zoo.train`): no recipe named, no overrides, no sweep."""

    config_name: str | None = None  # the recipe (-cn NAME); None: zoo's own config
    overrides: tuple[str, ...] = ()  # the command line's overrides of the run (Hydra's hydra.overrides.task)
    choices: Mapping[str, str | None] = field(default_factory=dict)  # config group -> option chosen
    sweep_dir: Path | None = None  # the sweep's directory, for an arm of a sweep; None for a single run

    def __post_init__(self) -> None:
        if self.config_name is not None and (not isinstance(self.config_name, str) or not self.config_name):
            raise ValueError(f"RunOrigin.config_name: a recipe's name or None, got {self.config_name!r}")
        overrides = tuple(self.overrides)
        if not all(isinstance(o, str) for o in overrides):
            raise ValueError(f"RunOrigin.overrides: overrides are text, got {overrides!r}")
        object.__setattr__(self, "overrides", overrides)
        choices = dict(self.choices)
        for group, option in choices.items():
            if not isinstance(group, str) or (option is not None and not isinstance(option, str)):
                raise ValueError(
                    f"RunOrigin.choices: a group's name -> its option's name or None, got {group!r}: {option!r}"
                )
        object.__setattr__(self, "choices", MappingProxyType(choices))  # frozen all the way down
        if self.sweep_dir is not None:
            object.__setattr__(self, "sweep_dir", Path(self.sweep_dir))

    @property
    def in_sweep(self) -> bool:
        return self.sweep_dir is not None
