"""`RoutingMonitor`: every `callbacks.routing_every` optimizer steps (and at the last), what the
mixture-of-experts layers (`model.ffn=moe`) did with the step's tokens, logged as train metrics
to every tracker:

- `train/moe_load/layer_i/expert_e`: the share of layer i's routed (token, slot) pairs that chose
  expert e, before any capacity drop (1/E each when balanced; Switch's f_i);
- `train/moe_load_max/layer_i` and `train/moe_load_max`: E x the largest share of layer i, and its
  mean over layers (1 = balanced, E = every token on one expert: the collapse a load-balancing
  loss of 0 can bring);
- `train/moe_load_min/layer_i` and `train/moe_load_min`: E x the smallest share (1 = balanced, 0 = an
  expert no token chose: the starved expert a balancing bias, model.moe_balance=bias, raises);
- `train/moe_dropped/layer_i` and `train/moe_dropped`: the share of slots over an expert's
  capacity (model.moe_capacity; 0 when dropless), per layer and the mean;
- `train/moe_entropy/layer_i` and `train/moe_entropy`: the mean over tokens of the router's
  entropy in nats (log E when uniform), per layer and the mean.

Layer i counts the mixture layers in module order (an encoder-decoder's encoder first). Each
layer keeps these of its last training forward in device buffers (`zoo.nn.moe.MoE`), with no
host sync; the monitor reads them at the end of a measured step's first micro-batch, all in one
transfer. Under data parallelism each rank routed its own tokens: the values are averaged over
ranks (each rank's batch is the same size). The values go to every logger at their own step,
whatever trainer.log_every_n_steps is, and `last` keeps the last step's for summary.json (the
house pattern of `zoo.training.monitor.instability`). Made only for a model with mixture layers."""

from __future__ import annotations

import lightning as L
import torch

from zoo.nn.moe import moe_layers

LOAD, LOAD_MAX, DROPPED, ENTROPY = "train/moe_load", "train/moe_load_max", "train/moe_dropped", "train/moe_entropy"
LOAD_MIN = "train/moe_load_min"


def routing_values(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """{metric name: 0-d tensor} of `model`'s mixture layers as their last training forward left
    them (see the module docstring); empty without mixture layers."""
    layers = moe_layers(model)
    if not layers:
        return {}
    values: dict[str, torch.Tensor] = {}
    for i, layer in enumerate(layers):
        for e, share in enumerate(layer.load.unbind()):
            values[f"{LOAD}/layer_{i}/expert_{e}"] = share
        values[f"{LOAD_MAX}/layer_{i}"] = layer.n_experts * layer.load.max()
        values[f"{LOAD_MIN}/layer_{i}"] = layer.n_experts * layer.load.min()
        values[f"{DROPPED}/layer_{i}"] = layer.dropped
        values[f"{ENTROPY}/layer_{i}"] = layer.entropy
    for name in (LOAD_MAX, LOAD_MIN, DROPPED, ENTROPY):
        values[name] = torch.stack([values[f"{name}/layer_{i}"] for i in range(len(layers))]).mean()
    return values


class RoutingMonitor(L.Callback):
    """Logs the routing statistics at steps 0, N, 2N, ... and at the last step (`every` = N >= 1)."""

    def __init__(self, every: int) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every = every
        self._measured_step: int | None = None
        self._armed = False
        self.last: dict[str, float] = {}  # the values of the last step measured (summary.json's)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        step = trainer.global_step
        if step == self._measured_step:
            return
        last = trainer.max_steps is not None and trainer.max_steps > 0 and step == trainer.max_steps - 1
        if step % self.every == 0 or last:
            self._measured_step, self._armed = step, True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not self._armed:
            return
        self._armed = False
        values = routing_values(pl_module.model)
        if not values:
            return
        names = list(values)
        stacked = torch.stack([values[n].detach().float() for n in names])  # (metrics,): one transfer
        if trainer.world_size > 1:  # each rank routed its own tokens: their mean
            stacked = trainer.strategy.reduce(stacked, reduce_op="mean")
        self.last = dict(zip(names, stacked.tolist()))
        for logger in trainer.loggers:  # written at this step whatever trainer.log_every_n_steps is
            logger.log_metrics(self.last, step=self._measured_step)
            logger.save()
