"""Per-device batch / accumulation, and the model-vocabulary check."""

import pytest

from zoo.config.errors import ConfigError
from zoo.config.schema.data import TokenizerConfig
from zoo.data import build_tokenizer, check_vocab, per_device_batch


@pytest.mark.parametrize(
    "global_batch, world, cap, expected",
    [
        (32, 1, None, (32, 1)),
        (32, 4, None, (8, 1)),
        (32, 4, 8, (8, 1)),
        (32, 4, 4, (4, 2)),
        (32, 2, 5, (4, 4)),
        (24, 2, 5, (4, 3)),
        (7, 1, 3, (1, 7)),
    ],
)
def test_per_device_batch(global_batch, world, cap, expected):
    batch, accumulation = per_device_batch(global_batch, world, cap)
    assert (batch, accumulation) == expected
    assert batch * accumulation * world == global_batch
    assert cap is None or batch <= cap


def test_indivisible_global_batch_is_refused():
    with pytest.raises(
        ConfigError, match=r"data.global_batch_size \(30\) must be divisible by the number of devices \(4\)"
    ):
        per_device_batch(30, 4)


def test_check_vocab():
    tok = build_tokenizer(TokenizerConfig(kind="byte"))
    check_vocab(262, tok)
    check_vocab(8192, tok)
    with pytest.raises(ConfigError, match=r"model.vocab_size \(256\) is smaller .* \(262\); set model.vocab_size=262"):
        check_vocab(256, tok)
