"""Multi-token prediction modules in an exported Hugging Face directory (`zoo-export mtp=keep`).

transformers has no forward of DeepSeek-V3's modules (its DeepSeek-V3 model drops them when it
loads), so they are kept beside the model's weights, not inside them: `mtp.safetensors` holds
each module's tensors under zoo's names (`mtp.layers.{k-1}.norm_h.weight`, ..., the names of a
zoo checkpoint's state dict), and the exported config records their number as DeepSeek-V3's
config names it, `num_nextn_predict_layers`. `AutoModelForCausalLM.from_pretrained` reads the
model as before and leaves the file alone; `load_mtp` reads it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.models.mtp import MultiTokenPrediction

MTP_FILE = "mtp.safetensors"
PREFIX = "mtp."


def keep_mtp(mtp: MultiTokenPrediction, hf: Any, out: Path) -> int:
    """Write the modules' tensors to out/mtp.safetensors and their depth into `hf`'s config (save
    it afterwards); the number of tensors written."""
    from safetensors.torch import save_file

    tensors = {f"{PREFIX}{name}": t.detach().contiguous().cpu() for name, t in mtp.state_dict().items()}
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / MTP_FILE), metadata={"format": "pt", "num_nextn_predict_layers": str(mtp.depth)})
    hf.config.num_nextn_predict_layers = mtp.depth
    return len(tensors)


def load_mtp(directory: Path, into: MultiTokenPrediction) -> None:
    """Load out/mtp.safetensors into modules of the same depth and config (strict)."""
    from safetensors.torch import load_file

    tensors = load_file(str(Path(directory) / MTP_FILE))
    into.load_state_dict({name[len(PREFIX) :]: t for name, t in tensors.items()}, strict=True)


def has_mtp(directory: Path) -> bool:
    return (Path(directory) / MTP_FILE).is_file()


__all__ = ["MTP_FILE", "has_mtp", "keep_mtp", "load_mtp"]
