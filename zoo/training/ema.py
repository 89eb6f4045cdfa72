"""The exponential moving average of the weights during training (`optim.ema`): kept in float32,
updated after each optimizer step, swapped in for validation, saved beside the raw weights and
resumed exactly. The rule and its refusals are `zoo.config.facts.ema`'s.

Under sharding (trainer=fsdp, hsdp) each parameter is a DTensor and so is its average: a rank
keeps and updates only its rows, as its optimizer does. A checkpoint holds the average whole
(each tensor gathered as it is saved, one at a time, and kept by rank 0, which writes it beside
the loops' state in meta.pt), so zoo-eval reads it without the shards and a run resumes on any
number of ranks, each taking its rows of it again. The cost: rank 0 holds the whole float32
average in host memory while it saves, and every rank reads it whole when it resumes (a model
whose average does not fit one host's memory wants it in the shards instead)."""

from __future__ import annotations

import lightning as L
import torch
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor, distribute_tensor
from torchmetrics import Metric

from zoo.config.facts.ema import EMA_STATE, EMA_UPDATES, EmaEval, ema_decay, ema_due
from zoo.tasks.muon import whole  # a sharded tensor gathered on every rank (a collective), a plain one as it is


def trainable(pl_module) -> dict[str, torch.Tensor]:
    """The task's trainable parameters by their `state_dict` key (model.*). Under FSDP2 each is
    its shard: a unit a forward left gathered (the root keeps its parameters gathered after a
    forward, e.g. the sanity check's validation) is resharded first."""
    for module in pl_module.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
    return {name: p for name, p in pl_module.named_parameters() if p.requires_grad}


