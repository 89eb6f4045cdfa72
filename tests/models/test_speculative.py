"""Self-speculative greedy decoding with multi-token prediction modules: exactly plain greedy's
output, whether the drafts are rejected (untrained modules) or accepted (modules trained on a
cycle they can predict), over several prompts, seeds and position schemes."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import sharp, tiny
from zoo.config.errors import ConfigError
from zoo.config.schema.generation import GenerationConfig
from zoo.config.schema.model import ModelConfig
from zoo.models import build_model
from zoo.models.generate import generate
from zoo.models.mtp import MultiTokenPrediction
from zoo.models.speculative import speculative_generate
from zoo.tasks import TASKS


@pytest.mark.parametrize("position, seed", [("rope", 0), ("learned", 1), ("alibi", 2), ("relative", 3)])
def test_speculative_decoding_gives_plain_greedy_output_when_drafts_are_rejected(position, seed):
    cfg = ModelConfig(**sharp(position=position, max_seq_len=64))
    model = build_model(cfg, init_seed=seed).eval()
    mtp = MultiTokenPrediction(cfg, 3)
    mtp.initialise("mtp", seed)
    ids = torch.randint(0, cfg.vocab_size, (3, 7), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # a left-padded row
    mask[2, :6] = 0  # a one-token prompt
    plain = generate(model, ids, attention_mask=mask, max_new_tokens=30)
    fast, stats = speculative_generate(model, mtp, ids, attention_mask=mask, max_new_tokens=30)
    assert torch.equal(fast, plain)
    assert stats.tokens == 3 * 30 and stats.rounds < stats.tokens  # the prompt's forward adds the first


@pytest.fixture(scope="module")
def cycle_lm():
    """A one-layer model with two modules trained 40 steps on a cycle of 12 tokens (about 2 s):
    its greedy continuation follows the cycle and the modules draft it."""
    torch.manual_seed(0)
    task = TASKS["causal_lm"](
        model=tiny(position="rope", n_layers=1, max_seq_len=128),
        task={"kind": "causal_lm", "mtp_depth": 2, "mtp_weight": 1.0},
    )
    optimizer = torch.optim.Adam(task.parameters(), lr=1e-2)
    draws = torch.Generator().manual_seed(0)
    for _ in range(40):
        window = (torch.randint(0, 12, (8, 1), generator=draws) + torch.arange(17)) % 12 + 3  # (8, 17)
        loss, _, _ = task.training_loss({"input_ids": window[:, :-1], "labels": window[:, 1:]})
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return task.eval()


def test_accepted_drafts_give_plain_greedy_output_with_fewer_forwards(cycle_lm):
    on_cycle = (torch.arange(5)[None] + torch.tensor([[0], [4], [7]])) % 12 + 3  # (3, 5)
    off_cycle = torch.tensor([[20, 3, 30, 9, 1]])  # where the drafts miss at first
    for ids, eos in ((on_cycle, None), (off_cycle, None), (on_cycle[:1], 9)):
        plain = generate(cycle_lm.model, ids, max_new_tokens=25, eos_id=eos, pad_id=0)
        fast, stats = speculative_generate(cycle_lm.model, cycle_lm.mtp, ids, max_new_tokens=25, eos_id=eos)
        assert torch.equal(fast, plain)
    _, stats = speculative_generate(cycle_lm.model, cycle_lm.mtp, on_cycle, max_new_tokens=25)
    assert stats.acceptance > 0.8 and stats.tokens_per_forward > 2.5
    assert stats.per_depth[0] >= stats.per_depth[1] > 0  # depth 2 is accepted only after depth 1


def test_generate_decodes_speculatively_when_asked_and_refuses_without_modules(cycle_lm):
    ids = torch.tensor([[3, 4, 5]])
    config = GenerationConfig(max_new_tokens=10, speculative=True)
    plain = generate(cycle_lm.model, ids, max_new_tokens=10)
    assert torch.equal(generate(cycle_lm.model, ids, config=config, draft=cycle_lm.mtp), plain)
    with pytest.raises(ValueError, match="train with task.mtp_depth >= 1"):
        generate(cycle_lm.model, ids, config=config)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"strategy": "sample"}, "it needs strategy=greedy, not sample"),
        ({"use_cache": False}, "it takes use_cache=true"),
        ({"static_cache": True}, "it takes static_cache=false"),
        ({"compile": True}, "it takes compile=false"),
    ],
)
def test_speculative_decoding_refuses_what_it_cannot_roll_back(options, message):
    with pytest.raises(ConfigError, match=message):
        GenerationConfig(speculative=True, **options)
