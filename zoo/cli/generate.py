"""`zoo-generate`: continue prompts (decoder-only) or translate sources (encoder-decoder) with
a trained checkpoint.

    zoo-generate ckpt=runs/.../checkpoints/last.ckpt prompt="And God said"
    zoo-generate ckpt=... prompts=prompts.txt strategy=beam num_beams=4
    zoo-generate ckpt=... prompt="..." strategy=sample temperature=0.8 top_p=0.9 seed=1
    zoo-generate ckpt=... prompt="..." attention_map=attn.png layers=0 heads=0,1 positions_plot=pos.png
    zoo-generate ckpt=... prompts=prompts.txt device=cuda dtype=bfloat16 static_cache=true compile=true
    zoo-generate ckpt=... prompt="..." model.position.scaling=yarn model.position.scale=4  # RoPE past its length
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TextIO

from zoo.config.facts.tasks import task_names
from zoo.config.schema.generation import GenerationConfig

TOOL = "zoo-generate"
PASSTHROUGH = ("model.",)  # model.position.* of RoPE's scaling rule
USAGE = f"{TOOL} ckpt=PATH (prompt=TEXT | prompts=FILE) [KEY=VALUE ...] [model.position.KEY=VALUE ...]"

GENERATING = task_names(lambda spec: spec.generates)  # the tasks whose runs zoo-generate reads


@dataclass(kw_only=True)
class GenerateArgs(GenerationConfig):
    """The decoding options (strategy, max_new_tokens, beam and sampling options, ...) are
    GenerationConfig's own; these are the command's: what to read, where to run, what to draw."""

    ckpt: str | None = field(default=None, metadata={"help": f"a checkpoint of a {GENERATING} run (required)"})
    weights: str = field(
        default="raw",
        metadata={"help": "raw (the optimizer's weights) or ema (the average a run with optim.ema saved beside them)"},
    )
    prompt: str | None = field(default=None, metadata={"help": "one prompt (the source sentence for seq2seq)"})
    prompts: str | None = field(default=None, metadata={"help": "a UTF-8 text file, one prompt per line"})
    batch_size: int = field(default=16, metadata={"help": "prompts decoded together"})
    device: str = field(default="auto", metadata={"help": "cpu, cuda, or auto: cuda where torch sees a CUDA device"})
    dtype: str = field(
        default="float32", metadata={"help": "float32 or bfloat16: the weights are cast once, not at every step"}
    )
    attention_map: str | None = field(
        default=None, metadata={"help": "a .png file: attention weights over the first prompt and its output"}
    )
    layers: str | None = field(
        default=None, metadata={"help": "attention_map: layers to draw, e.g. 0,1 (default: all)"}
    )
    heads: str | None = field(default=None, metadata={"help": "attention_map: heads to draw, e.g. 0 (default: all)"})
    positions_plot: str | None = field(default=None, metadata={"help": "a .png file: the model's position scheme"})
    stream: bool = field(
        default=True,
        metadata={
            "help": "write a prompt decoded alone (one prompt, or "
            "batch_size=1) as its tokens come; beam's output is known "
            "only at its end"
        },
    )
    progress: bool | None = field(
        default=None,
        metadata={
            "help": "a progress line on stderr: steps "
            "and tokens/s (default: when stderr is a "
            "terminal and nothing streams)"
        },
    )


def read_prompts(args: GenerateArgs) -> list[str]:
    from zoo.cli.args import not_a_file
    from zoo.config.errors import ConfigError

    if (args.prompt is None) == (args.prompts is None):
        raise ConfigError("give exactly one of prompt=TEXT or prompts=FILE")
    if args.prompt is not None:
        texts = [args.prompt]
    else:
        assert args.prompts is not None  # exactly one of the two is given (checked above)
        path = Path(args.prompts)
        if not path.is_file():
            raise ConfigError(f"prompts={args.prompts}: {not_a_file(path)}; give a text file of one prompt a line")
        try:
            texts = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except UnicodeDecodeError as exc:
            raise ConfigError(f"prompts={args.prompts} is not UTF-8 text (byte {exc.start})") from None
        if not texts:
            raise ConfigError(f"prompts={args.prompts} holds no prompt")
    for i, text in enumerate(texts):
        if not text.strip():
            raise ConfigError("the prompt is empty" if len(texts) == 1 else f"prompt {i + 1} is empty")
    return texts


def run(argv: list[str], out: TextIO | None = None) -> list[str]:
    """Decoded outputs, one per prompt, also written to `out` (a line each; `main` gives stdout)
    as they come: a prompt decoded alone token by token (stream=true), the others batch by
    batch. Every argument, the prompts, the output paths and the checkpoint's path are checked
    before torch loads."""
    from zoo.cli.args import parse
    from zoo.config.errors import ConfigError
    from zoo.config.facts.ema import Weights
    from zoo.config.records.rundir import locate_checkpoint
    from zoo.config.schema.generation import OPTIONS_OF
    from zoo.config.schema.rope_rule import check_rope_rule_keys

    args, rope_rule = parse(GenerateArgs, argv, passthrough=PASSTHROUGH)
    check_rope_rule_keys(rope_rule, TOOL)  # RoPE's scaling rule, nothing else of the model
    if args.ckpt is None:
        raise ConfigError(f"ckpt=PATH is required (a checkpoint of a {GENERATING} run)")
    if any(a.split("=", 1)[0] == "prompt" and not a.split("=", 1)[1].strip() for a in argv):
        raise ConfigError("the prompt is empty")
    # GenerateArgs (a GenerationConfig) refused options of another strategy set away from their
    # defaults; one given on the command line is refused here even at its default value
    options = GenerationConfig(**{f.name: getattr(args, f.name) for f in fields(GenerationConfig)})
    given = {a.split("=", 1)[0] for a in argv}
    for strategy, names in OPTIONS_OF.items():
        for name in sorted(given & set(names)):
            if options.strategy != strategy:
                raise ConfigError(f"{name} only applies to strategy={strategy.value}, not {options.strategy.value}")
    layers, heads = _indices(args.layers, "layers"), _indices(args.heads, "heads")
    if args.batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {args.batch_size}")
    _check_device_and_dtype(args)
    texts = read_prompts(args)
    Weights.parse(args.weights, "weights")
    ckpt = locate_checkpoint(args.ckpt)
    for key in ("attention_map", "positions_plot"):
        _check_output(key, getattr(args, key), reads=[("ckpt", ckpt), ("prompts", args.prompts)])

    from zoo.cli.progress import Progress
    from zoo.config.facts.families import FAMILY_FACTS
    from zoo.config.facts.tasks import kinds_that, task_spec
    from zoo.config.schema.generation import Strategy
    from zoo.data.prompts import continue_text, encode_prompts
    from zoo.data.stream import TextStream
    from zoo.models.generate import generate, strip_special
    from zoo.models.limits import check_lengths, check_memory
    from zoo.training.checkpoint.averaging import load_weights

    device, dtype = _device_and_dtype(args)
    task, _ = load_weights(ckpt, args.weights, rope_rule=rope_rule, tool=TOOL)
    kind = task.task_config.kind.value
    if not task_spec(kind).generates:
        raise ConfigError(
            f"{args.ckpt} is a {kind} checkpoint; zoo-generate needs a {' or '.join(kinds_that('generates'))} one"
        )
    tokenizer = task.tokenizer
    if tokenizer is None:
        raise ConfigError(f"{args.ckpt} carries no tokenizer")
    if args.attention_map:
        _check_picture_indices(task, layers, heads)
    task.model.to(device=device, dtype=dtype)
    draft = _speculative_draft(task, args.ckpt) if options.speculative else None
    specials = tokenizer.special_ids()
    decoder_only = FAMILY_FACTS[task.model_config.family].prompt_in_decoder
    batches = (len(texts) + args.batch_size - 1) // args.batch_size
    streams = (
        out is not None
        and args.stream
        and options.strategy != Strategy.beam
        and (len(texts) == 1 or args.batch_size == 1)
    )
    shows_progress = args.progress if args.progress is not None else (sys.stderr.isatty() and not streams)
    progress = Progress(TOOL, batches=batches, max_steps=options.max_new_tokens) if shows_progress else None
    outputs = []
    for start in range(0, len(texts), args.batch_size):
        chunk = texts[start : start + args.batch_size]
        ids, mask = encode_prompts(tokenizer, chunk, left_pad=decoder_only)
        check_lengths(task.model_config, ids.shape[1], options.max_new_tokens)
        param = next(task.model.parameters())
        beams = options.num_beams if options.strategy.value == "beam" else 1
        check_memory(
            task.model_config,
            ids.shape[0] * beams,
            ids.shape[1],
            options.max_new_tokens,
            device=param.device,
            itemsize=param.element_size(),
        )
        ids, mask = ids.to(device), mask.to(device)
        text_stream = None
        if streams and out is not None:
            write = _writer(out)
            text_stream = (
                TextStream.continuing(tokenizer, chunk[0], write, eos_id=specials["eos"], pad_id=specials["pad"])
                if decoder_only
                else TextStream(tokenizer.decode, write, eos_id=specials["eos"], pad_id=specials["pad"])
            )
        if progress is not None:
            progress.next_batch(len(chunk))
        on_step = _each(
            text_stream and (lambda tokens, stream=text_stream: stream.put(int(tokens[0]))), progress and progress.step
        )
        new = generate(
            task.model,
            ids,
            attention_mask=mask,
            config=options,
            bos_id=specials["bos"],
            eos_id=specials["eos"],
            pad_id=specials["pad"],
            vocab_limit=tokenizer.vocab_size,
            on_step=on_step,
            draft=draft,
        )
        for text, row in zip(chunk, strip_special(new, specials["eos"], specials["pad"])):
            outputs.append(continue_text(tokenizer, text, row) if decoder_only else tokenizer.decode(row))
            if text_stream is not None:
                text_stream.end()
            elif out is not None:
                out.write(outputs[-1] + "\n")
                out.flush()
            if args.attention_map and len(outputs) == 1:
                _draw_attention(task, tokenizer, text, row, args.attention_map, layers, heads)
                print(f"{TOOL}: attention map of the first prompt written to {args.attention_map}", file=sys.stderr)
    if progress is not None:
        progress.end()
    if args.positions_plot:
        from zoo.models.visualize import plot_positions

        plot_positions(task.model, args.positions_plot)
        print(f"{TOOL}: position scheme plot written to {args.positions_plot}", file=sys.stderr)
    return outputs


def _speculative_draft(task, ckpt: str):
    """speculative=true: the checkpoint's multi-token prediction modules, beside the model on its
    device; ConfigError, one line, where there are none or the model cannot roll back its cache."""
    from zoo.config.errors import ConfigError
    from zoo.models.speculative import check_speculative

    draft = getattr(task, "mtp", None)
    try:
        check_speculative(task.model, draft)
    except ValueError as exc:
        raise ConfigError(f"speculative=true: {ckpt}: {exc}") from None
    assert draft is not None  # checked
    param = next(task.model.parameters())
    return draft.to(device=param.device, dtype=param.dtype)


def _writer(out: TextIO):
    """Writes and flushes, so that each piece shows as it comes."""

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    return write


def _each(*calls):
    """One step callback calling each of `calls` that is set; None when none is."""
    given = [c for c in calls if c]
    if not given:
        return None
    return lambda tokens: [c(tokens) for c in given] and None


def _check_device_and_dtype(args: GenerateArgs) -> None:
    """device= and dtype= among the allowed names (without torch)."""
    from zoo.config.errors import ConfigError

    if args.device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device must be auto, cpu or cuda, got {args.device!r}")
    if args.dtype not in ("float32", "bfloat16"):
        raise ConfigError(f"dtype must be float32 or bfloat16, got {args.dtype!r}")


def _device_and_dtype(args: GenerateArgs):
    """device= and dtype= as torch objects, or one line saying what is wrong."""
    import torch

    from zoo.config.errors import ConfigError

    _check_device_and_dtype(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda, but torch sees no CUDA device; use device=cpu")
    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    return torch.device("cpu" if device == "auto" else device), dtypes[args.dtype]


def _check_output(key: str, path: str | None, reads) -> None:
    """A plot's file must be a PNG whose directory exists, and none of the command's inputs or
    a run's records (`zoo.cli.outputs`), checked before anything is decoded."""
    from zoo.cli.outputs import check_target
    from zoo.config.errors import ConfigError

    if path is None:
        return
    target = Path(path)
    if target.suffix.lower() != ".png":
        raise ConfigError(f"{key}={path}: give a .png file")
    if not target.parent.is_dir():
        raise ConfigError(f"{key}={path}: the directory {target.parent} does not exist")
    if target.is_dir():
        raise ConfigError(f"{key}={path} is a directory; give a .png file")
    check_target(key, path, f"{key}.png", reads)


