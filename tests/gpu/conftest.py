"""Helpers of the GPU suite (`pytest -m gpu`): the device, inputs built on the CPU and moved
there (so a test sees the same numbers whatever the device), bf16 tolerances, a tiny task on the
device and a guard against host syncs, and what the profiler saw of
`scaled_dot_product_attention`."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from tests.conftest import tiny
from zoo.config.facts.tasks import task_of_family
from zoo.config.schema.model import Family
from zoo.data.collate.padding import without_full_masks
from zoo.tasks import TASKS

DEVICE = torch.device("cuda")

# bf16 keeps 8 significant bits (relative rounding 2^-8 ≈ 4e-3 per operation); two bf16 runs of
# the same model that differ only in kernels and reduction order stay within this fraction of
# the logits' scale
BF16_TOL = 2e-2
FP32_TOL = 1e-4

# -- inputs -------------------------------------------------------------------------------------


def token_batch(family: str, *, B: int = 3, T: int = 12, V: int = 37) -> dict:
    """Model inputs and targets on the CPU: input_ids (B, T) with the last 3 positions of row 0
    padded, attention_mask (B, T), labels (B, T) (-100 on pads; every third position only for
    an encoder, as masked-LM targets are a subset); an encoder-decoder also gets
    decoder_input_ids (B, T) and decoder_attention_mask (B, T) with row 0's last 2 padded, and
    its labels follow the decoder side."""
    ids = torch.randint(4, V, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, -3:] = 0
    batch = {"input_ids": ids.masked_fill(mask == 0, 0), "attention_mask": mask}
    target_mask = mask
    if family == "encoder_decoder":
        dec_mask = torch.ones(B, T, dtype=torch.long)
        dec_mask[0, -2:] = 0
        batch["decoder_input_ids"] = torch.randint(4, V, (B, T)).masked_fill(dec_mask == 0, 0)
        batch["decoder_attention_mask"] = target_mask = dec_mask
    labels = torch.randint(0, V, (B, T)).masked_fill(target_mask == 0, -100)
    if family == "encoder_only":
        labels[:, torch.arange(T) % 3 != 0] = -100
    batch["labels"] = labels
    return batch


def unpadded(batch: dict) -> dict:
    """The same batch without padding: masks dropped, pad ids replaced by tokens."""
    out = {k: v for k, v in batch.items() if not k.endswith("attention_mask")}
    out["input_ids"] = out["input_ids"].clamp(min=4)
    if "decoder_input_ids" in out:
        out["decoder_input_ids"] = out["decoder_input_ids"].clamp(min=4)
    return out


def on(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def prompts(family: str, *, B: int = 3, S: int = 6, V: int = 37) -> tuple[torch.Tensor, torch.Tensor]:
    """Generation inputs on the CPU: (B, S) ids and mask; decoder-only prompts are left-padded
    (row 1 by 2), encoder sources right-padded (row 1 by 2), as `zoo.data.prompts` pads them."""
    ids = torch.randint(6, V, (B, S))
    mask = torch.ones(B, S, dtype=torch.long)
    if family == "decoder_only":
        mask[1, :2] = 0
    else:
        mask[1, -2:] = 0
    return ids.masked_fill(mask == 0, 0), mask


# -- a training task on the device --------------------------------------------------------------

TASK_OF = {family.value: task_of_family(family).value for family in Family}  # each family's default task


def tiny_task(family: str, position: str, kinds: dict | None = None, **task):
    """The family's default task over a tiny model (d_model 64, 2 heads; `kinds`: other model
    keys, as `tiny` takes them), seeded, on the device; `task`: task config fields."""
    torch.manual_seed(0)
    model = tiny(family, position, d_model=64, n_heads=2, vocab_size=37, **(kinds or {}))
    return TASKS[TASK_OF[family]](model=model, task={"kind": TASK_OF[family], **task}).to(DEVICE)


def fed_batch(family: str) -> dict:
    """A batch as zoo-train hands it over: prepared on the CPU, then moved."""
    return on(without_full_masks(token_batch(family)), DEVICE)


@contextlib.contextmanager
def no_waits():
    """Inside, any call that makes the host wait for the GPU raises (after the queue is drained)."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


# -- comparisons --------------------------------------------------------------------------------


def relative_diff(a: torch.Tensor, ref: torch.Tensor) -> float:
    """max |a - ref| / max |ref|: a difference relative to the tensor's scale."""
    a, ref = a.detach().float().cpu(), ref.detach().float().cpu()
    return float((a - ref).abs().max() / ref.abs().max().clamp(min=1e-12))


def decisive(logits: torch.Tensor, tol: float) -> torch.Tensor:
    """(..., V) -> (...) bool: the top-2 margin exceeds 2·tol·scale. Logits that may each move
    by tol·scale can swap their argmax only where the gap is below twice that."""
    top2 = logits.detach().float().topk(2, dim=-1).values  # (..., 2)
    scale = logits.detach().float().abs().max()
    return (top2[..., 0] - top2[..., 1]) > 2 * tol * scale


