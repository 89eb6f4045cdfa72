"""The bytes of text each validation target stands for, looked up on the device: the
denominator of val/bpb (`zoo.tasks.metrics.BitsPerByte`)."""

from __future__ import annotations

import torch

from zoo.data.tokenizers.text_bytes import TextBytes
from zoo.nn.chunked_loss import IGNORE


class TargetBytes:
    """A tokenizer's `TextBytes` as tensors on `device`, padded with zeros to `size` ids (the
    model's vocabulary, which may exceed the tokenizer's)."""

    def __init__(self, text_bytes: TextBytes, size: int, device: torch.device) -> None:
        def table(values) -> torch.Tensor:
            out = torch.zeros(max(size, text_bytes.vocab_size), dtype=torch.long)
            out[: len(values)] = torch.as_tensor(values, dtype=torch.long)
            return out.to(device)

        self.lengths = table(text_bytes.lengths)  # (V,)
        self.leading = table(text_bytes.leading)  # (V,)
        boundary = [0] * text_bytes.vocab_size
        for i in text_bytes.boundaries:
            boundary[i] = 1
        self.boundary = table(boundary)  # (V,) 1 at bos, eos
        self.device = torch.device(device)

    def __call__(self, targets: torch.Tensor, preceding: torch.Tensor) -> torch.Tensor:
        """targets (N,) with IGNORE rows, preceding (N,) the id read at each target's position
        (the one before it in the text) -> (N,) bytes of text per target, 0 at IGNORE rows. A
        target that begins a document (after bos or eos) does not stand for the space a
        tokenizer puts before a document's first word."""
        ids = targets.clamp(min=0)  # (N,)
        before = preceding.clamp(min=0)  # (N,)
        count = self.lengths[ids] - self.leading[ids] * self.boundary[before]  # (N,)
        return torch.where(targets != IGNORE, count, torch.zeros_like(count))
