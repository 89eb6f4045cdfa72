"""The LightningModule all tasks share: builds the model from plain config data, owns the
optimizer, schedule, metrics and token counting. Architecture lives in `zoo.models` only."""

from __future__ import annotations

import logging
import resource
from collections.abc import Callable
from typing import Any, ClassVar, TypedDict

import lightning as L
import torch
import torch.nn.functional as F
from torchmetrics.classification import MulticlassAccuracy

from zoo.config.facts.moe_routing import MoEBalance
from zoo.config.facts.ramps import ramped_lr
from zoo.config.facts.tasks import TaskKind, task_spec
from zoo.config.records.hparams import CheckpointExtras, from_hparams
from zoo.config.schema.model import Family, ModelConfig
from zoo.config.schema.task import NonFinitePolicy, OutputLoss, TaskConfig
from zoo.config.schema.train import OptimConfig, SchedulerConfig
from zoo.data.even_batches import is_filler
from zoo.data.tokenizers.base import Tokenizer
from zoo.data.tokenizers.state import tokenizer_state
from zoo.data.tokenizers.text_bytes import TextBytes
from zoo.models import ZooModel, build_model
from zoo.models.base import TokenLoss
from zoo.models.init import has_meta_parameters, materialize
from zoo.models.parametrization import optimizer_scales
from zoo.models.sharding import layers, shard, sharding_mesh
from zoo.nn.chunked_loss import IGNORE
from zoo.nn.moe import RouterLosses, balance_experts, router_losses
from zoo.tasks.metrics import BitsPerByte, WeightedMean
from zoo.tasks.optim import build_optimizer, schedule
from zoo.tasks.target_bytes import TargetBytes

log = logging.getLogger("zoo")


def _full(t: torch.Tensor) -> torch.Tensor:
    """A sharded (DTensor) value gathered whole, the same on every rank; others as they are."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _total_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of all gradients together: finite when every entry is (it can also overflow
    for huge finite entries; the caller then looks at each gradient). Sharded gradients
    (FSDP) give the norm of the whole gradient, on every rank."""
    if hasattr(torch.nn.utils, "get_total_norm"):  # torch >= 2.6
        return _full(torch.nn.utils.get_total_norm(grads, error_if_nonfinite=False))
    return _full(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))


_COMPILED_FORWARD_LOSS: list[Callable[..., TokenLoss]] = []


def _compiled_forward_loss() -> Callable[..., TokenLoss]:
    """torch.compile of `ZooModel.forward_losses` (model passed as an argument, so a copied task
    never runs another model's weights), made once per process."""
    if not _COMPILED_FORWARD_LOSS:
        _COMPILED_FORWARD_LOSS.append(torch.compile(ZooModel.forward_losses))
    return _COMPILED_FORWARD_LOSS[0]


class _LossOptions(TypedDict):
    """The keyword arguments of `ZooModel.forward_losses` a task's config sets."""

    chunk: int
    label_smoothing: float
    output_loss: OutputLoss
    sparse_targets: bool
    z_loss: float


class NonFiniteLoss(RuntimeError):
    """The training loss, or a gradient, was NaN or infinite at `step` (with
    task.on_nonfinite_loss=stop). `what`: e.g. "loss is nan", "gradient of model.x is inf"."""

    def __init__(self, step: int, what: str) -> None:
        super().__init__(f"the training {what} at step {step}")
        self.step, self.what = step, what


