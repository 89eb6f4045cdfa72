"""The multi-query associative recall probe's parameters (MQAR; Arora et al. 2023, "Zoology",
arXiv:2312.04927): `RecallSpec` and its checks, and the `data.recall_*` keys that train on it.
Torch-free; the sequences are drawn by `zoo.data.recall`, scored by `zoo.harness.recall`.

A sequence of `seq_len` symbols (ids 0 .. vocab_size-1 of the probe's own alphabet):

    k_1 v_1 k_2 v_2 ... k_N v_N | query region: N slots (2 symbols each) hold k_i v_i again,
                                  the other slots and any odd last symbol are random symbols

Keys are drawn without repetition from the lower half of the alphabet (1 .. vocab_size/2 - 1, as
Zoology's generator), values from the upper half (vocab_size/2 .. vocab_size - 1), so a key is
never a value. Slot g (g = 0 .. S-1, S = (seq_len - 2N) // 2 slots) is picked for a query with
probability proportional to a * (g + 1)^(a - 1), a = `power_a` (Zoology's 0.01), N slots
without repetition: most queries come early, a few far (a = 1: uniform; above 1: late). The probe is scored at each query key:
the model's most likely next id must be its value (the value follows its query in the sequence,
so a causal LM trained on every position learns it; the query key itself gives nothing away).
Chance, for a model that knows which symbols are values but not which goes with which key, is
1 / (vocab_size - vocab_size // 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError

# symbols are written as characters U+4E00 + id (CJK ideographs), one per symbol, so the
# char tokenizer gives each its own id: at most this many symbols
MAX_SYMBOLS = 0x9FFF - 0x4E00 + 1
# the DataConfig keys of the probe's training data, read by data.source=recall only
RECALL_KEYS = ("recall_vocab", "recall_pairs", "recall_examples", "recall_power", "recall_seed", "recall_loss")


class RecallLoss(Choice):
    """Where a run on data=recall takes its loss."""

    answers = "answers"  # the value after each query only (Zoology's MQAR training)
    all = "all"  # every position, as any causal LM (keys and filler are random: only answers can be learnt)


@dataclass(frozen=True, kw_only=True)
class RecallSpec:
    """What one set of MQAR sequences is: `vocab_size` symbols, `seq_len` symbols a sequence,
    `num_kv_pairs` key-value pairs, query placement exponent `power_a`. `keys` names the
    settings in messages (the data keys of a run, or zoo-eval's)."""

    vocab_size: int
    seq_len: int
    num_kv_pairs: int
    power_a: float = 0.01
    keys: dict[str, str] = field(
        default_factory=lambda: {
            "vocab_size": "data.recall_vocab",
            "seq_len": "data.seq_len",
            "num_kv_pairs": "data.recall_pairs",
            "power_a": "data.recall_power",
        },
        compare=False,
    )

    def __post_init__(self) -> None:
        k = self.keys
        for name in ("vocab_size", "seq_len", "num_kv_pairs"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{k[name]} must be a whole number >= 1, got {value!r}")
        if not 4 <= self.vocab_size <= MAX_SYMBOLS:
            raise ConfigError(f"{k['vocab_size']} must be between 4 and {MAX_SYMBOLS} symbols, got {self.vocab_size}")
        power = self.power_a
        if isinstance(power, bool) or not isinstance(power, (int, float)) or not (0 < power < math.inf):
            raise ConfigError(
                f"{k['power_a']} must be a number above 0 (Zoology's 0.01: most queries early; 1: uniform), got {power!r}"
            )
        if self.num_kv_pairs > self.num_keys:
            raise ConfigError(
                f"{k['num_kv_pairs']}={self.num_kv_pairs} is more pairs than the {self.num_keys} keys of "
                f"{k['vocab_size']}={self.vocab_size} (keys are symbols 1 .. vocab/2 - 1): raise "
                f"{k['vocab_size']} to {2 * self.num_kv_pairs + 2} or lower {k['num_kv_pairs']}"
            )
        if self.seq_len < 4 * self.num_kv_pairs:
            raise ConfigError(
                f"{k['num_kv_pairs']}={self.num_kv_pairs} needs sequences of {4 * self.num_kv_pairs} symbols "
                f"or more (the pairs, then as many query slots of two), got {self.seq_len} "
                f"({k['seq_len']}): raise it or lower {k['num_kv_pairs']}"
            )

    @property
    def num_keys(self) -> int:
        """Keys are symbols 1 .. vocab_size // 2 - 1."""
        return self.vocab_size // 2 - 1

    @property
    def num_values(self) -> int:
        """Values are symbols vocab_size // 2 .. vocab_size - 1."""
        return self.vocab_size - self.vocab_size // 2

    @property
    def slots(self) -> int:
        """Query slots of two symbols after the pairs."""
        return (self.seq_len - 2 * self.num_kv_pairs) // 2

    @property
    def chance(self) -> float:
        """Accuracy of guessing a value at random."""
        return 1.0 / self.num_values


def recall_spec(data: Any, num_kv_pairs: int | None = None) -> RecallSpec:
    """The spec of a `data.source=recall` config (`DataConfig`, or its dict in a checkpoint):
    each sequence is one window, data.seq_len - 1 symbols and the eos that ends it."""
    get = data.get if isinstance(data, dict) else lambda key, default=None: getattr(data, key, default)
    seq_len = get("seq_len", 256)
    return RecallSpec(
        vocab_size=get("recall_vocab", 256),
        seq_len=seq_len - 1 if isinstance(seq_len, int) and not isinstance(seq_len, bool) else seq_len,
        num_kv_pairs=get("recall_pairs", 8) if num_kv_pairs is None else num_kv_pairs,
        power_a=get("recall_power", 0.01),
        keys={
            "vocab_size": "data.recall_vocab",
            "seq_len": "data.seq_len - 1",
            "num_kv_pairs": "data.recall_pairs",
            "power_a": "data.recall_power",
        },
    )


def check_recall_data(data: Any, defaults: dict[str, Any]) -> None:
    """DataConfig's recall keys: checked as a spec under data.source=recall (with
    data.recall_examples and data.recall_seed), refused away from their defaults otherwise."""
    if data.source.value != "recall":
        for key in RECALL_KEYS:
            if getattr(data, key) != defaults[key]:
                raise ConfigError(f"data.{key} only applies to data.source=recall, not {data.source.value}")
        return
    recall_spec(data)
    for key, low in (("recall_examples", 2), ("recall_seed", 0)):
        value = getattr(data, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"data.{key} must be an integer >= {low}, got {value!r}")


def check_recall_run(data: Any, tokenizer: Any, task: Any) -> None:
    """A run on data.source=recall: a causal LM over the char tokenizer (one id per symbol)."""
    if data.source.value != "recall":
        return
    if getattr(task, "value", task) != "causal_lm":
        raise ConfigError(f"data.source=recall trains task=causal_lm, not task={getattr(task, 'value', task)}")
    if tokenizer.kind.value != "char":
        raise ConfigError(
            f"data.source=recall writes each symbol as one character: use tokenizer=char, not {tokenizer.kind.value}"
        )
    if data.document_mask:
        raise ConfigError("data.source=recall puts one sequence in each window already; drop data.document_mask")
