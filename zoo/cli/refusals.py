"""The combinations zoo refuses before training, each with the message its validation gives.

The table is not written by hand: `refusal_table()` runs the real checks (`zoo.compose` and
`zoo.config.schema.validate`) on one example of each rule and prints what they say, and a test
keeps the copy in docs/composing.md equal to it.

    python -m zoo.cli.refusals      # the Markdown table of docs/composing.md
"""

from __future__ import annotations

from zoo.config.facts.attention import AttentionKind

GDN, FULL = AttentionKind.gated_deltanet, AttentionKind.full


def _pattern(*kinds: AttentionKind) -> str:
    """The override model.layer_pattern=[a,b,...] of `kinds`."""
    return f"model.layer_pattern=[{','.join(kind.value for kind in kinds)}]"


# (rule, overrides of one example that breaks it)
EXAMPLES: list[tuple[str, list[str]]] = [
    ("heads split the width", ["model.d_model=100", "model.n_heads=3"]),
    ("key/value heads group the heads (GQA)", ["model.n_heads=4", "model.n_kv_heads=3"]),
    ("RoPE rotates pairs: even head size", ["model/position=rope", "model.d_model=36", "model.n_heads=4"]),
    ("sinusoids pair sin/cos: even width", ["model/position=sinusoidal", "model.d_model=33", "model.n_heads=3"]),
    ("learned positions end at max_seq_len", ["data.seq_len=256", "model.max_seq_len=128"]),
    ("a position option of another scheme", ["model/position=alibi", "model.position.theta=500"]),
    ("T5 buckets: even, at least 4", ["model/position=relative", "model.position.num_buckets=7"]),
    (
        "T5 max_distance beyond the exact buckets",
        ["model/position=relative", "model.position.num_buckets=32", "model.position.max_distance=10"],
    ),
    ("decoder depth only for encoder-decoders", ["model.n_decoder_layers=2"]),
    ("the task needs its family", ["model=bert", "task=causal_lm"]),
    ("the task needs its family", ["model=gpt", "task=seq2seq"]),
    ("pooling only for classification", ["task.pooling=mean"]),
    ("document masking only for packed causal LM", ["model=bert", "task=masked_lm", "data.document_mask=true"]),
    ("dropout is a probability", ["model.dropout=1.0"]),
    ("μP's base width is a width", ["model.parametrization=mup", "model.mup_base_d_model=0"]),
    ("a μP option without μP", ["model.mup_base_d_model=64"]),
    ("two branch norms need a stream they add to", ["model.block=parallel_two_norms", "model.norm=post"]),
    ("a QK-norm type without QK-norm", ["model.qk_norm_type=rmsnorm"]),
    ("a soft-cap is positive", ["model.attn_softcap=0"]),
    ("z-loss is for the vocabulary's logits", ["model=bert", "task=classification", "task.z_loss=1e-4"]),
    ("liger computes no z-loss", ["task.output_loss=liger", "task.z_loss=1e-4"]),
    ("liger caps no logits", ["task.output_loss=liger", "model.final_softcap=30"]),
    ("sliding attention needs its window", ["model/attention=sliding", "model.window=null"]),
    ("a window only with sliding attention", ["model.window=64"]),
    ("an encoder's band is symmetric: an odd window", ["model=bert", "model/attention=sliding", "model.window=64"]),
    ("a mixture of experts holds no biases", ["model.ffn=moe"]),
    ("a mixture of experts is not worked out under μP", ["model=llama", "model.ffn=moe", "model.parametrization=mup"]),
    ("top-k of the experts there are", ["model=llama", "model.ffn=moe", "model.moe_top_k=9"]),
    ("a mixture option without a mixture", ["model.moe_experts=16"]),
    ("groups of experts that divide them", ["model=mixtral", "model.moe_groups=3"]),
    ("a selection bias needs a choice", ["model=mixtral", "model.moe_balance=bias", "model.moe_top_k=8"]),
    (
        "a balancing weight nothing reads",
        ["model=mixtral", "model.moe_balance=bias", "task.moe_balance=0.1"],
    ),
    ("gpt-oss's experts compute its clamped SwiGLU", ["model=gpt_oss", "model.activation=gelu"]),
    ("an expert kind only with a mixture of experts", ["model=llama", "model.moe_expert=gpt_oss"]),
    ("a shared experts' gate needs shared experts", ["model=mixtral", "model/moe_shared_gate=sigmoid"]),
    ("every k-th layer picks a layer of each stack", ["model=gemma2", "model.n_layers=1"]),
    ("latent attention expands every head: no key/value head groups", ["model/kv=latent", "model.n_kv_heads=2"]),
    ("a latent width only with latent attention", ["model.kv_lora_rank=64"]),
    ("the value residual mixes with a first layer", ["model/value_residual=fixed", "model.n_layers=1"]),
    ("value embeddings: table i at layers i and L - k + i", ["model.value_embeds=3", "model.n_layers=4"]),
    ("several residual streams need hyper-connections", ["model.residual_streams=4"]),
    ("hyper-connections replace the sum post-LN normalizes", ["model/hyper_connections=dynamic", "model.norm=post"]),
    ("label smoothing in [0, 1)", ["task.label_smoothing=1.5"]),
    ("a schedule option of another schedule", ["scheduler=constant", "scheduler.min_lr_ratio=0.5"]),
    ("warmup shorter than the run", ["trainer.max_steps=10"]),
    ("inverse-sqrt peak not vanishingly small", ["scheduler=inverse_sqrt", "optim.lr=1e-4"]),
    ("an optimizer option of another optimizer", ["optim=adamw", "optim.momentum=0.9"]),
    ("NorMuon's row decay only with NorMuon", ["optim=muon", "optim.normuon_beta2=0.9"]),
    ("an average option without an average", ["optim.ema_every=10"]),
    ("a WSD cooldown begins after the warmup", ["scheduler=wsd", "trainer.max_steps=40", "scheduler.decay_steps=20"]),
    ("branch_from branches a WSD cooldown", ["branch_from=RUN/checkpoints/last.ckpt", "scheduler=cosine"]),
    ("a tokenizer option of another tokenizer", ["tokenizer=byte", "tokenizer.vocab_size=512"]),
    ("a Hugging Face tokenizer names its directory", ["tokenizer=hf"]),
    ("init_from names a Hugging Face directory", ["init_from=foo"]),
    ("init_from's weights fix the architecture", ["init_from=hf:llama-7b", "model.n_layers=2"]),
    ("init_from's weights fix the vocabulary", ["init_from=hf:llama-7b", "tokenizer=byte"]),
    ("the global batch splits over the devices", ["trainer=ddp_cpu", "trainer.devices=3", "data.global_batch_size=16"]),
    ("a batch ramp rises from step 0", ["data.batch_warmup=[[0,16],[100,8]]", "data.global_batch_size=8"]),
    ("a batch ramp ends at the global batch", ["data.batch_warmup=[[0,8],[100,16]]", "data.global_batch_size=32"]),
    (
        "each ramped batch splits over accumulation and ranks",
        ["trainer=ddp_cpu", "data.batch_warmup=[[0,3],[100,16]]", "data.global_batch_size=16"],
    ),
    ("a context ramp divides the sequence", ["data.seq_len_warmup=[[0,48],[100,128]]", "data.seq_len=128"]),
    (
        "ramps only for packed causal LM",
        ["model=bert", "task=masked_lm", "data.seq_len_warmup=[[0,64],[100,128]]", "data.seq_len=128"],
    ),
    ("sharded training has no float16 gradient scaler", ["trainer=fsdp_cpu", "trainer.precision=16-mixed"]),
    (
        "Lightning clips no fused optimizer in mixed precision",
        ["optim.implementation=fused", "trainer.precision=bf16-mixed", "trainer.gradient_clip_val=1.0"],
    ),
    ("the run has an end", ["trainer.max_steps=-1", "trainer.max_epochs=-1"]),
    ("a finished run trained and validated", ["+trainer.fast_dev_run=2"]),
    ("a finished run trained and validated", ["+trainer.limit_train_batches=0"]),
    ("a known section", ["+foo.bar=1"]),
    ("every section present", ["~task"]),
    ("a requeue signal zoo can catch", ["callbacks.requeue_signal=SIGKILL"]),
    ("a known choice", ["model.norm=middle"]),
    ("a known key", ["model.width=256"]),
    ("multi-token prediction trains a causal LM", ["model=bert", "task=masked_lm", "task.mtp_depth=1"]),
    ("multi-token prediction under μP", ["task.mtp_depth=1", "model.parametrization=mup"]),
    ("multi-token prediction over whole windows", ["task.mtp_depth=1", "data.document_mask=true"]),
    # RoPE's per-layer pattern, partial rotation and scaling rules (zoo.config.facts.rope)
    ("NoPE layers are RoPE's pattern", ["model/position=alibi", "model.position.nope_every=4"]),
    ("NoPE every k-th layer of each stack", ["model/position=rope", "model.position.nope_every=9"]),
    ("partial RoPE rotates pairs", ["model/position=rope", "model.position.rotary_fraction=0.3"]),
    ("a local RoPE base needs sliding layers", ["model/position=rope", "model.position.theta_local=10000"]),
    ("a scaling rule's option under another rule", ["model/position=rope", "model.position.beta_fast=16"]),
    # Mamba 2's widths (zoo.config.facts.mamba2)
    ("Mamba 2's heads split its inner width", ["model/attention=mamba2", "model.ssm_head_dim=48"]),
    ("Mamba 2's groups split its heads", ["model/attention=mamba2", "model.ssm_groups=3"]),
    ("Mamba 2's widths without its layers", ["model.ssm_state=64"]),
    # the associative-recall corpus (zoo.config.schema.recall)
    ("recall's symbols are characters: one id each", ["data=recall"]),
    ("recall's pairs fit the sequence", ["data=recall", "tokenizer=char", "data.recall_pairs=20"]),
    ("a recall option of another source", ["data.recall_pairs=4"]),
    # recurrent layers and layer patterns (zoo.config.facts.attention, zoo.config.facts.gated_deltanet)
    ("a recurrent layer is a causal decoder layer", ["model=bert", "model/attention=gated_deltanet"]),
    ("a recurrent layer has no keys to compress", ["model=deepseek_v3", "model/attention=gated_deltanet"]),
    ("a recurrent layer has no positions", ["model/position=shaw", "model/attention=gated_deltanet"]),
    ("a layer pattern tiles each stack", ["model.n_layers=4", _pattern(GDN, FULL, FULL)]),
    ("a layer pattern sets every layer's kind", [_pattern(GDN, FULL), "model.global_every=2"]),
    ("Gated DeltaNet's widths without its layers", ["model.linear_key_heads=2"]),
    ("value heads group under key heads", ["model/attention=gated_deltanet", "model.linear_value_heads=3"]),
]


def refusal(overrides: list[str]) -> str | None:
    """The one-line message `zoo-train` gives for these overrides, or None if they are valid."""
    from zoo.cli.compose import compose
    from zoo.config.errors import ConfigError
    from zoo.config.schema.validate import validate

    try:
        validate(compose(overrides))
    except ConfigError as exc:
        return str(exc)
    return None


def refusal_table() -> str:
    rows = ["| overrides | rule | message |", "|---|---|---|"]
    for rule, overrides in EXAMPLES:
        message = refusal(overrides)
        if message is None:
            raise AssertionError(f"{' '.join(overrides)} is accepted, but listed as refused ({rule})")
        cells = [f"`{' '.join(overrides)}`", rule, message.replace("|", "\\|")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(refusal_table(), end="")
