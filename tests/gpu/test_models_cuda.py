"""Every family × position scheme on a CUDA GPU, in two covering designs (tests/covering.py), one
test a row, each property a subtest:

- training rows, every pair of kinds of family × position × norm placement × norm type × padding
  × kv heads (28 rows of the product's 672): weights and buffers moved CPU -> GPU -> CPU, bf16
  autocast's forward and backward against float32's, which SDPA backend a bf16 training step
  runs, and no host sync in an eager training step;
- decoding rows, every pair of causal family × position × cache × precision (14 rows of the
  product's 56, one a (family, position) pair): cached and static-cache decoding against the
  full forward in bf16 (and float32), greedy decoding the CPU's on the GPU, beam search on the
  device, and which SDPA backend the decoding steps run.

Run with `pytest -m gpu` on a machine with a GPU; elsewhere every test is skipped."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.conftest import CAUSAL_FAMILIES, POSITIONS, tiny
from tests.covering import cases, model_axes
from tests.gpu.conftest import (
    BF16_TOL,
    DEVICE,
    FP32_TOL,
    agree_until_close_call,
    decisive,
    fed_batch,
    no_waits,
    on,
    profile_run,
    prompts,
    relative_diff,
    tiny_task,
    token_batch,
    unpadded,
)
from zoo.models.generate import GenerationConfig, generate
from zoo.nn.position import POSITIONS as POSITION_CLASSES

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

BOS = 2

# bf16 is what decoding runs in; float32 resolves what bf16 noise hides in a tiny random model (a
# key position off by one moves its logits by ~5e-3 of their scale, about bf16's rounding)
PRECISIONS = {"bf16": (torch.bfloat16, BF16_TOL), "fp32": (torch.float32, FP32_TOL)}

# every pair of kinds of family x position x norm placement x norm type x padding x kv heads: 28
# rows of the product's 672, each (family, position) pair in one or two (padding and kv heads are
# the SDPA kernel check's)
TRAINING_ROWS = cases(
    {
        **model_axes("family", "position", "norm", "norm_type"),
        "padding": ["unpadded", "padded"],
        "heads": ["mha", "mqa"],
    }
)
# every pair of causal family x position x cache x precision: 14 rows of the product's 56, each
# (family, position) pair in one (cache and precision are the cached-logits check's)
DECODING_ROWS = cases(
    {"family": CAUSAL_FAMILIES, "position": POSITIONS, "cache": ["dynamic", "static"], "precision": list(PRECISIONS)}
)


def build(family, position, norm="pre", norm_type="layernorm", **kw):
    return zoo.build_model(tiny(family, position, norm=norm, norm_type=norm_type, **kw))


def bf16():
    return torch.autocast(DEVICE.type, dtype=torch.bfloat16)


def inputs(batch: dict) -> dict:
    """A batch without its labels: the model's keyword arguments."""
    return {k: v for k, v in batch.items() if k != "labels"}


def flat_grads(model) -> torch.Tensor:
    return torch.cat([p.grad.float().flatten() for p in model.parameters() if p.grad is not None])


def checks(subtests):
    """`subtests.test(name)` as `check(name)`, each check starting from the random state at this
    call (right after the row's model is built): a check draws the inputs it would draw as a test
    of its own, whatever ran before it in the row."""
    drawn = torch.get_rng_state()

    def check(name: str):
        torch.set_rng_state(drawn)
        return subtests.test(name)

    return check


# -- 1. the training rows ------------------------------------------------------------------------


@pytest.mark.parametrize("family, position, norm, norm_type, padding, heads", TRAINING_ROWS)
def test_a_row_moves_to_the_gpu_and_back_and_trains_there(
    subtests, family, position, norm, norm_type, padding, heads, exact_fp32
):
    """One model a row of the design (d_model 16), its kinds also at head dim 64 and in a tiny
    task: the round trip CPU -> GPU -> CPU, bf16 autocast's forward and backward against
    float32's, the SDPA kernels a bf16 training step runs with the row's padding and kv heads,
    and an eager training step that never waits for the GPU."""
    model = build(family, position, norm, norm_type)
    kinds = dict(norm=norm, norm_type=norm_type)
    check = checks(subtests)
    with check("CPU -> GPU -> CPU"):
        assert_round_trip(model, family)
    with check("bf16 autocast forward and backward"):
        assert_bf16_autocast_forward_and_backward(model, family)
    with check("the training step runs a fused SDPA kernel"):
        assert_training_step_runs_a_fused_sdpa_kernel(family, position, kinds, padding, heads)
    with check("an eager training step never waits for the GPU"):
        assert_an_eager_training_step_never_waits_for_the_gpu(family, position, kinds)