def agree_until_close_call(a: torch.Tensor, b: torch.Tensor, sure: torch.Tensor) -> list[int]:
    """Greedy outputs a, b (B, N) of two runs; sure (B, N): the decisive steps, from either run's
    teacher-forced logits. Up to a row's first differing step both runs saw the same context, so
    that step must be a close call (after it the runs may legitimately diverge). Returns the
    steps compared per row."""
    a, b, sure = a.cpu(), b.cpu(), sure.cpu()
    compared = []
    for row in range(a.shape[0]):
        differ = (a[row] != b[row]).nonzero()
        n = int(differ[0]) if len(differ) else a.shape[1]
        assert n == a.shape[1] or not sure[row, n], (
            f"row {row}: the runs pick different tokens at step {n}, where the choice is not close:\n"
            f"{a[row].tolist()}\n{b[row].tolist()}"
        )
        compared.append(n)
    return compared


# -- what scaled_dot_product_attention ran ------------------------------------------------------

# Substrings (lower case) of the CUDA kernels of SDPA's fused backends, as the profiler names them:
# - FlashAttention-2 (`_scaled_dot_product_flash_attention`): "pytorch_flash::flash_fwd_kernel<...>",
#   "flash_fwd_splitkv_kernel" (decoding), backward "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
#   "flash_bwd_dot_do_o_kernel", "flash_bwd_convert_dq_kernel";
# - memory-efficient (xFormers' CUTLASS kernels, `_scaled_dot_product_efficient_attention`):
#   "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>)",
#   backward "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(...)" (sm80 kernels also run on sm90);
# - cuDNN (`_scaled_dot_product_cudnn_attention`): "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_...",
#   "..._flash_bprop_..." (cuDNN 9 frontend).
# The math fallback (`_scaled_dot_product_attention_math`) has no kernel of its own: its batched
# matmuls are cuBLAS GEMMs ("sm90_xmma_gemm_...", "nvjet_...", "ampere_bf16_s16816gemm_...") that
# cannot be told from the projections' by name, plus softmax kernels ("softmax_warp_forward",
# "cunn_SoftMaxForward", "softmax_warp_backward"). So it is recognised by its ATen ops (the math
# op itself, aten::bmm, aten::_softmax) and by softmax kernels: no model forward here runs a
# softmax outside attention.
FUSED_KERNEL_MARKS = ("flash", "fmha", "efficient", "cudnn")
MATH_OP_MARKS = (
    "_scaled_dot_product_attention_math",
    "aten::_softmax",
    "aten::softmax",
    "aten::bmm",
    "aten::_softmax_backward_data",
)

_BACKENDS = (  # (marks in a kernel or op name, backend), first match wins
    (("cudnn",), "cuDNN"),
    (("fmha", "efficient"), "memory-efficient"),
    (("flash",), "flash"),
)


def _is_fused(name: str) -> bool:
    return any(mark in name.lower() for mark in FUSED_KERNEL_MARKS)


def _backend(name: str) -> str:
    low = name.lower()
    return next((label for marks, label in _BACKENDS if any(m in low for m in marks)), "?")


@dataclass
class SdpaSeen:
    """Names of the device kernels and host-side ops one profiled run executed."""

    kernels: list[str]
    ops: list[str]

    @classmethod
    def of(cls, events) -> SdpaSeen:
        kernels, ops = set(), set()
        for e in events:
            # kernels are their own events (device_type CUDA) in Kineto profiles; older
            # profilers attached them to the launching op instead
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                kernels.add(e.name)
            else:
                ops.add(e.name)
            kernels.update(k.name for k in getattr(e, "kernels", None) or [])
        return cls(sorted(kernels), sorted(ops))

    @property
    def fused_kernels(self) -> list[str]:
        return [k for k in self.kernels if _is_fused(k)]

    @property
    def sdpa_ops(self) -> list[str]:
        return [op for op in self.ops if "scaled_dot_product" in op or "attention" in op.lower()]

    @property
    def math_evidence(self) -> list[str]:
        """The math fallback's traces: its ATen ops (the math op, bmm, softmax) and softmax
        kernels (a fused kernel's name never counts)."""
        ops = [op for op in self.ops if any(m in op for m in MATH_OP_MARKS)]
        kernels = [k for k in self.kernels if "softmax" in k.lower() and not _is_fused(k)]
        return ops + kernels

    @property
    def backends(self) -> list[str]:
        """The fused backends seen, from kernel names (ops when there are no kernels)."""
        names = self.fused_kernels or [op for op in self.sdpa_ops if _is_fused(op)]
        return sorted({_backend(n) for n in names})

    def describe(self) -> str:
        short = lambda names: [n if len(n) < 120 else n[:117] + "..." for n in names]  # noqa: E731
        return (
            f"backends seen: {self.backends or ['none fused']}"
            f"{' + math fallback' if self.math_evidence else ''}\n"
            f"  SDPA ops: {self.sdpa_ops}\n  fused kernels: {short(self.fused_kernels)}\n"
            f"  math traces: {short(self.math_evidence)}\n  ({len(self.kernels)} kernels in all)"
        )


def profile_run(fn, device: torch.device = DEVICE) -> SdpaSeen:
    """Run `fn` once to warm up (lazy initialisation, cuBLAS / cuDNN handles), then once under
    the profiler, host ops and device kernels both."""
    fn()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
    return SdpaSeen.of(prof.events())


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def exact_fp32():
    """float32 matmuls in full precision (no TF32) for one test, whatever an earlier test or a
    library set."""
    precision = torch.get_float32_matmul_precision()
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