def _indices(text: str | None, key: str) -> list[int] | None:
    from zoo.config.errors import ConfigError

    if text is None:
        return None
    try:
        return [int(part) for part in str(text).replace(" ", "").split(",") if part != ""]
    except ValueError:
        raise ConfigError(f"{key}={text!r}: give comma-separated integers, e.g. {key}=0,1") from None


def _check_picture_indices(task, layers, heads) -> None:
    """attention_map's layers= and heads= are checked against the model before anything is
    decoded (the picture is drawn after the first output is written)."""
    from zoo.config.errors import ConfigError
    from zoo.models.visualize import attention_modules

    n_layers = max((key[1] for key in attention_modules(task.model)), default=-1) + 1
    n_heads = task.model_config.n_heads
    for layer in layers or ():
        if not 0 <= layer < n_layers:
            raise ConfigError(f"layer {layer} does not exist; the model has layers 0..{n_layers - 1}")
    for head in heads or ():
        if not 0 <= head < n_heads:
            raise ConfigError(f"head {head} does not exist; the model has heads 0..{n_heads - 1}")


def _draw_attention(task, tokenizer, text, new_ids, path, layers, heads) -> None:
    import torch

    from zoo.config.errors import ConfigError
    from zoo.config.facts.families import FAMILY_FACTS
    from zoo.models.visualize import attention_maps, plot_attention

    piece = lambda i: tokenizer.decode([i]) or f"<{i}>"  # noqa: E731
    prompt_ids = tokenizer.encode(text)
    try:
        if FAMILY_FACTS[task.model_config.family].prompt_in_decoder:
            ids = prompt_ids + list(new_ids)
            maps = attention_maps(task.model, torch.tensor([ids]), layers=layers)
            labels = [piece(i) for i in ids]
            plot_attention(maps, path, query_tokens=labels, key_tokens=labels, heads=heads)
        else:
            bos = tokenizer.special_ids()["bos"]
            target = [bos] + list(new_ids)
            maps = attention_maps(
                task.model, torch.tensor([prompt_ids]), layers=layers, decoder_input_ids=torch.tensor([target])
            )
            labels = ["<s>"] + [piece(i) for i in new_ids]
            plot_attention(
                maps,
                path,
                query_tokens=labels,
                key_tokens=labels,
                source_tokens=[piece(i) for i in prompt_ids],
                heads=heads,
            )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def usage() -> str:
    from zoo.cli.tool import Section, help_text

    return help_text(USAGE, __doc__, [Section("options", GenerateArgs)])


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.tool import serve

    serve(TOOL, _print_outputs, usage, argv)


def _print_outputs(argv: list[str]) -> None:
    run(argv, out=sys.stdout)


if __name__ == "__main__":
    main()