# -- bf16 autocast forward and backward ---------------------------------------------------------


def both_losses(model, batch: dict):
    """The two output losses of the tasks: cross-entropy over the (B·T, V) logits, and the
    chunked projection + cross-entropy over the (B·T, D) hidden states. -> (logits, full, chunked)"""
    labels = batch["labels"].flatten()  # (B·T,)
    out = model(**inputs(batch))
    full = F.cross_entropy(out.logits.float().flatten(0, 1), labels, ignore_index=-100)
    chunked = model.token_loss(out.hidden_states.flatten(0, 1), labels, chunk=8)
    return out.logits, full, chunked


def assert_bf16_autocast_forward_and_backward(model, family):
    """Under bf16 autocast on the GPU both output losses are finite and near float32's, and every
    parameter gets a finite float32 gradient pointing where float32's does."""
    model.to(DEVICE).train()
    model.zero_grad(set_to_none=True)
    batch = on(token_batch(family), DEVICE)
    _, ref_full, ref_chunked = both_losses(model, batch)  # float32 on the same device
    (ref_full + ref_chunked).backward()
    ref_grads = flat_grads(model)
    model.zero_grad(set_to_none=True)

    with bf16():
        logits, full, chunked = both_losses(model, batch)  # logits (B, T, V)
    assert logits.dtype == torch.bfloat16, "autocast did not reach the output projection"
    for name, loss, ref in (("logits", full, ref_full), ("chunked", chunked, ref_chunked)):
        assert loss.dtype == torch.float32 and torch.isfinite(loss), f"{name} loss: {loss}"
        torch.testing.assert_close(loss, ref, atol=3e-2, rtol=1e-2, msg=f"{name} loss vs float32")
    (full + chunked).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} got no gradient"
        assert p.grad.dtype == torch.float32 and p.grad.device == p.device, f"{name}: {p.grad.dtype} on {p.grad.device}"
        assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"
    cosine = F.cosine_similarity(flat_grads(model), ref_grads, dim=0)
    assert cosine > 0.99, f"bf16 gradients point elsewhere than float32's (cosine {cosine:.4f})"


# -- device portability -------------------------------------------------------------------------


def tensors(model) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (non-persistent ones too: RoPE frequencies, ALiBi slopes)."""
    return {**dict(model.named_parameters()), **{f"buffer {n}": b for n, b in model.named_buffers()}}


def assert_all_on(model, device: torch.device) -> None:
    stray = {n: str(t.device) for n, t in tensors(model).items() if t.device.type != device.type}
    assert not stray, f"not on {device.type}: {stray}"


@torch.no_grad()
def assert_round_trip(model, family):
    """Moving a model to the GPU and back moves every parameter and buffer, changes none of them,
    and float32 outputs on the GPU match the CPU's within 1e-4 of their scale."""
    model.to("cpu").eval()
    batch = inputs(token_batch(family))
    before = {n: t.detach().clone() for n, t in tensors(model).items()}
    ref = model(**batch).logits  # (B, T, V) on the CPU

    model.to(DEVICE)
    assert_all_on(model, DEVICE)
    on_gpu = model(**on(batch, DEVICE))
    assert on_gpu.logits.device.type == DEVICE.type and on_gpu.logits.dtype == torch.float32
    diff = relative_diff(on_gpu.logits, ref)
    assert diff < FP32_TOL, f"float32 logits on the GPU differ from the CPU's by {diff:.2e} of their scale"

    model.to("cpu")
    assert_all_on(model, torch.device("cpu"))
    after = tensors(model)
    assert after.keys() == before.keys()
    for name, value in before.items():
        assert torch.equal(after[name], value), f"{name} changed on the round trip"
    assert relative_diff(model(**batch).logits, ref) < FP32_TOL


