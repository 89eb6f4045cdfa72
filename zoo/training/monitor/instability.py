"""`InstabilityMonitor`: every `callbacks.instability_every` optimizer steps, the two signals of
training instability that Wortsman et al. 2023 ("Small-scale proxies for large-scale Transformer
training instabilities") follow, logged as train metrics to every tracker:

- `train/max_attn_logit`: the largest scaled query-key product q·kᵀ·scale that any query may
  attend, over the self-attention layers (its growth precedes attention-entropy collapse; QK-norm
  prevents it), and `train/max_attn_logit/layer_i` for each layer i of the model's
  self-attentions in module order (an encoder-decoder's encoder layers first);
- `train/output_logit_mean` and `train/log_z_mean`: the mean output logit and the mean log Z
  (logsumexp of a token's logits) over the tokens of the step's batch (their drift to large
  negative values precedes output-logit divergence; z-loss prevents it).

Both are read from the step's own training forward (dropout and all): the attention layers
record their maximum when asked (`Attention.record_max_logit`), and a forward hook on the model,
registered for that one forward and removed in it, runs the output head again without gradients
on every token's final hidden state, task.loss_chunk rows at a time. The chunked output loss
never makes the (B·T, V) logits; this makes them one chunk at a time, so a logged step costs
about one more forward of the output head. Padding positions (attention_mask 0) are left out. A
model whose forward does not pass through its hooks (a sharded, FSDP model) or that has no output
head (a classifier) logs the attention logits only. Under data parallelism every rank measures
the same step; the maximum is taken over ranks and the means averaged.

The values go to every logger at their own step, whatever trainer.log_every_n_steps is (a value
Lightning holds for its next logging step would be lost or late). The last training step is
always measured too, and `last` keeps its values for summary.json. Off
(`callbacks.instability_every` null or 0): the callback is not made, nothing is registered and
the step is unchanged."""

from __future__ import annotations

import lightning as L
import torch

from zoo.nn.attention import Attention
from zoo.nn.latent_attention import LatentAttention
from zoo.nn.logit_stats import output_logit_stats

MAX_ATTN_LOGIT = "train/max_attn_logit"
OUTPUT_LOGIT_MEAN = "train/output_logit_mean"
LOG_Z_MEAN = "train/log_z_mean"


def self_attentions(model: torch.nn.Module) -> list[Attention | LatentAttention]:
    """The self-attention modules of `model`, in module order (cross-attention excluded; latent
    attention, model.kv=latent, included)."""
    return [m for m in model.modules() if isinstance(m, (Attention, LatentAttention)) and not m.cross]


class InstabilityMonitor(L.Callback):
    """Logs the maximum attention logit and the output-logit statistics at steps 0, N, 2N, ...
    and at the last step (`every` = N >= 1). With gradient accumulation, the first micro-batch of
    a step is measured."""

    def __init__(self, every: int) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every = every
        self._measured_step: int | None = None  # the step whose first micro-batch was measured
        self._armed = False
        self._hook = None
        self._output: tuple[torch.Tensor, torch.Tensor] | None = None
        self._rows = 0
        self._chunk = 1024
        self.last: dict[str, float] = {}  # the values of the last step measured (summary.json's)

    def _due(self, trainer) -> bool:
        step = trainer.global_step
        if step == self._measured_step:
            return False
        last = trainer.max_steps is not None and trainer.max_steps > 0 and step == trainer.max_steps - 1
        return step % self.every == 0 or last

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self._due(trainer):
            return
        self._measured_step, self._armed, self._output = trainer.global_step, True, None
        for attention in self_attentions(pl_module.model):
            attention.record_max_logit, attention.last_max_logit = True, None
        if getattr(pl_module.model, "lm_head", None) is not None:
            self._chunk = pl_module.task_config.loss_chunk  # rows of logits alive at a time
            self._hook = pl_module.model.register_forward_hook(self._read_output, with_kwargs=True)

    def _read_output(self, model, args, kwargs, output) -> None:
        """The model's first forward of the step: the output statistics of its final hidden
        states (B, T, D); the hook then removes itself."""
        self._remove_hook()
        hidden = getattr(output, "hidden_states", None)
        if hidden is None:
            return
        rows = hidden.detach().reshape(-1, hidden.shape[-1])  # (B·T, D)
        # the hidden states are the decoder's where there is one: its own padding mask
        padding = kwargs.get("decoder_attention_mask" if "decoder_input_ids" in kwargs else "attention_mask")
        if padding is not None and padding.numel() == rows.shape[0]:
            rows = rows[padding.reshape(-1).bool()]  # (n, D) the tokens that are not padding
        mean, log_z, n = output_logit_stats(model.logits, rows, chunk=self._chunk)
        self._output, self._rows = (mean, log_z), n

    def _remove_hook(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not self._armed:
            return
        self._armed = False
        self._remove_hook()
        layers = []
        for attention in self_attentions(pl_module.model):
            attention.record_max_logit = False
            if attention.last_max_logit is not None:
                layers.append(attention.last_max_logit)
            attention.last_max_logit = None
        values: dict[str, torch.Tensor] = {}
        if layers:
            values[MAX_ATTN_LOGIT] = torch.stack(layers).amax()
            values.update({f"{MAX_ATTN_LOGIT}/layer_{i}": value for i, value in enumerate(layers)})
        if self._output is not None and self._rows > 0:
            values[OUTPUT_LOGIT_MEAN], values[LOG_Z_MEAN] = self._output
        self._output = None
        if trainer.world_size > 1:  # every rank measured this step: the maximum and the means of all
            values = {
                name: trainer.strategy.reduce(
                    value.float(), reduce_op="max" if name.startswith(MAX_ATTN_LOGIT) else "mean"
                )
                for name, value in values.items()
            }
        self.last = {name: float(value) for name, value in values.items()}
        for logger in trainer.loggers:  # written at this step whatever trainer.log_every_n_steps is
            logger.log_metrics(self.last, step=self._measured_step)
            logger.save()

    def on_train_end(self, trainer, pl_module):
        self._remove_hook()
        for attention in self_attentions(pl_module.model):
            attention.record_max_logit, attention.last_max_logit = False, None
