"""Every speed switch computes the same thing as the plain path: chunked output loss vs full
logits, activation checkpointing, the optimizer kernels, torch.compile, bf16 autocast, SDPA's
fused kernel for every position scheme it can express, and the static-shape decoding step."""

from __future__ import annotations

import copy

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile

import zoo
from tests.conftest import FAMILIES, tiny
from tests.perf.conftest import TASK_OF, batch_for
from zoo.config.errors import ConfigError
from zoo.config.schema.train import OptimConfig, OptimizerImpl
from zoo.models.generate import GenerationConfig, compiled, generate
from zoo.nn.cache import StaticKVCache
from zoo.nn.chunked_loss import chunked_linear_cross_entropy
from zoo.tasks import TASKS
from zoo.tasks.optim import build_optimizer


def grads(module) -> dict:
    return {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}


def assert_same_grads(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=1e-4, msg=name)


# -- chunked projection + cross-entropy -------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("with_bias", [False, True])
def test_chunked_cross_entropy_equals_full_logits(chunk, smoothing, with_bias):
    N, D, V = 50, 12, 41
    hidden = torch.randn(N, D, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(V, D, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(V, dtype=torch.float64, requires_grad=True) if with_bias else None
    targets = torch.randint(0, V, (N,))
    targets[::5] = -100
    ref = F.cross_entropy(F.linear(hidden, weight, bias), targets, ignore_index=-100, label_smoothing=smoothing)
    got = chunked_linear_cross_entropy(hidden, weight, targets, bias=bias, chunk=chunk, label_smoothing=smoothing)
    inputs = [hidden, weight] + ([bias] if with_bias else [])
    ref_grads = torch.autograd.grad(ref * 3.0, inputs)  # a scaled loss (e.g. accumulation) scales the gradients
    got_grads = torch.autograd.grad(got * 3.0, inputs)
    torch.testing.assert_close(got, ref, atol=1e-12, rtol=1e-12)
    for r, g in zip(ref_grads, got_grads):
        torch.testing.assert_close(g, r, atol=1e-12, rtol=1e-10)


def test_chunked_cross_entropy_is_exact_where_the_target_probability_underflows():
    """Losses above ~70 (a diverging model): the target's probability is 0 in float32, so the
    log-normaliser of those rows is recomputed directly."""
    hidden = torch.randn(16, 8) * 300.0
    weight = torch.randn(32, 8)
    targets = torch.randint(0, 32, (16,))
    ref = F.cross_entropy(hidden @ weight.t(), targets)
    got = chunked_linear_cross_entropy(hidden, weight, targets, chunk=5)
    assert ref > 100
    torch.testing.assert_close(got, ref)


def test_chunked_cross_entropy_under_bf16_autocast_is_close_to_float32():
    N, D, V = 64, 32, 300
    hidden = torch.randn(N, D, requires_grad=True)
    weight = (torch.randn(V, D) * 0.1).requires_grad_()
    targets = torch.randint(0, V, (N,))
    ref = F.cross_entropy(hidden @ weight.t(), targets)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = chunked_linear_cross_entropy(hidden, weight, targets, chunk=16)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, ref, atol=2e-2, rtol=2e-2)
    g_ref = torch.autograd.grad(ref, weight)[0]
    g_got = torch.autograd.grad(got, weight)[0]
    assert g_got.dtype == weight.dtype
    assert torch.nn.functional.cosine_similarity(g_ref.flatten(), g_got.flatten(), dim=0) > 0.99


def test_chunked_cross_entropy_rejects_a_bad_chunk():
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        chunked_linear_cross_entropy(torch.randn(2, 3), torch.randn(5, 3), torch.tensor([1, 2]), chunk=0)


# the output heads the chunked loss projects through
HEADS = {
    "plain": {},
    "head_transform, output_bias": {"head_transform": True, "output_bias": True},
    "scale_output, untied": {"scale_output": True, "tie_embeddings": False},
}
CHECKPOINTED = ["learned", "rope", "relative"]  # the position schemes checkpointed layers recompute


@pytest.mark.parametrize("family", FAMILIES)
def test_a_familys_task_trains_the_same_chunked_checkpointed_in_bf16_and_without_full_masks(subtests, family):
    """One family's default task: the chunked loss and full logits (through each head), activation
    checkpointing (with each scheme), bf16 autocast and masks without padding left out before
    transfer give the plain path's loss and gradients."""
    for head in HEADS:
        with subtests.test(f"chunked and full logits train the same ({head})"):
            assert_chunked_and_full_logits_train_the_same(family, HEADS[head])
    for position in CHECKPOINTED:
        with subtests.test(f"activation checkpointing gives the same loss and gradients ({position})"):
            assert_checkpointing_gives_the_same_loss_and_gradients(family, position)
    torch.manual_seed(0)
    task = TASKS[TASK_OF[family]](model=tiny(family, "rope"), task={"kind": TASK_OF[family]})
    with subtests.test("bf16 autocast's training loss is close to float32's"):
        assert_bf16_autocast_training_loss_is_close_to_float32(task, family)
    with subtests.test("masks without padding are left out before transfer, with the same loss"):
        assert_masks_without_padding_are_left_out_with_the_same_loss(task, family)


def assert_chunked_and_full_logits_train_the_same(family, head):
    """The chunked output loss gives the full logits' loss, token counts and gradients."""
    model_cfg = tiny(family, "learned", **head)
    losses, grad_sets = {}, {}
    batch = batch_for(family)
    for output_loss in ("logits", "chunked"):
        torch.manual_seed(0)
        task = TASKS[TASK_OF[family]](
            model=model_cfg,
            task={"kind": TASK_OF[family], "output_loss": output_loss, "loss_chunk": 4, "label_smoothing": 0.1},
        )
        loss, rows, n_tokens = task.training_loss(batch)
        loss.backward()
        losses[output_loss], grad_sets[output_loss] = loss.detach(), grads(task)
        assert rows == batch["labels"].numel() and n_tokens >= batch["input_ids"].numel()
    torch.testing.assert_close(losses["chunked"], losses["logits"], atol=1e-6, rtol=1e-6)
    assert_same_grads(grad_sets["chunked"], grad_sets["logits"], atol=1e-6)


# -- fused QKV projection ----------------------------------------------------------------------


@pytest.mark.parametrize("n_kv_heads", [2, 1])
def test_fused_qkv_projection_equals_three_separate_projections(n_kv_heads):
    """Self-attention runs one (D -> (H + 2·Hkv)·Dh) matmul; its three row blocks are W_q, W_k,
    W_v of the textbook layer (Vaswani et al. 2017), here applied separately with the same
    weights through the reference attention math."""
    model = zoo.build_model(tiny("decoder_only", "none", n_kv_heads=n_kv_heads)).eval()
    attn = model.decoder.layers[0].self_attn
    H, Hkv, Dh = attn.n_heads, attn.n_kv_heads, attn.head_dim
    x = torch.randn(2, 7, 16)
    w_q, w_k, w_v = attn.qkv_proj.weight.split([H * Dh, Hkv * Dh, Hkv * Dh])
    b_q, b_k, b_v = attn.qkv_proj.bias.split([H * Dh, Hkv * Dh, Hkv * Dh])
    q = F.linear(x, w_q, b_q).view(2, 7, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
    k = F.linear(x, w_k, b_k).view(2, 7, Hkv, Dh).transpose(1, 2).repeat_interleave(H // Hkv, 1)  # (B, H, T, Dh)
    v = F.linear(x, w_v, b_v).view(2, 7, Hkv, Dh).transpose(1, 2).repeat_interleave(H // Hkv, 1)
    scores = (q @ k.transpose(-2, -1)) / Dh**0.5  # (B, H, T, T)
    scores = scores.masked_fill(torch.ones(7, 7, dtype=torch.bool).triu(1), float("-inf"))
    ref = attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 7, H * Dh))  # (B, T, D)
    with torch.no_grad():
        got = attn(x, positions=torch.arange(7)[None], position=model.decoder.position_for(0), mask=None, causal=True)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)


# -- activation checkpointing -----------------------------------------------------------------


def assert_checkpointing_gives_the_same_loss_and_gradients(family, position):
    """Recomputing the layers in backward (with the same dropout masks) gives the same loss and gradients."""
    batch = batch_for(family)
    results = {}
    for ckpt in (False, True):
        torch.manual_seed(0)
        task = TASKS[TASK_OF[family]](
            model=tiny(family, position, dropout=0.1, checkpoint_activations=ckpt), task={"kind": TASK_OF[family]}
        )
        task.train()
        torch.manual_seed(1)  # the same dropout masks (checkpointing replays the saved RNG state)
        loss, _, _ = task.training_loss(batch)
        loss.backward()
        results[ckpt] = (loss.detach(), grads(task))
    torch.testing.assert_close(results[True][0], results[False][0], atol=0, rtol=0)
    assert_same_grads(results[True][1], results[False][1], atol=1e-7)


def test_activation_checkpointing_recomputes_in_backward():
    """The checkpointed stack runs every layer's forward a second time during backward."""
    calls = {True: 0, False: 0}
    for ckpt in (False, True):
        model = zoo.build_model(tiny(checkpoint_activations=ckpt)).train()

        def count(*_args, ckpt=ckpt):
            calls[ckpt] += 1

        for layer in model.decoder.layers:
            layer.ff.register_forward_pre_hook(count)
        model(torch.randint(0, 37, (2, 8))).logits.sum().backward()
    n_layers = 2
    assert calls[False] == n_layers and calls[True] == 2 * n_layers


# -- optimizer kernels ------------------------------------------------------------------------


def test_for_loop_foreach_and_fused_adamw_take_the_same_steps():
    torch.manual_seed(0)
    start = zoo.build_model(tiny())
    batch = torch.randint(0, 37, (2, 8))
    finals = {}
    for impl in OptimizerImpl:
        model = copy.deepcopy(start)
        # eps 1e-4: the key bias has a zero gradient up to rounding (softmax ignores a shift of
        # all scores), and Adam would turn each kernel's rounding noise into a full step
        opt = build_optimizer(model, OptimConfig(implementation=impl, lr=1e-2, eps=1e-4))
        assert opt.defaults.get("fused") == (impl == OptimizerImpl.fused or None)
        for _ in range(3):
            opt.zero_grad()
            model(batch).logits.logsumexp(-1).mean().backward()
            opt.step()
        finals[impl] = {n: p.detach().clone() for n, p in model.named_parameters()}
    moved = finals[OptimizerImpl.auto]["embed.weight"] - start.embed.weight
    assert moved.abs().max() > 1e-3  # the steps did change the weights
    for impl, params in finals.items():
        for name, value in params.items():
            torch.testing.assert_close(
                value, finals[OptimizerImpl.for_loop][name], atol=1e-6, rtol=1e-5, msg=f"{impl.value}: {name}"
            )


# -- torch.compile ------------------------------------------------------------------------------


@pytest.mark.slow
def test_compiled_model_gives_the_same_loss_and_gradients():
    batch = batch_for("decoder_only")
    results, state_keys = {}, {}
    for compile_it in (False, True):
        torch.manual_seed(0)
        task = TASKS["causal_lm"](model=tiny("decoder_only", "rope"), task={"kind": "causal_lm", "compile": compile_it})
        loss, _, _ = task.training_loss(batch)
        loss.backward()
        results[compile_it] = (loss.detach(), grads(task))
        state_keys[compile_it] = set(task.state_dict())
    assert state_keys[True] == state_keys[False]  # checkpoints of a compiled run load anywhere
    torch.testing.assert_close(results[True][0], results[False][0], atol=1e-5, rtol=1e-5)
    assert_same_grads(results[True][1], results[False][1], atol=1e-5)


# -- bf16 autocast ------------------------------------------------------------------------------


def assert_bf16_autocast_training_loss_is_close_to_float32(task, family):
    """Under bf16 autocast the loss stays float32 and close to float32's, its gradients finite float32."""
    batch = batch_for(family)
    ref, _, _ = task.training_loss(batch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low, _, _ = task.training_loss(batch)
    assert low.dtype == torch.float32
    torch.testing.assert_close(low, ref, atol=3e-2, rtol=1e-2)
    low.backward()
    assert all(
        p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all() for p in task.parameters() if p.grad is not None
    )


# -- static-shape decoding step ---------------------------------------------------------------


def generation_inputs(family: str):
    ids = torch.randint(4, 37, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    if family == "decoder_only":
        ids[1, :2], mask[1, :2] = 0, 0  # a left-padded prompt
    return ids, mask


def test_static_cache_steps_see_same_shape_tensors():
    layer_cache = StaticKVCache(capacity=12)
    seen = set()
    for T in (4, 1, 1, 1):
        k = torch.randn(1, 2, T, 8)
        keys, values, positions = layer_cache.update(k, k, torch.arange(T)[None])
        seen.add((tuple(keys.shape), tuple(positions.shape), keys.data_ptr()))  # same buffer every step
    assert len(seen) == 1 and next(iter(seen))[:2] == ((1, 2, 12, 8), (1, 12)) and layer_cache.length == 7
    assert (
        torch.equal(keys[:, :, 6:7], k) and not keys[:, :, 7:].any()
    )  # the last step at slot 6; unwritten slots are zeros

    model = zoo.build_model(tiny("decoder_only", "rope")).eval()
    cache = model.new_cache(capacity=12)
    with torch.no_grad():
        model(torch.randint(4, 37, (1, 9)), cache=cache, use_cache=True)
        with pytest.raises(ValueError, match="the static cache holds 12 positions; 9 \\+ 4 do not fit"):
            model(torch.randint(4, 37, (1, 4)), cache=cache, use_cache=True)


@pytest.mark.slow
def test_compiled_static_decoding_gives_the_eager_tokens():
    model = zoo.build_model(tiny("decoder_only", "rope")).eval()
    ids, mask = generation_inputs("decoder_only")
    eager = generate(model, ids, attention_mask=mask, max_new_tokens=8)
    fast = generate(
        model, ids, attention_mask=mask, max_new_tokens=8, config=GenerationConfig(static_cache=True, compile=True)
    )
    assert torch.equal(fast, eager)


@pytest.mark.slow
def test_static_decoding_of_a_model_compiled_in_place_gives_the_eager_tokens():
    """task.compile=true compiles the model in place: the prompt's pass that fills the static
    cache is traced as well (on CUDA its buffers are marked static after that pass)."""
    model = zoo.build_model(tiny("decoder_only", "rope")).eval()
    ids, mask = generation_inputs("decoder_only")
    eager = generate(model, ids, attention_mask=mask, max_new_tokens=8)
    model.compile(backend="eager")
    fast = generate(
        model, ids, attention_mask=mask, max_new_tokens=8, config=GenerationConfig(static_cache=True, compile=True)
    )
    assert torch.equal(fast, eager)


def test_a_model_compiled_in_place_decodes_through_a_second_compilation_only_for_cuda_graphs():
    """The in-place compilation (task.compile=true) has no CUDA graphs; a static step on CUDA asks
    for them, so `compiled` compiles the model's own forward again in mode reduce-overhead."""
    model = zoo.build_model(tiny("decoder_only", "rope")).eval()
    model.compile(backend="eager")
    assert compiled(model) is model
    graphs = compiled(model, cuda_graphs=True)
    assert graphs is not model and compiled(model, cuda_graphs=True) is graphs  # made once, reused
    plain = zoo.build_model(tiny("decoder_only", "rope")).eval()
    assert compiled(plain) is not plain and compiled(plain) is compiled(plain)


def test_a_compiled_model_goes_when_its_model_goes():
    """`compiled` keeps the compiled forward on the model, so it adds no parameters and does not
    keep a model alive that nothing else holds (a table keyed by the model would: its value,
    the compiled module, holds the model)."""
    import gc
    import weakref

    model = zoo.build_model(tiny("decoder_only", "rope")).eval()
    names = set(model.state_dict())
    fast = compiled(model)
    assert compiled(model) is fast and set(model.state_dict()) == names
    gone = weakref.ref(model)
    del model, fast
    gc.collect()
    assert gone() is None


def test_static_cache_needs_the_cache():
    with pytest.raises(ConfigError, match="static_cache=true needs use_cache=true"):
        GenerationConfig(static_cache=True, use_cache=False)


# -- one relative bias per stack forward --------------------------------------------------------


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_shared_bias_is_computed_once_per_stack_forward(checkpointed):
    """T5's bias table lookup runs once per stack, not once per layer (Raffel et al. 2020
    share it the same way); under activation checkpointing each layer recomputes its own."""
    n_layers = 3
    model = zoo.build_model(
        tiny("decoder_only", "relative", n_layers=n_layers, checkpoint_activations=checkpointed)
    ).train()
    with profile() as prof:
        model(torch.randint(4, 37, (2, 8))).logits.sum()
    lookups = next(e.count for e in prof.key_averages() if e.key == "aten::embedding")
    assert lookups == 1 + (n_layers if checkpointed else 1)  # the token embedding + the bias table


@pytest.mark.parametrize("host_branch", [True, False], ids=["cpu-eager", "accelerator-or-compiled"])
def test_both_softmax_paths_of_the_chunked_loss_agree(host_branch):
    """The branch-free path (accelerators, torch.compile) and the CPU path give the same
    probabilities and log-normaliser, also where the target's probability underflows."""
    from zoo.nn.chunked_loss import _softmax_and_lse

    logits = torch.randn(12, 40, dtype=torch.float32) * 40.0  # some rows with p_t ~ 0
    targets = torch.randint(0, 40, (12, 1))
    logit_t = logits.gather(1, targets).squeeze(1)
    probs, lse = _softmax_and_lse(logits.clone(), targets, logit_t, host_branch)
    torch.testing.assert_close(probs, torch.softmax(logits, dim=-1), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lse, torch.logsumexp(logits, dim=-1), atol=1e-5, rtol=1e-6)


def assert_masks_without_padding_are_left_out_with_the_same_loss(task, family):
    """On the CPU, before the batch moves to the device: a mask of all ones goes (the model then
    needs no host read to take the unmasked kernels), a mask with padding stays."""
    padded = batch_for(family)
    full = {
        **padded,
        "attention_mask": torch.ones_like(padded["attention_mask"]),
        "labels": padded["labels"].masked_fill(padded["labels"] == -100, 5),
    }
    if family == "encoder_decoder":
        full["decoder_attention_mask"] = torch.ones_like(full["decoder_input_ids"])
    from zoo.data.collate.padding import without_full_masks
    from zoo.data.datamodule import ZooDataModule

    assert ZooDataModule.on_before_batch_transfer is not L.LightningDataModule.on_before_batch_transfer
    assert without_full_masks(padded)["attention_mask"] is padded["attention_mask"]
    fed = without_full_masks(full)
    assert "attention_mask" not in fed and "decoder_attention_mask" not in fed
    torch.testing.assert_close(task.training_loss(fed)[0], task.training_loss(full)[0])


def test_tf32_is_left_alone_off_cuda():
    """task.tf32 sets TF32 matmuls on CUDA only; a CPU run keeps the process's setting."""
    task = TASKS["causal_lm"](model=tiny("decoder_only", "rope"), task={"kind": "causal_lm", "tf32": True})
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        task.on_fit_start()
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(previous)


def test_output_loss_auto_is_chunked_on_the_cpu(monkeypatch):
    """auto = the chunked loss on the CPU: the (N, V) logits are never built whole there."""
    import zoo.models.base as base

    calls = []
    real = base.chunked_linear_cross_entropy
    monkeypatch.setattr(base, "chunked_linear_cross_entropy", lambda *a, **k: calls.append(k["chunk"]) or real(*a, **k))
    torch.manual_seed(0)
    task = TASKS["causal_lm"](model=tiny("decoder_only", "rope"), task={"kind": "causal_lm", "loss_chunk": 4})
    assert task.task_config.output_loss.value == "auto"
    task.training_loss(batch_for("decoder_only"))
    assert calls == [4]