# -- no host sync in an eager training step -----------------------------------------------------


def assert_an_eager_training_step_never_waits_for_the_gpu(family, position, kinds):
    """The family's default task (the row's kinds, d_model 64): after a warm-up step, a training
    loss and its backward run under torch.cuda.set_sync_debug_mode("error")."""
    task = tiny_task(family, position, kinds)
    task.sparse_targets = False  # masked LM's row selection is its one deliberate read
    batch = fed_batch(family)
    task.training_loss(batch)[0].backward()  # warm-up: lazy initialisation may sync once
    with no_waits():
        loss, _, _ = task.training_loss(batch)
        loss.backward()
    assert torch.isfinite(loss).item()


# -- which SDPA backend runs ---------------------------------------------------------------------

# head dim 64 in bf16: a shape every fused backend supports
FUSED_SHAPE = dict(d_model=128, n_heads=2, max_seq_len=32)


def expect_math(position: str) -> bool:
    """Only schemes that need the attention weights (Shaw's value term) compute attention
    themselves; a new such scheme must be added here with its reason."""
    needs = POSITION_CLASSES[position].needs_attention_weights
    assert needs == (position == "shaw"), f"{position} needs the attention weights: say why here"
    return needs


# The T5 bucketed bias and SDPA's kernels (torch 2.11; the split below is what the GPU runs of
# 2026-11-26 counted: 11 of these 16 cases fell back and 5 ran fused, on an H100 and on an H200,
# and the H200's decoding subset gave 3 and 1). The bias reaches SDPA as its attn_mask, shaped
# (B, H, T, S) by permuting the table lookup, so its last dimension has stride H. Every fused
# kernel needs stride 1 there: the bias passes only when a padding or causal mask is folded in
# (masked_fill writes a contiguous tensor), so an unpadded encoder (encoder-only, and the encoder
# of encoder-decoder) and the growing cache's one-query step (no mask) run the math kernel. In
# training the bias requires a gradient, which cuDNN refuses, and torch 2.11's memory-efficient
# kernel takes no multi-query keys, so with one kv head every relative case falls back. The same
# rules, applied on the CPU to the attn_mask each call gets, give this split. A case they say falls
# back is checked to fall back (the profile shows the math kernel's traces, as Shaw's does), every
# other one to run fused kernels only. Strict: a case that starts running fused kernels fails
# here and moves to the fused side. (The designs run 4 relative training cases, 3 falling back,
# and 4 decoding cases, 3 falling back.)
def relative_falls_back_in_training(family: str, padded: bool, kv_heads: int) -> bool:
    unmasked_encoder = not padded and family != "decoder_only"
    return unmasked_encoder or kv_heads < FUSED_SHAPE["n_heads"]


def relative_falls_back_in_decoding(family: str, cache_kind: str) -> bool:
    return family == "encoder_decoder" or cache_kind == "dynamic"


RELATIVE_MATH = (
    "T5 relative bias: a bias with last-dim stride n_heads, not masked into a contiguous "
    "tensor (or, in training, with multi-query keys) runs SDPA's math kernel on CUDA "
    "(torch 2.11, H100 and H200)"
)


def check_backend(seen, position: str, what: str, falls_back: bool = False) -> None:
    """Shaw's scheme shows the math path's traces; so does a case measured to fall back
    (`falls_back`: the T5 bias, RELATIVE_MATH); every other case runs fused kernels only."""
    print(f"{what}: {seen.backends or ['none fused']}{' + math' if seen.math_evidence else ''}")  # -rP shows it
    assert seen.kernels, f"{what}: the profile recorded no CUDA kernels (CUPTI unavailable?)"
    if expect_math(position):
        assert seen.math_evidence, f"{what}: Shaw computes the softmax itself, yet no trace of it\n{seen.describe()}"
        return
    if falls_back:
        assert seen.math_evidence, (
            f"{what}: measured to fall back to SDPA's math kernel ({RELATIVE_MATH}), yet no trace of it: "
            f"if it runs fused kernels now, move it to the fused side\n{seen.describe()}"
        )
        return
    assert seen.fused_kernels and not seen.math_evidence, (
        f"{what}: expected a fused SDPA kernel only\n{seen.describe()}"
    )


