"""What keeps a validated config immutable all the way down: the one way a schema's
`__post_init__` fills in a field of its frozen instance (`settle`), the frozen mapping and
sequence types of its dict- and list-valued fields (`FrozenMap`, `Items`), and their way back to
plain data (`thawed`). No torch import."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

# A list-valued field: a tuple in every validated config (`freeze_items`), annotated as a list at
# run time because OmegaConf composes the schema, and a composition's lists take overrides.
if TYPE_CHECKING:
    Items = tuple[T, ...]
else:
    Items = list


def settle(obj: object, name: str, value: Any) -> None:
    """Set field `name` of the frozen `obj` while its `__post_init__` checks and completes it
    (enums parsed, derived widths filled in): the one place a frozen schema is written to."""
    object.__setattr__(obj, name, value)


class FrozenMap(dict[K, V]):
    """A dict that cannot be changed: `m[k] = v`, `del m[k]`, `update`, `pop`, `setdefault`,
    `clear` and `|=` raise TypeError. A dict still, so OmegaConf takes it as a mapping's value
    and json writes it; picklable and deep-copyable (types.MappingProxyType is neither, and
    Lightning's hyperparameters, DDP spawn and a SLURM job pickle the config)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"a {type(self).__name__} cannot be changed: make a new one")

    __setitem__ = __delitem__ = update = pop = popitem = setdefault = clear = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenMap[K, V]:
        return self

    def __deepcopy__(self, memo: dict) -> FrozenMap[K, V]:
        return type(self)({copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


def freeze_items(value: Any) -> tuple:
    """A list-valued field (a list, an OmegaConf ListConfig, a tuple) as a tuple."""
    return tuple(value)


def thawed(value: Any) -> Any:
    """A frozen field value as plain data: tuples as lists, frozen mappings as dicts (what a
    checkpoint, config.yaml and summary.json hold, and what older records compare against)."""
    if isinstance(value, tuple):
        return [thawed(v) for v in value]
    if isinstance(value, FrozenMap):
        return {k: thawed(v) for k, v in value.items()}
    return value
