"""zoo-bench times the training step zoo-train takes: under model.moe_balance=bias that step
ends with each mixture layer's selection bias updated from its experts' loads
(`ZooTask.after_optimizer_step`), as in DeepSeek-V3's auxiliary-loss-free balancing."""

from __future__ import annotations

import torch

import zoo
from zoo.bench.workload import Workload
from zoo.bench.zoo_subject import ZooSubject
from zoo.config.schema.convert import as_model_config
from zoo.nn.moe import moe_layers

TINY = [
    "model.d_model=32",
    "model.n_layers=2",
    "model.n_heads=2",
    "model.vocab_size=128",
    "model.max_seq_len=64",
    "model.dropout=0.0",
    "model.ffn=moe",
    "model.moe_experts=4",
    "model.moe_top_k=2",
    "model.moe_d_ff=16",
    "model/moe_balance=bias",
]


def test_a_zoo_bench_step_on_a_bias_balanced_mixture_updates_its_selection_biases():
    cfg = as_model_config(zoo.compose(["model=llama", *TINY]).model)
    work = Workload(model=cfg, batch=2, seq_len=16, device=torch.device("cpu"))
    subject = ZooSubject(work)
    layers = moe_layers(subject.model)
    assert len(layers) == 2 and all(layer.router.score_bias is not None for layer in layers)
    before = [layer.router.score_bias.clone() for layer in layers]
    subject.train_step(work.training_batch())
    rate = cfg.moe_bias_rate
    for layer, old in zip(layers, before, strict=True):
        step = layer.router.score_bias - old  # (E,): u · sign(mean load − load) per expert
        assert step.abs().max() > 0, "the step left the selection bias where it was"
        assert torch.all((step == 0) | torch.isclose(step.abs(), torch.tensor(rate)))
        assert not layer.pending.any()  # the loads counted for the next step start over, as in zoo-train