def placed_like(saved: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """A checkpoint's whole average of `p`, float32, on `p`'s device and, for a sharded `p`, cut
    into `p`'s mesh and placements (this rank keeps its rows)."""
    value = saved.to(device=p.device, dtype=torch.float32)
    if isinstance(p, DTensor):
        return distribute_tensor(value, p.device_mesh, p.placements)
    return value.clone()


class WeightAverage(L.Callback):
    """`optim.ema`: an average of every trainable parameter, float32, on the parameter's device.

    It is listed before the callbacks that save (last.ckpt at a step boundary, the interrupt's
    save), so a checkpoint of step s holds the average updated at step s. While the average is
    swapped in for a validation, a checkpoint written then still holds the raw weights."""

    def __init__(self, decay: float, every: int = 1, warmup: bool = False, evaluate: EmaEval = EmaEval.raw) -> None:
        self.decay, self.every, self.warmup, self.evaluate = decay, every, warmup, EmaEval(evaluate)
        self.average: dict[str, torch.Tensor] | None = None
        self.updates = 0
        self._seen_step: int | None = None
        self._raw: dict[str, torch.Tensor] | None = None  # the weights while the average is swapped in
        self._loaded: dict | None = None  # a checkpoint's average, placed when training starts

    # -- state ------------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module) -> None:
        """After a checkpoint is restored (Lightning restores it after `on_fit_start`): its
        average, or a copy of the weights."""
        self._seen_step = trainer.global_step  # a resumed run's average already holds this step
        params = trainable(pl_module)
        loaded = self._loaded or {}
        self.average = {}
        for name, p in params.items():
            saved = loaded.get(name)
            if saved is not None and saved.shape == p.shape:  # a DTensor's shape is the whole one
                self.average[name] = placed_like(saved, p)
            else:
                self.average[name] = p.detach().to(dtype=torch.float32).clone()
        self._loaded = None

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if self.average is None:
            return
        # a sharded average gathered on every rank (a collective), kept by rank 0 alone: the one
        # that writes the loops' state, so no other rank holds a whole copy in host memory
        keep = trainer.is_global_zero
        state = {}
        for name, t in self.average.items():
            gathered = whole(t.detach())
            if keep:
                state[name] = gathered.cpu().clone()
            del gathered
        if keep:
            checkpoint[EMA_STATE] = state
        checkpoint[EMA_UPDATES] = self.updates
        if self._raw is not None and "state_dict" in checkpoint:  # saved mid-validation: the raw weights
            for name, raw in self._raw.items():
                # a sharded state dict keeps its DTensors where they are (the shards' writer saves them)
                kept = raw.detach().clone()
                checkpoint["state_dict"][name] = kept if isinstance(kept, DTensor) else kept.cpu()

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        saved = checkpoint.get(EMA_STATE)
        if isinstance(saved, dict):  # a checkpoint written without the average starts it from its weights
            self._loaded = saved
            self.updates = int(checkpoint.get(EMA_UPDATES, 0))

    # -- update -----------------------------------------------------------------------------
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._seen_step:  # an accumulation micro-batch: no optimizer step yet
            return
        self._seen_step = step
        if self.average is None or not ema_due(step, self.every):
            return
        d = ema_decay(self.decay, self.updates, self.warmup)
        with torch.no_grad():
            for name, p in trainable(pl_module).items():
                self.average[name].lerp_(p.detach().float(), 1.0 - d)  # d * ema + (1 - d) * w
        self.updates += 1

    # -- validation -------------------------------------------------------------------------
    def swap_in(self, pl_module) -> None:
        """The average in place of the weights (cast to their dtype) until `swap_out`."""
        if self.average is None or self._raw is not None:
            return
        params = trainable(pl_module)
        self._raw = {name: p.detach().clone() for name, p in params.items()}
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(self.average[name].to(p.dtype))

    def swap_out(self, pl_module) -> None:
        if self._raw is None:
            return
        with torch.no_grad():
            for name, p in trainable(pl_module).items():
                p.copy_(self._raw[name])
        self._raw = None

    def on_validation_start(self, trainer, pl_module) -> None:
        if self.evaluate == EmaEval.ema:
            self.swap_in(pl_module)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self.evaluate == EmaEval.ema:
            self.swap_out(pl_module)
        elif self.evaluate == EmaEval.both and not trainer.sanity_checking:
            self.swap_in(pl_module)
            try:
                metrics = second_pass(trainer, pl_module)
            finally:
                self.swap_out(pl_module)
            for name, value in metrics.items():
                trainer.callback_metrics[name] = value
            if trainer.loggers and trainer.is_global_zero:
                step = trainer.fit_loop.epoch_loop._batches_that_stepped  # the step val/loss was logged at
                for logger in trainer.loggers:
                    logger.log_metrics({k: float(v) for k, v in metrics.items()}, step=step)


def second_pass(trainer, pl_module) -> dict[str, torch.Tensor]:
    """The task's validation metrics over the batches Lightning validated, measured again on the
    weights the module holds now, named val_ema/*; the task's metrics are left reset."""
    was_training = pl_module.training
    pl_module.eval()
    limits = list(trainer.num_val_batches)
    loaders = trainer.val_dataloaders
    loaders = loaders if isinstance(loaders, (list, tuple)) else [loaders]
    with torch.no_grad():
        for loader, limit in zip(loaders, limits, strict=False):
            for index, batch in enumerate(loader):
                if index >= limit:
                    break
                batch = pl_module.transfer_batch_to_device(batch, pl_module.device, 0)
                pl_module.validation_step(batch, index)
    out: dict[str, torch.Tensor] = {}
    if pl_module.counted_anywhere(pl_module.val_loss.weight):
        loss = pl_module.val_loss.compute()
        out["val_ema/loss"] = loss.detach()
        out["val_ema/ppl"] = torch.exp(loss.clamp(max=50)).detach()
        out["val_ema/accuracy"] = pl_module.val_accuracy.compute().detach()
        if getattr(pl_module, "val_bpb", None) is not None and pl_module.target_bytes() is not None:
            out["val_ema/bpb"] = pl_module.val_bpb.compute().detach()
    for name, metric in pl_module.named_children():  # every val_* metric (seq2seq's BLEU too) starts afresh
        if name.startswith("val_") and isinstance(metric, Metric):
            metric.reset()
    pl_module.train(was_training)
    return out