def assert_training_step_runs_a_fused_sdpa_kernel(family, position, kinds, padding, heads):
    """Forward and backward under bf16 autocast, head dim 64: SDPA runs flash, memory-efficient
    or cuDNN attention, forward and backward, and never the math fallback (bmm + softmax), for
    every scheme but Shaw (and the T5 bias where it was measured to fall back). Unpadded, a
    causal stack has no mask at all (SDPA's is_causal path: flash applies); padding or a score
    bias (T5 buckets, ALiBi) rules flash out, the memory-efficient and cuDNN kernels take masks.
    The backend seen is in the message."""
    padded, kv_heads = padding == "padded", {"mha": 2, "mqa": 1}[heads]
    falls_back = position == "relative" and relative_falls_back_in_training(family, padded, kv_heads)
    model = build(family, position, n_kv_heads=kv_heads, **kinds, **FUSED_SHAPE).to(DEVICE).train()
    batch = token_batch(family, T=16)
    batch = on(batch if padded else unpadded(batch), DEVICE)

    def step():
        model.zero_grad(set_to_none=True)
        with bf16():
            logits = model(**inputs(batch)).logits  # (B, T, V)
        logits.float().logsumexp(-1).mean().backward()  # a loss without softmax of its own

    seen = profile_run(step)
    what = f"{family}/{position}/{kinds['norm']}/{kinds['norm_type']}/{padding}/kv={kv_heads}"
    check_backend(seen, position, what, falls_back)


# -- 2. the decoding rows ------------------------------------------------------------------------


@pytest.mark.parametrize("family, position, cache_kind, precision", DECODING_ROWS)
@torch.no_grad()
def test_a_causal_row_decodes_on_the_gpu_as_the_full_forward_and_the_cpu_do(
    subtests, family, position, cache_kind, precision, exact_fp32
):
    """One model a row of the design (max_seq_len 64; another at head dim 64 for the kernels):
    float32 greedy decoding picks the CPU's tokens on the GPU; the row's cache in the row's
    precision gives the full forward's logits; in bf16, cached greedy decoding picks the full
    forward's and the uncached tokens, and the static cache the growing cache's; beam search
    runs on the device; and the decoding steps through either cache run the SDPA kernels
    expected. Only the cached-logits check takes the row's cache and precision: the others run
    on every row as they ran on every (family, position) pair, each with both caches or in the
    one precision it checks."""
    model = build(family, position, max_seq_len=64).eval()  # on the CPU: the first check starts there
    check = checks(subtests)
    with check("fp32 greedy decoding is the same on CPU and GPU"):
        assert_fp32_greedy_decoding_is_the_same_on_cpu_and_gpu(model, family)
    with check("cached decoding logits match the full forward"):
        assert_cached_decoding_logits_match_the_full_forward(model, family, cache_kind, precision)
    with check("cached greedy tokens match uncached decoding in bf16"):
        assert_cached_greedy_tokens_match_uncached_decoding_in_bf16(model, family)
    with check("static cache greedy tokens match the dynamic cache in bf16"):
        assert_static_cache_greedy_tokens_match_the_dynamic_cache_in_bf16(model, family)
    with check("beam search runs on the GPU"):
        assert_beam_search_runs_on_the_gpu(model, family)
    kernels = build(family, position, **FUSED_SHAPE).to(DEVICE).eval()  # head dim 64: the kernel checks' model
    for kind in ("dynamic", "static"):
        with check(f"decoding steps run a fused SDPA kernel ({kind} cache)"):
            assert_decoding_steps_run_a_fused_sdpa_kernel(kernels, family, position, kind)


def decoding_batch(family: str, T: int = 10) -> dict:
    """On the device: a left-padded decoder-only sequence `tokens` (B, T) with `mask`, or an
    encoder-decoder `source` (B, S) with its right-padded `source_mask` and target `tokens`."""
    if family == "decoder_only":
        tokens, mask = prompts(family, S=T)
        return on({"tokens": tokens, "mask": mask}, DEVICE)
    source, source_mask = prompts(family)
    return on({"source": source, "source_mask": source_mask, "tokens": torch.randint(4, 37, (3, T))}, DEVICE)


