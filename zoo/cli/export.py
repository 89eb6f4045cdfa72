"""`zoo-export`: a trained zoo checkpoint as a Hugging Face `transformers` directory.

    zoo-export ckpt=runs/.../checkpoints/last.ckpt format=hf out=exported/

Works when the checkpoint's composition matches a family `zoo.interop.hf` supports (Llama,
GPT-2, BERT, T5, BART); the directory loads with the matching `AutoModelFor...` class
(`AutoModelForCausalLM`, `AutoModelForMaskedLM`, `AutoModelForSeq2SeqLM`). A model fine-tuned
with `init_from=hf:DIR` (tokenizer=hf) gets its transformers tokenizer files beside the
weights; zoo's own tokenizers are saved in `out/zoo_tokenizer/` (they are not transformers
tokenizers). An existing non-empty `out` is refused, so nothing written before is lost. A
checkpoint trained with task.mtp_depth exports its model; its multi-token prediction modules are
dropped (mtp=drop, the default) or kept beside it in `out/mtp.safetensors` (mtp=keep,
`zoo.interop.hf.mtp`): transformers runs no forward of them.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path

TOOL = "zoo-export"
USAGE = f"{TOOL} ckpt=PATH out=DIR [format=hf] [mtp=drop|keep]"
FORMATS = ("hf",)
MTP_CHOICES = ("drop", "keep")


@dataclass(kw_only=True)
class ExportArgs:
    ckpt: str | None = field(default=None, metadata={"help": "the zoo checkpoint to export (required)"})
    format: str = field(default="hf", metadata={"help": "hf: a Hugging Face transformers directory (save_pretrained)"})
    out: str | None = field(default=None, metadata={"help": "the directory to write; new or empty (required)"})
    mtp: str = field(
        default="drop",
        metadata={
            "help": "a checkpoint trained with task.mtp_depth: drop its multi-token prediction modules, "
            "or keep them beside the model in out/mtp.safetensors (transformers runs no forward of them)"
        },
    )
    weights: str = field(
        default="raw",
        metadata={"help": "raw (the optimizer's weights) or ema (the average a run with optim.ema saved beside them)"},
    )


def run(argv: list[str]) -> dict:
    """Every argument, the output directory and the checkpoint's path are checked before torch
    loads."""
    from zoo.cli.args import parse
    from zoo.cli.outputs import check_out_dir
    from zoo.config.errors import ConfigError
    from zoo.config.records.rundir import locate_checkpoint

    args, _ = parse(ExportArgs, argv)
    if args.ckpt is None or args.out is None:
        raise ConfigError("ckpt=PATH and out=DIR are required")
    if args.mtp not in MTP_CHOICES:
        raise ConfigError(f"mtp={args.mtp!r} is not allowed; choose one of: {', '.join(MTP_CHOICES)}")
    if args.format not in FORMATS:
        raise ConfigError(f"format={args.format!r} is not allowed; choose one of: {', '.join(FORMATS)}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out={out} is a file; give a new or empty directory")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"out={out} exists and is not empty; choose a new directory")
    check_out_dir("out", args.out, "exported/")
    if importlib.util.find_spec("transformers") is None:  # the converters import it lazily
        raise ConfigError("format=hf needs transformers: pip install '.[hf]' in zoo's source directory")
    from zoo.config.facts.ema import Weights

    Weights.parse(args.weights, "weights")
    ckpt = locate_checkpoint(args.ckpt)
    from zoo.interop.hf import UnsupportedConfig, to_hf
    from zoo.training.checkpoint.averaging import load_weights

    task, _ = load_weights(ckpt, args.weights)
    try:
        hf = to_hf(task.model)
    except UnsupportedConfig as exc:
        raise ConfigError(f"{args.ckpt}: {exc}") from None
    if task.tokenizer is not None:
        _special_ids(hf, task.tokenizer)
    mtp = getattr(task, "mtp", None)
    if args.mtp == "keep" and mtp is None:
        raise ConfigError(f"mtp=keep: {args.ckpt} has no multi-token prediction modules (task.mtp_depth=0)")
    kept = {}
    if mtp is not None:
        from zoo.interop.hf.mtp import MTP_FILE, keep_mtp

        if args.mtp == "keep":
            kept = {"mtp": f"kept: {keep_mtp(mtp, hf, out)} tensors of {mtp.depth} module(s) in {MTP_FILE}"}
        else:
            kept = {"mtp": f"dropped: {mtp.depth} module(s) (mtp=keep keeps them)"}
    hf.save_pretrained(out)
    if task.tokenizer is not None and getattr(task.tokenizer, "kind", "") == "hf":
        task.tokenizer.hf_tokenizer.save_pretrained(str(out))  # AutoTokenizer.from_pretrained(out)
    elif task.tokenizer is not None:
        task.tokenizer.save(out / "zoo_tokenizer")
    return {
        "checkpoint": str(args.ckpt),
        "format": args.format,
        "out": str(out),
        "architecture": type(hf).__name__,
        **kept,
    }


def _special_ids(hf, tokenizer) -> None:
    """The tokenizer's bos / eos / pad ids in the exported config and generation config, so that
    transformers' generate stops at eos and pads as zoo did; an encoder-decoder trained with zoo's
    own tokenizer starts decoding from bos, as zoo's collator does."""
    ids = tokenizer.special_ids()
    configs = [hf.config] + ([hf.generation_config] if getattr(hf, "generation_config", None) is not None else [])
    for config in configs:
        for name in ("bos", "eos", "pad"):
            if ids[name] is not None:
                setattr(config, f"{name}_token_id", ids[name])
        if getattr(hf.config, "is_encoder_decoder", False) and getattr(tokenizer, "kind", "") != "hf":
            config.decoder_start_token_id = ids["bos"]


def usage() -> str:
    from zoo.cli.tool import Section, help_text

    return help_text(USAGE, __doc__, [Section("options", ExportArgs)])


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.tool import serve

    serve(TOOL, lambda args: print(json.dumps(run(args), indent=2)), usage, argv)


if __name__ == "__main__":
    main()
