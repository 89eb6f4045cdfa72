"""Decoding options (`GenerationConfig`): the strategy and its settings, checked on one line each.
Torch-free, so zoo-generate refuses a bad option before torch loads; the decoding itself is
`zoo.models.generate`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.schema.convert import check_seed


class Strategy(Choice):
    greedy = "greedy"  # argmax at every step
    beam = "beam"  # keep the num_beams best partial outputs by summed log-probability
    sample = "sample"  # draw from the (temperature, top-k, top-p filtered) distribution


_SAMPLING = ("temperature", "top_k", "top_p", "seed")
# below this sampling is greedy in all but name; far below it (1e-45) logits divided by it
# overflow float32 to inf and the probabilities become NaN
MIN_TEMPERATURE = 1e-3
_BEAM = ("num_beams", "length_penalty", "early_stopping")

# the options that belong to one strategy, refused under another
OPTIONS_OF = {Strategy.sample: _SAMPLING, Strategy.beam: _BEAM}


MAX_LENGTH_PENALTY = 10.0  # 2**24 tokens to the 10th is 1e72: no overflow, no underflow to 0


@dataclass(kw_only=True)
class GenerationConfig:
    """Decoding options. Options of one strategy set away from their defaults under another
    strategy are refused."""

    strategy: Strategy = field(default=Strategy.greedy, metadata={"help": "greedy, beam or sample"})
    max_new_tokens: int = field(default=64, metadata={"help": "tokens generated at most"})
    use_cache: bool = field(default=True, metadata={"help": "reuse keys/values across steps"})
    num_beams: int = field(default=4, metadata={"help": "beam: beams kept per input"})
    length_penalty: float = field(
        default=1.0, metadata={"help": "beam: hypotheses are ranked by log p / length^length_penalty"}
    )
    early_stopping: bool = field(
        default=False,
        metadata={
            "help": "beam: stop an input as soon as num_beams hypotheses ended (true), or "
            "once no running beam can still beat the worst of them (false)"
        },
    )
    temperature: float = field(default=1.0, metadata={"help": "sample: logits are divided by it"})
    top_k: int = field(default=0, metadata={"help": "sample: keep the k most likely tokens (0: all)"})
    top_p: float = field(default=1.0, metadata={"help": "sample: keep the smallest set with probability >= p"})
    seed: int | None = field(default=None, metadata={"help": "sample: seed of the draws"})
    static_cache: bool = field(
        default=False,
        metadata={
            "help": "allocate the KV cache for prompt + max_new_tokens at the start: every "
            "step then has the same shapes (what compile=true and CUDA graphs need)"
        },
    )
    compile: bool = field(default=False, metadata={"help": "torch.compile the decoding step (first call compiles)"})
    stop_every: int = field(
        default=8,
        metadata={
            "help": "greedy and sample: whether every row has ended is asked once every k steps, "
            "not at every one (each ask reads a flag on the host: on an accelerator a sync that "
            "drains its queue); the steps taken past the end are pad and cut off, so the output "
            "is the same for every k"
        },
    )
    # self-speculative decoding with multi-token prediction modules (zoo.models.speculative)
    speculative: bool = field(
        default=False,
        metadata={
            "help": "greedy: the checkpoint's multi-token prediction modules (task.mtp_depth) draft "
            "tokens the model verifies in one forward; the output is plain greedy's, each prompt "
            "decoded alone"
        },
    )

    def __post_init__(self) -> None:
        self.strategy = Strategy.parse(self.strategy, "strategy")
        if self.static_cache and not self.use_cache:
            raise ConfigError("static_cache=true needs use_cache=true")
        for f in fields(self):
            for strategy, names in OPTIONS_OF.items():
                if f.name in names and self.strategy != strategy and getattr(self, f.name) != f.default:
                    raise ConfigError(f"{f.name} only applies to strategy={strategy.value}, not {self.strategy.value}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if isinstance(self.stop_every, bool) or not isinstance(self.stop_every, int) or self.stop_every < 1:
            raise ConfigError(f"stop_every must be an integer >= 1, got {self.stop_every!r}")
        if self.num_beams < 1:
            raise ConfigError(f"num_beams must be >= 1, got {self.num_beams}")
        if not self.temperature >= MIN_TEMPERATURE:  # NaN too
            raise ConfigError(
                f"temperature must be a number >= {MIN_TEMPERATURE:g}, got {self.temperature} "
                f"(strategy=greedy is the limit of a temperature near 0)"
            )
        if not -MAX_LENGTH_PENALTY <= self.length_penalty <= MAX_LENGTH_PENALTY:  # NaN too
            # length ** length_penalty must stay a float for every length a model decodes
            raise ConfigError(
                f"length_penalty must be a number from {-MAX_LENGTH_PENALTY:g} to {MAX_LENGTH_PENALTY:g}, "
                f"got {self.length_penalty}"
            )
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0, got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:  # NaN too
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.seed is not None:
            check_seed(self.seed, "seed")
        if self.speculative:
            _check_speculative(self)


def _check_speculative(config: GenerationConfig) -> None:
    """speculative=true's refusals: greedy over a growing cache, decoded eagerly."""
    if config.strategy != Strategy.greedy:
        raise ConfigError(
            f"speculative=true verifies greedy choices; it needs strategy=greedy, not {config.strategy.value}"
        )
    for name, value in (("use_cache", False), ("static_cache", True), ("compile", True)):
        if getattr(config, name) == value:
            raise ConfigError(
                f"speculative=true rolls back a growing KV cache; it takes {name}={str(not value).lower()}"
            )