def full_logits(model, family: str, batch: dict) -> torch.Tensor:
    """One uncached forward over every token -> (B, T, V)."""
    if family == "encoder_decoder":
        return model(batch["source"], attention_mask=batch["source_mask"], decoder_input_ids=batch["tokens"]).logits
    return model(batch["tokens"], attention_mask=batch["mask"]).logits


def stepwise_logits(model, family: str, batch: dict, cache, prefix: int = 4) -> torch.Tensor:
    """The first `prefix` tokens in one call, then one token per call through `cache` ->
    (B, T, V)."""
    tokens = batch["tokens"]  # (B, T)
    if family == "encoder_decoder":
        memory = model.encode(batch["source"], batch["source_mask"])  # (B, S, D)

        def step(a, b):
            return model(
                decoder_input_ids=tokens[:, a:b],
                encoder_hidden_states=memory,
                attention_mask=batch["source_mask"],
                cache=cache,
                use_cache=True,
            ).logits
    else:

        def step(a, b):
            return model(tokens[:, a:b], attention_mask=batch["mask"][:, :b], cache=cache, use_cache=True).logits

    T = tokens.shape[1]
    pieces = [step(0, prefix)] + [step(t, t + 1) for t in range(prefix, T)]
    assert cache.length == T
    return torch.cat(pieces, dim=1)  # (B, T, V)


def assert_cached_decoding_logits_match_the_full_forward(model, family, cache_kind, precision):
    """A prefix, then one token at a time through the growing (or static) KV cache, gives the
    full pass's logits within bf16 (autocast) or float32 tolerance at every real position (left
    pads excluded: what a pad query sees is arbitrary)."""
    dtype, tol = PRECISIONS[precision]
    model.to(DEVICE)
    batch = decoding_batch(family)
    T = batch["tokens"].shape[1]
    cache = model.new_cache(T if cache_kind == "static" else None)
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        full = full_logits(model, family, batch)  # (B, T, V)
        stepped = stepwise_logits(model, family, batch, cache)  # (B, T, V)
    assert stepped.dtype == full.dtype == dtype
    real = batch["mask"].bool() if family == "decoder_only" else torch.ones_like(batch["tokens"], dtype=torch.bool)
    diff = relative_diff(stepped[real], full[real])
    assert diff < tol, (
        f"{cache_kind} cache vs full forward in {precision}: max |Δlogit| = {diff:.2e} of the logit scale"
    )


def teacher_forced(model, family: str, ids, mask, new) -> torch.Tensor:
    """The full forward over prompt + generated tokens new (B, N) -> the logits (B, N, V) each
    generated token was chosen from."""
    N = new.shape[1]
    if family == "encoder_decoder":
        dec = torch.cat([torch.full_like(new[:, :1], BOS), new[:, :-1]], dim=1)  # (B, N)
        return model(ids, attention_mask=mask, decoder_input_ids=dec).logits  # (B, N, V)
    S = ids.shape[1]
    full = model(torch.cat([ids, new], 1), attention_mask=torch.cat([mask, torch.ones_like(new)], 1)).logits
    return full[:, S - 1 : S - 1 + N]  # (B, N, V)


def greedy(model, ids, mask, use_cache=None, **options) -> torch.Tensor:
    """12 new tokens per row (B, 12); `options`: GenerationConfig fields."""
    return generate(
        model,
        ids,
        attention_mask=mask,
        config=GenerationConfig(**options),
        max_new_tokens=12,
        bos_id=BOS,
        use_cache=use_cache,
    )


def assert_cached_greedy_tokens_match_uncached_decoding_in_bf16(model, family):
    """Greedy decoding with the cache picks the full forward's argmax at every step where the
    top-2 margin is clearly above bf16 noise, and uncached decoding picks the same tokens until
    a close call lets them part."""
    model.to(DEVICE)
    ids, mask = (t.to(DEVICE) for t in prompts(family))
    with bf16():
        cached = greedy(model, ids, mask)  # (B, N)
        uncached = greedy(model, ids, mask, use_cache=False)  # (B, N)
        chosen_from = teacher_forced(model, family, ids, mask, cached)  # (B, N, V)
    assert cached.device == ids.device and cached.shape == (3, 12)
    sure = decisive(chosen_from, BF16_TOL)  # (B, N)
    argmax = chosen_from.argmax(-1)  # (B, N)
    assert torch.equal(cached[sure], argmax[sure]), (
        f"cached greedy tokens are not the full forward's argmax at decisive steps:\n{cached.tolist()}\n{argmax.tolist()}"
    )
    agree_until_close_call(cached, uncached, sure)
    assert sure.float().mean() >= 0.25, (
        f"only {sure.float().mean():.0%} of the steps are decisive: the test says little"
    )


