"""Typed schema of a run's task (`TaskConfig`): the training objective and how its loss is
computed. The objectives themselves are rows of `zoo.config.facts.tasks`. No torch import."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.mtp import check_mtp_task
from zoo.config.facts.tasks import TaskKind, Tokenize, task_names
from zoo.config.schema.frozen import settle


class Pooling(Choice):
    """How a classifier reads one vector from the encoder states."""

    cls = "cls"  # the first position ([CLS], Devlin et al. 2019)
    mean = "mean"  # the mean over real tokens
    last = "last"  # the last real token (for causal models)


class OutputLoss(Choice):
    """How token-level tasks compute the loss of the output head in training."""

    auto = "auto"  # chunked on the CPU, logits on an accelerator (fewer kernel launches there)
    logits = "logits"  # materialise the (N, V) logits, then softmax cross-entropy
    chunked = "chunked"  # projection + cross-entropy in chunks of rows, logits never whole
    liger = "liger"  # Liger-Kernel's fused linear cross-entropy (Triton, CUDA only; pip install '.[liger]')


class NonFinitePolicy(Choice):
    """What a training step does when its loss is NaN or infinite."""

    stop = "stop"  # end the run with an error naming the step; checkpoints already written stay
    skip = "skip"  # leave the weights as they are for this step and go on (counted in metrics)


@dataclass(kw_only=True, frozen=True)
class TaskConfig:
    kind: TaskKind = field(default=TaskKind.causal_lm, metadata={"help": "training objective"})
    label_smoothing: float = field(
        default=0.0, metadata={"help": "cross-entropy label smoothing (Szegedy et al. 2016)"}
    )
    pooling: Pooling | None = field(
        default=None,
        metadata={"help": "classification: cls, mean or last; default cls for encoders, last for decoders"},
    )
    generate_max_tokens: int = field(
        default=32, metadata={"help": "seq2seq: longest greedy output when validation scores BLEU"}
    )
    on_nonfinite_loss: NonFinitePolicy = field(
        default=NonFinitePolicy.stop,
        metadata={
            "help": "stop: end the run naming the step; skip: no update for that step, "
            "counted as train/nonfinite_skipped"
        },
    )
    output_loss: OutputLoss = field(
        default=OutputLoss.auto,
        metadata={
            "help": "token tasks in training: chunked (projection + cross-entropy per "
            "chunk of rows, less memory, faster on the CPU), logits (the whole (N, V) "
            "tensor, fewer kernel launches), liger (Liger-Kernel's fused Triton kernel, "
            "CUDA only, optional extra) or auto (chunked on the CPU, logits elsewhere)"
        },
    )
    loss_chunk: int = field(default=1024, metadata={"help": "output_loss=chunked: rows of logits alive at a time"})
    z_loss: float = field(
        default=0.0,
        metadata={
            "help": "token tasks: add z_loss x the mean over target tokens of log(Z)^2, Z the softmax "
            "normaliser of the output logits (PaLM: 1e-4), to the training loss; logged apart as "
            "train/z_loss (train/loss stays the cross-entropy); 0 = off"
        },
    )
    moe_balance: float = field(
        default=0.01,
        metadata={
            "help": "model.ffn=moe: add moe_balance x the load-balancing loss E·Σ_i f_i·P_i (Switch: f_i "
            "the share of routed slots, P_i the mean router probability of expert i; 1 when uniform), "
            "the mean over mixture layers, to the training loss; the loss (unweighted) logged apart as "
            "train/moe_balance_loss (train/loss stays the task's); 0 = off"
        },
    )
    moe_router_z: float = field(
        default=0.001,
        metadata={
            "help": "model.ffn=moe: add moe_router_z x the router z-loss, mean over tokens of "
            "logsumexp(router logits)² (ST-MoE), the mean over mixture layers, to the training loss; "
            "the loss (unweighted) logged apart as train/moe_router_z_loss; 0 = off"
        },
    )
    moe_seq_balance: float = field(
        default=0.0,
        metadata={
            "help": "model.ffn=moe: add moe_seq_balance x DeepSeek-V3's sequence-wise balancing loss (its "
            "eq. 17-20: the load-balancing loss within each sequence, the mean over sequences and "
            "mixture layers; DeepSeek-V3 keeps a tiny one, 0.0001, beside model.moe_balance=bias), "
            "under every model.moe_balance; logged apart as train/moe_seq_balance_loss; 0 = off"
        },
    )
    tf32: bool = field(
        default=True,
        metadata={
            "help": "on CUDA, float32 matmuls on TF32 tensor cores "
            "(torch.set_float32_matmul_precision('high')); nothing elsewhere"
        },
    )
    compile: bool = field(
        default=False,
        metadata={
            "help": "torch.compile the model, and for token tasks the whole training loss "
            "(stack, output head and loss in one graph; under trainer=fsdp each layer, "
            "compiled before it is sharded); first steps slower while it compiles; on CPU "
            "needs a C++ compiler"
        },
    )

    # multi-token prediction (DeepSeek-V3 §2.2; zoo.config.facts.mtp)
    mtp_depth: int = field(
        default=0,
        metadata={
            "help": "causal_lm: D sequential multi-token prediction modules, module k predicting the "
            "token k+1 places ahead (DeepSeek-V3); each depth's loss logged as train/mtp_loss_k; "
            "zoo-generate speculative=true drafts with them; 0 = off"
        },
    )
    mtp_weight: float = field(
        default=0.3,
        metadata={"help": "task.mtp_depth > 0: λ, the loss is L + (λ/D)·Σ_k L_k (DeepSeek-V3: 0.3, then 0.1)"},
    )

    def __post_init__(self) -> None:
        settle(self, "kind", TaskKind.parse(self.kind, "task.kind"))
        settle(self, "output_loss", OutputLoss.parse(self.output_loss, "task.output_loss"))
        if not isinstance(self.loss_chunk, int) or isinstance(self.loss_chunk, bool) or self.loss_chunk < 1:
            raise ConfigError(f"task.loss_chunk must be a positive integer, got {self.loss_chunk!r}")
        settle(self, "on_nonfinite_loss", NonFinitePolicy.parse(self.on_nonfinite_loss, "task.on_nonfinite_loss"))
        if self.pooling is not None:
            settle(self, "pooling", Pooling.parse(self.pooling, "task.pooling"))
            if self.kind != TaskKind.classification:
                raise ConfigError(f"task.pooling only applies to task=classification, not {self.kind.value}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"task.label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if (
            isinstance(self.z_loss, bool)
            or not isinstance(self.z_loss, (int, float))
            or not 0.0 <= self.z_loss < float("inf")
        ):
            raise ConfigError(f"task.z_loss must be a number >= 0 (0 = off), got {self.z_loss!r}")
        settle(self, "z_loss", float(self.z_loss))
        if self.z_loss and self.kind == TaskKind.classification:
            raise ConfigError(
                "task.z_loss applies to the output logits over the vocabulary of token tasks "
                f"({task_names(lambda spec: spec.tokenize != Tokenize.labelled, 'and')}), "
                f"not to task={TaskKind.classification.value}'s class logits"
            )
        if self.z_loss and self.output_loss == OutputLoss.liger:
            raise ConfigError("task.z_loss is not computed by task.output_loss=liger; use auto, logits or chunked")
        for name in ("moe_balance", "moe_router_z", "moe_seq_balance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < float("inf"):
                raise ConfigError(f"task.{name} must be a number >= 0 (0 = off), got {value!r}")
            settle(self, name, float(value))
        if self.generate_max_tokens < 1:
            raise ConfigError(f"task.generate_max_tokens must be >= 1, got {self.generate_max_tokens}")
        check_mtp_task(self)
        settle(self, "mtp_weight", float(self.mtp_weight))


def task_defaults() -> dict:
    """TaskConfig's keys that have a fixed default, as plain data: a key added since a checkpoint
    was written (e.g. task.moe_balance) ran at its default."""
    return {
        f.name: (f.default.value if isinstance(f.default, Choice) else f.default)
        for f in fields(TaskConfig)
        if f.default is not MISSING
    }