class ZooTask(L.LightningModule):
    """Hyperparameters are plain dicts (`model`, `task`, `optim`, `scheduler`, `extra`:
    `zoo.config.records.hparams.to_hparams`), so a checkpoint is data that loads with
    `torch.load(..., weights_only=True)`; the task reads them as schema objects (`from_hparams`).

    Each task class names its `kind` (its row of `zoo.config.facts.tasks.TASK_SPECS` and its key in
    `zoo.tasks.TASKS`) and takes `families = families_of(kind)` from that row."""

    kind: ClassVar[TaskKind]
    families: ClassVar[tuple[Family, ...]]
    tokens_seen: torch.Tensor  # buffers register_buffer adds: declared so their type is known
    nonfinite_skipped: torch.Tensor

    def __init__(
        self,
        model: dict,
        task: dict,
        optim: dict | None = None,
        scheduler: dict | None = None,
        extra: dict | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        trained = from_hparams({"model": model, "task": task, "optim": optim, "scheduler": scheduler, "extra": extra})
        self.model_config: ModelConfig = trained.model
        self.task_config: TaskConfig = trained.task
        self.optim_config: OptimConfig = trained.optim
        self.scheduler_config: SchedulerConfig = trained.scheduler
        self.extras: CheckpointExtras = trained.extras
        self.model = build_model(self.model_config)
        if self.task_config.compile:
            self.model.compile()  # in place: parameter names and checkpoints stay the same
        self.tokenizer: Tokenizer | None = None  # attached by the training CLI / load_checkpoint for decoding
        self.val_loss = WeightedMean()  # per target token; a diverged model reports NaN, not nothing
        self.val_accuracy = self._accuracy()
        # shifted tasks (causal LM, seq2seq) predict text left to right: bits per byte of it
        self.val_bpb = BitsPerByte() if task_spec(self.kind).shifted else None
        self._target_bytes: tuple | None = None  # (tokenizer, device, TargetBytes), made when first needed
        self.register_buffer("tokens_seen", torch.zeros((), dtype=torch.long), persistent=True)
        self.register_buffer("nonfinite_skipped", torch.zeros((), dtype=torch.long), persistent=True)

    # -- to be provided by each task ------------------------------------------------------
    def forward_batch(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, int]:
        """-> (logits (N, C), targets (N,), number of input tokens in the batch)."""
        raise NotImplementedError

    token_level = False  # does the loss read the model's output head at every position?

    def model_inputs(self, batch: dict) -> tuple[dict, torch.Tensor, int]:
        """Token-level tasks: the model's forward arguments, labels (B, T), number of input
        tokens. Default: one stack (causal and masked LM)."""
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch.get("attention_mask")}
        return inputs, batch["labels"], batch["input_ids"].numel()

    def predict_tokens(self, batch: dict):
        """Token-level objectives: logits (B·T, V), labels (B·T,), number of input tokens."""
        inputs, labels, n_tokens = self.model_inputs(batch)
        logits = self.model(**inputs).logits  # (B, T, V), the head inside the one forward call
        return logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), n_tokens  # (B·T, V)

    def preceding_ids(self, batch: dict) -> torch.Tensor:
        """Shifted tasks: the id read at each target's position, the one before the target in
        the text, (B·T,) in the order of `predict_tokens`' labels. Default: the inputs."""
        return batch["input_ids"].reshape(-1)

    sparse_targets = False  # are targets on a small share of the rows (masked LM)?

    def training_loss(self, batch: dict) -> tuple[torch.Tensor, int, int]:
        """-> (loss, number of target rows, number of input tokens). Token-level tasks run the
        model's `forward_losses` (stack, output head and loss in one call; one compiled graph
        with task.compile=true); with the chunked output loss they never build the (B·T, V)
        logits. With task.z_loss the loss is the cross-entropy plus the z-loss, and the parts
        are kept in `last_loss_parts` for `training_step` to log."""
        smoothing = self.task_config.label_smoothing
        self.last_loss_parts = None
        if not self.token_level:
            logits, targets, n_tokens = self.forward_batch(batch)
            return self.add_router_losses(self.loss(logits, targets, smoothing)), targets.shape[0], n_tokens
        inputs, labels, n_tokens = self.model_inputs(batch)
        options = self.loss_options(labels)
        if self.task_config.compile and not getattr(self.model, "sharded", False):
            parts = _compiled_forward_loss()(self.model, inputs, labels, **options)
        else:  # under FSDP, forward_losses is a registered forward entry (with compile, each layer compiled)
            parts = self.model.forward_losses(inputs, labels, **options)
        if self.task_config.z_loss:
            self.last_loss_parts = parts
        return self.add_router_losses(parts.loss), labels.numel(), n_tokens

    def loss_options(self, labels: torch.Tensor) -> _LossOptions:
        """The keyword arguments of `ZooModel.forward_losses` this task's config sets, the output
        loss `auto` resolved by the device of `labels`."""
        output_loss = self.task_config.output_loss
        if output_loss == OutputLoss.auto:
            output_loss = OutputLoss.chunked if labels.device.type == "cpu" else OutputLoss.logits
        return _LossOptions(
            chunk=self.task_config.loss_chunk,
            label_smoothing=self.task_config.label_smoothing,
            output_loss=output_loss,
            sparse_targets=self.sparse_targets,
            z_loss=self.task_config.z_loss,
        )

    def add_router_losses(self, loss: torch.Tensor) -> torch.Tensor:
        """`loss` plus, under model.ffn=moe, task.moe_balance x the load-balancing loss and
        task.moe_router_z x the router z-loss of this forward's mixture layers (their mean over
        layers: `zoo.nn.moe.router_losses`); both are kept detached in `last_router_losses`, and
        `loss` in `last_task_loss`, for `training_step` to log apart. Unchanged without them. The
        balancing loss is added under model.moe_balance=aux_loss only (logged under every kind);
        task.moe_seq_balance x the sequence-wise one under every kind."""
        self.last_router_losses = None
        found = router_losses(self)  # the model's mixture layers and any in modules the task adds
        if found is None:
            return loss
        self.last_router_losses = RouterLosses(*(part.detach() for part in found))
        self.last_task_loss = loss.detach()
        balance = self.task_config.moe_balance if self.model_config.moe_balance == MoEBalance.aux_loss else 0.0
        loss = loss + balance * found.balance + self.task_config.moe_router_z * found.z
        if self.task_config.moe_seq_balance:  # DeepSeek-V3's sequence-wise loss, under any balancing
            loss = loss + self.task_config.moe_seq_balance * found.sequence
        return loss

    def _accuracy(self):
        return MulticlassAccuracy(num_classes=self.model_config.vocab_size, ignore_index=IGNORE, average="micro")

    # -- shared steps ---------------------------------------------------------------------
    def loss(self, logits: torch.Tensor, targets: torch.Tensor, smoothing: float = 0.0) -> torch.Tensor:
        return F.cross_entropy(logits.float(), targets, ignore_index=IGNORE, label_smoothing=smoothing)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor | None:
        loss, n_rows, n_tokens = self.training_loss(batch)
        self.tokens_seen += n_tokens * self.trainer.world_size if self._trainer else n_tokens
        if not self._all_finite(loss):
            self._nonfinite(loss)  # raises, or counts the skip
            return None  # Lightning then skips backward; the optimizer step changes nothing
        parts = getattr(self, "last_loss_parts", None)
        router = getattr(self, "last_router_losses", None)
        if parts is None:
            self.log("train/loss", loss if router is None else self.last_task_loss, prog_bar=True, batch_size=n_rows)
        else:  # train/loss stays the cross-entropy; the z-loss term apart (their sum is optimised)
            self.log("train/loss", parts.cross_entropy, prog_bar=True, batch_size=n_rows)
            if parts.z is not None:
                self.log("train/z_loss", self.task_config.z_loss * parts.z, batch_size=n_rows)
        if router is not None:  # the mixture's auxiliary losses apart, unweighted (1 = uniform load), so
            # that an arm with a coefficient of 0 still shows them
            self.log("train/moe_balance_loss", router.balance, batch_size=n_rows)
            self.log("train/moe_router_z_loss", router.z, batch_size=n_rows)
            if self.task_config.moe_seq_balance:
                self.log("train/moe_seq_balance_loss", router.sequence, batch_size=n_rows)
        self.log("tokens_seen", self.tokens_seen.float(), prog_bar=False)
        return loss

    def _all_finite(self, loss: torch.Tensor) -> bool:
        """Is the loss finite on every rank? (All ranks must take the same branch, or the
        gradient all-reduce of DDP would wait forever for the rank that skipped.)"""
        finite = bool(torch.isfinite(loss.detach()))
        if self._trainer is not None and self.trainer.world_size > 1:
            finite = self.trainer.strategy.reduce_boolean_decision(finite, all=True)
        return finite

    def _nonfinite(self, loss: torch.Tensor) -> None:
        step = self.trainer.global_step if self._trainer is not None else 0
        if self.task_config.on_nonfinite_loss == NonFinitePolicy.skip:
            self.nonfinite_skipped += 1
            self.log("train/nonfinite_skipped", self.nonfinite_skipped.float(), prog_bar=True)
            return
        raise NonFiniteLoss(step, f"loss is {float(loss.detach())}")

    def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
        """The optimizer's step, then what follows it (`after_optimizer_step`)."""
        super().optimizer_step(*args, **kwargs)
        self.after_optimizer_step()

    def after_optimizer_step(self) -> None:
        """What a training step does after the optimizer's step: under model.moe_balance=bias,
        each mixture layer's selection bias updated from the loads of the step's micro-batches,
        summed over the data-parallel ranks (`zoo.nn.moe.balance_experts`). zoo-bench's training
        step calls it too, so that it times the step zoo-train takes."""
        if self.model_config.moe_balance != MoEBalance.bias:
            return
        many = self._trainer is not None and self.trainer.world_size > 1
        balance_experts(self.model, (lambda t: self.trainer.strategy.reduce(t, reduce_op="sum")) if many else None)

    def on_before_optimizer_step(self, optimizer) -> None:
        """A finite loss can still give NaN / inf gradients (overflow in backward). They are
        the same on every rank here (after DDP's all-reduce), so every rank decides alike."""
        if self._trainer is not None and getattr(self.trainer.precision_plugin, "scaler", None) is not None:
            return  # float16 with a gradient scaler: it skips a step with inf gradients and lowers its scale
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if not grads or bool(torch.isfinite(_total_norm(grads))):
            return  # one multi-tensor norm and one host sync per step: all finite
        bad = next(
            (
                name
                for name, p in self.named_parameters()
                if p.grad is not None and not bool(_full(torch.isfinite(p.grad).all()))
            ),
            None,
        )
        if bad is None:
            return  # only the norm overflowed (entries near the float limit): all finite
        step = self.trainer.global_step if self._trainer is not None else 0
        if self.task_config.on_nonfinite_loss == NonFinitePolicy.skip:
            optimizer.zero_grad(set_to_none=True)  # this step changes nothing
            self.nonfinite_skipped += 1
            self.log("train/nonfinite_skipped", self.nonfinite_skipped.float(), prog_bar=True)
            return
        raise NonFiniteLoss(step, f"gradient of {bad} is not finite")

    # -- sharding (trainer=fsdp) ----------------------------------------------------------
    def configure_model(self) -> None:
        """Under zoo's FSDP strategy (Lightning's model-parallel one, which sets a device mesh
        before this hook): shard each layer and the model (`zoo.models.sharding`); a head the
        task adds (a classifier) is a unit of its own. A task built on the meta device
        (`zoo.training.parts.build_task`) then gets storage for this rank's rows only, and its
        first values (`zoo.models.init.materialize`). Any other strategy: nothing to do."""
        mesh = getattr(self, "_device_mesh", None)
        if mesh is None or getattr(self, "_sharded", False):
            return
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        dp_mesh = sharding_mesh(mesh)  # fsdp: every rank; hsdp: (replicate, shard)
        policy = None
        if str(self.trainer.precision) == "bf16-mixed":  # gather in bf16, reduce gradients in float32
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        shard(self.model, dp_mesh, policy, compile=self.task_config.compile)  # compile: each layer
        if self.task_config.compile:
            log.info("task.compile: %d layer(s) compiled, each before it was sharded", len(layers(self.model)))
        heads = [
            (name, child)
            for name, child in self.named_children()
            if child is not self.model and any(True for _ in child.parameters())
        ]
        for _, child in heads:
            fully_shard(child, mesh=dp_mesh, mp_policy=policy or MixedPrecisionPolicy())  # its default: none
        if has_meta_parameters(self):
            self._materialize(heads)
        self._sharded = True

    def decoding_stop(self):
        """For `generate(stop=...)`: under a sharded model every rank decodes as many steps as
        the others (each step is a collective), so decoding ends when every rank's rows have
        ended (one all-reduce per step); None (each row's own end) otherwise."""
        if not getattr(self, "_sharded", False) or self.trainer.world_size < 2:
            return None

        def every_rank_done(done: torch.Tensor) -> bool:
            flag = done.all().to(torch.int32)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MIN)
            return bool(flag)

        return every_rank_done

    def head_rules(self) -> dict:
        """{name: `zoo.models.init.Init`} of the parameters the task adds beside the model."""
        return {}

    def _materialize(self, heads: list) -> None:
        """This rank's rows of every parameter, with the values an unsharded build of the same
        seed has: every rank draws each parameter whole from rank 0's seed and keeps its rows."""
        device = self.trainer.strategy.root_device
        seed = torch.tensor([self.model.init_seed], dtype=torch.long, device=device)
        torch.distributed.broadcast(seed, src=0)  # ranks whose global generators differ agree
        self.model.init_seed = int(seed)
        materialize(self.model, device, self.model.init_rules(), self.model.init_seed)
        for name, child in heads:
            materialize(child, device, self.head_rules(), self.model.init_seed, prefix=f"{name}.")
        held = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel() for p in self.parameters())
        total = sum(p.numel() for p in self.parameters())
        log.info(
            "trainer=fsdp: the model was built on the meta device; rank %d holds %s of its %s parameters; "
            "host memory peak so far %.2f GiB",
            self.global_rank,
            f"{held:,}",
            f"{total:,}",
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        )  # KiB on Linux

    def on_fit_start(self) -> None:
        """task.tf32 on CUDA: float32 matmuls on TF32 tensor cores (what GPU trainers run; bf16
        autocast is unaffected). The setting is the process's, as torch keeps it."""
        if self.task_config.tf32 and self.device.type == "cuda":
            torch.set_float32_matmul_precision("high")

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        logits, targets, _ = self.forward_batch(batch)
        if is_filler(batch):  # a sharded model's extra forward (`zoo.data.even_batches`): counted nowhere
            return
        n = (targets != IGNORE).sum()
        if n == 0:
            return
        bytes_of = self.target_bytes()
        if bytes_of is None or self.val_bpb is None:  # (target_bytes is None without val_bpb)
            self.val_loss.update(self.loss(logits, targets), weight=n)
        else:  # the loss of each target: their mean for val/loss, their sum per byte for val/bpb
            losses = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE, reduction="none")  # (N,)
            self.val_loss.update(losses.sum() / n, weight=n)
            self.val_bpb.update(losses, bytes_of(targets, self.preceding_ids(batch)))
        self.val_accuracy.update(logits, targets)

    def target_bytes(self) -> TargetBytes | None:
        """The bytes of text per target, on this module's device, for a task that measures bits
        per byte and holds its tokenizer; None otherwise. Made once per tokenizer and device
        (validation only: nothing is added to the training step)."""
        if self.val_bpb is None or self.tokenizer is None:
            return None
        made = self._target_bytes
        if made is None or made[0] is not self.tokenizer or made[1] != self.device:
            table = TargetBytes(TextBytes.of(self.tokenizer), self.model_config.vocab_size, self.device)
            made = self._target_bytes = (self.tokenizer, self.device, table)
        return made[2]

    def counted_anywhere(self, weight: torch.Tensor) -> bool:
        """Did any rank count something (a metric's local weight)? The metrics reduce over the
        ranks when computed, so every rank must decide alike whether to compute them: a rank
        whose share was empty (or only filler batches) still joins."""
        if self._trainer is not None and self.trainer.world_size > 1:
            weight = self.trainer.strategy.reduce(weight.detach().clone().float(), reduce_op="sum")
        return bool(weight > 0)

    def on_validation_epoch_end(self) -> None:
        if not self.counted_anywhere(self.val_loss.weight):
            return
        loss = self.val_loss.compute()  # the metrics reduce themselves over ranks: the same everywhere
        self.log_everywhere("val/loss", loss, prog_bar=True)
        self.log_everywhere("val/ppl", torch.exp(loss.clamp(max=50)), prog_bar=True)
        self.log_everywhere("val/accuracy", self.val_accuracy.compute())
        if self.val_bpb is not None and self.target_bytes() is not None:  # the same on every rank: all compute
            self.log_everywhere("val/bpb", self.val_bpb.compute())
            self.val_bpb.reset()
        self.val_loss.reset()
        self.val_accuracy.reset()

    def log_everywhere(self, name: str, value, **kwargs) -> None:
        """Log an epoch-level value that is already the same on every rank (a torchmetrics
        result): `max` over ranks returns it unchanged, bit for bit, and tells Lightning the
        value is synchronised (no warning per metric)."""
        self.log(name, value, sync_dist=True, reduce_fx="max", **kwargs)

    # -- optimization -----------------------------------------------------------------------
    def configure_optimizers(self) -> Any:
        head = self.model.lm_head.weight if self.model.lm_head is not None else None
        scales = optimizer_scales(self.model, self.model_config)  # μP's hidden matrices; none under standard
        trainer = self.trainer if self._trainer else None
        clips_amp = (
            trainer is not None and (trainer.gradient_clip_val or 0) > 0 and str(trainer.precision).endswith("-mixed")
        )
        optimizer = build_optimizer(
            self, self.optim_config, output_embedding=head, scales=scales, clips_in_mixed_precision=clips_amp
        )
        total = self.trainer.max_steps if self._trainer and self.trainer.max_steps > 0 else None
        lr_lambda = schedule(self.scheduler_config, total_steps=total, d_model=self.model_config.base_d_model)
        lr_lambda = ramped_lr(lr_lambda, self.extras.data)  # data.batch_warmup_lr: the rate during a batch ramp
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # -- checkpoint data ------------------------------------------------------------------
    @staticmethod
    def upgrade_state_dict(state_dict: dict) -> dict:
        """Fill in buffers that checkpoints of earlier versions do not have."""
        state_dict.setdefault("nonfinite_skipped", torch.zeros((), dtype=torch.long))
        return state_dict

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "state_dict" in checkpoint:  # a sharded checkpoint's weights went straight into the shards
            self.upgrade_state_dict(checkpoint["state_dict"])

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.tokenizer is not None:
            checkpoint["zoo_tokenizer"] = tokenizer_state(self.tokenizer)