def assert_static_cache_greedy_tokens_match_the_dynamic_cache_in_bf16(model, family):
    """`GenerationConfig(static_cache=True)` (fixed-shape buffers, masked free slots: SDPA gets a
    mask where the growing cache has none) decodes the growing cache's tokens until a close call
    lets them part."""
    model.to(DEVICE)
    ids, mask = (t.to(DEVICE) for t in prompts(family))
    with bf16():
        dynamic = greedy(model, ids, mask)  # (B, N)
        static = greedy(model, ids, mask, static_cache=True)  # (B, N)
        chosen_from = teacher_forced(model, family, ids, mask, dynamic)  # (B, N, V)
    assert static.shape == dynamic.shape == (3, 12)
    compared = agree_until_close_call(static, dynamic, decisive(chosen_from, BF16_TOL))
    assert sum(compared) > 0, "the two caches parted at the first step of every row: nothing was compared"


def assert_fp32_greedy_decoding_is_the_same_on_cpu_and_gpu(model, family):
    """Cached greedy decoding of padded prompts (growing and static cache) picks the CPU's tokens
    on the GPU in float32 until a close call lets them part."""
    model.to("cpu")
    ids, mask = prompts(family)
    ref = greedy(model, ids, mask)  # (B, N) on the CPU
    sure = decisive(teacher_forced(model, family, ids, mask, ref), FP32_TOL)  # (B, N)
    model.to(DEVICE)
    gpu_ids, gpu_mask = ids.to(DEVICE), mask.to(DEVICE)
    for options in ({}, {"static_cache": True}):
        out = greedy(model, gpu_ids, gpu_mask, **options)
        assert out.device.type == DEVICE.type
        agree_until_close_call(out, ref, sure)


def assert_beam_search_runs_on_the_gpu(model, family):
    """Beam search reorders its cache rows on the device and returns ids there (its bookkeeping
    is on the CPU), with the growing and the static cache alike."""
    model.to(DEVICE)
    ids, mask = (t.to(DEVICE) for t in prompts(family))
    for static in (False, True):
        config = GenerationConfig(strategy="beam", num_beams=3, static_cache=static)
        with bf16():
            out = generate(model, ids, attention_mask=mask, config=config, max_new_tokens=6, bos_id=BOS)
        assert out.device.type == DEVICE.type and out.shape[0] == 3 and 1 <= out.shape[1] <= 6
        assert ((out >= 0) & (out < 37)).all()


def assert_decoding_steps_run_a_fused_sdpa_kernel(model, family, position, cache_kind):
    """The prefill and a one-token step through the KV cache under bf16 autocast, `model` at
    FUSED_SHAPE: fused kernels only (the growing cache's step has no mask; the static cache
    masks its free slots, so a mask-taking kernel runs), but where the T5 bias was measured to
    fall back."""
    falls_back = position == "relative" and relative_falls_back_in_decoding(family, cache_kind)
    ids = torch.randint(4, 37, (2, 8)).to(DEVICE)  # (B, T): the prompt, or the source and target so far

    def prefill_and_step():
        cache = model.new_cache(16 if cache_kind == "static" else None)
        with bf16():
            memory = model.encode(ids) if family == "encoder_decoder" else None  # (B, S, D)

            def forward(tokens):
                if memory is None:
                    return model(tokens, cache=cache, use_cache=True)
                return model(decoder_input_ids=tokens, encoder_hidden_states=memory, cache=cache, use_cache=True)

            logits = forward(ids).logits  # (B, T, V)
            forward(logits[:, -1:].argmax(-1))  # one step: (B, 1)

    seen = profile_run(prefill_and_step)
    check_backend(seen, position, f"{family}/{position}/{cache_kind} cache decoding", falls_back)
