"""When may a module read a tensor's values on the host (`int(x.max())`, `bool(mask.all())`)?

On the CPU that is free. On an accelerator it is a host sync: the CPU waits for the device to
drain its queue, and the device then idles while the CPU issues the next kernels. Under
torch.compile it is a graph break. So value checks and value-dependent shortcuts run on the
CPU in eager mode only; elsewhere the data path has checked the values already (token ids
against the vocabulary, positions against the context) and the general path runs."""

from __future__ import annotations

import torch


def host_reads_are_free(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and not torch.compiler.is_compiling()
