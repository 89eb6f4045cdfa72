"""The GPU habits of zoo's training step and decoder, checked on a CUDA device: the output loss
auto picks the full-logits kernel there and agrees with the chunked one (and Liger-Kernel's where
installed), the compiled training loss equals the eager one, AdamW is fused, float32 matmuls use
TF32 in training, and the static decoding step replays as a CUDA graph with the eager tokens. (No
host sync in an eager training step is a check of each training row of `test_models_cuda.py`.)"""

from __future__ import annotations

import importlib.util

import pytest
import torch

import zoo
from tests.conftest import CAUSAL_FAMILIES, FAMILIES, tiny
from tests.gpu.conftest import BF16_TOL, DEVICE, fed_batch, no_waits, prompts, tiny_task
from zoo.config.schema.train import OptimConfig
from zoo.models.generate import GenerationConfig, generate
from zoo.tasks.optim import build_optimizer

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_output_losses_agree_on_cuda(subtests, family):
    """Each family's default task on the device: output_loss auto is the full-logits loss and the
    chunked one equals it, and Liger-Kernel's (where installed) equals it, losses and gradients."""
    with subtests.test("output_loss auto is full logits on CUDA and equals chunked"):
        losses, grads = {}, {}
        for output_loss in ("auto", "logits", "chunked"):
            task = tiny_task(family, "rope", output_loss=output_loss, loss_chunk=8)
            loss, _, _ = task.training_loss(fed_batch(family))
            loss.backward()
            losses[output_loss] = loss.detach()
            grads[output_loss] = {n: p.grad.clone() for n, p in task.named_parameters() if p.grad is not None}
        assert torch.equal(losses["auto"], losses["logits"])
        torch.testing.assert_close(losses["chunked"], losses["logits"], atol=1e-5, rtol=1e-5)
        for name, grad in grads["logits"].items():
            torch.testing.assert_close(grads["chunked"][name], grad, atol=1e-5, rtol=1e-4, msg=name)
    with subtests.test("the Liger loss equals the full logits loss"):
        if importlib.util.find_spec("liger_kernel") is None:  # an optional extra: this check alone is skipped
            pytest.skip("liger-kernel is not installed (pip install '.[liger]')")
        results = {}
        for output_loss in ("logits", "liger"):
            task = tiny_task(family, "rope", output_loss=output_loss)
            loss, _, _ = task.training_loss(fed_batch(family))
            loss.backward()
            results[output_loss] = (
                loss.detach(),
                {n: p.grad.clone() for n, p in task.named_parameters() if p.grad is not None},
            )
        torch.testing.assert_close(results["liger"][0], results["logits"][0], atol=1e-4, rtol=1e-4)
        for name, grad in results["logits"][1].items():
            torch.testing.assert_close(results["liger"][1][name], grad, atol=1e-4, rtol=1e-3, msg=name)


@pytest.mark.parametrize("output_loss", ["logits", "chunked"])
@pytest.mark.parametrize("position", ["learned", "rope", "relative", "alibi"])
def test_the_compiled_training_loss_equals_eager_in_bf16(position, output_loss):
    results = {}
    for compiled in (False, True):
        task = tiny_task("decoder_only", position, compile=compiled, output_loss=output_loss)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, _, _ = task.training_loss(fed_batch("decoder_only"))
        loss.backward()
        results[compiled] = (loss.detach().float(), task.model.embed.weight.grad.float())
    torch.testing.assert_close(results[True][0], results[False][0], atol=BF16_TOL, rtol=BF16_TOL)
    scale = results[False][1].abs().max()
    assert (results[True][1] - results[False][1]).abs().max() <= BF16_TOL * scale


def test_adamw_is_fused_and_tf32_is_on_in_training_by_default():
    task = tiny_task("decoder_only", "rope")
    optimizer = build_optimizer(task, OptimConfig(), output_embedding=task.model.lm_head.weight)
    assert optimizer.defaults["fused"] is True
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        task.on_fit_start()
        assert torch.get_float32_matmul_precision() == "high"
        torch.set_float32_matmul_precision("highest")
        tiny_task("decoder_only", "rope", tf32=False).on_fit_start()
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(previous)


def _replays_cuda_graphs(prof) -> bool:
    names = " ".join(e.name for e in prof.events()).lower()
    return "cudagraph" in names or "graph_replay" in names or "cudagraphlaunch" in names


def test_static_decoding_of_a_model_compiled_in_place_replays_cuda_graphs_with_the_eager_tokens():
    """task.compile=true compiles the model in place, so the prompt's pass, which allocates the
    static cache, is traced too, where dynamo refuses `mark_static_address` (zoo-bench's
    generation stopped on it on an H200, torch 2.11): the buffers are marked after that pass.
    The in-place compilation has no CUDA graphs (zoo-bench's compiled decoding ran slower than
    eager on an H100): the steps run a second compilation of `forward` that has them."""
    torch.manual_seed(0)
    model = zoo.build_model(tiny("decoder_only", "rope", d_model=64, n_heads=2, max_seq_len=64)).to(DEVICE).eval()
    ids, _ = prompts("decoder_only")
    ids = ids.to(DEVICE)
    eager = generate(model, ids, max_new_tokens=10)
    model.compile()
    config = GenerationConfig(static_cache=True, compile=True)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]
    ) as prof:
        generate(model, ids, max_new_tokens=10, config=config)
        fast = generate(model, ids, max_new_tokens=10, config=config)  # the second call replays
    assert torch.equal(fast, eager)
    assert _replays_cuda_graphs(prof), "no CUDA graph replay seen in the profile"


@pytest.mark.parametrize("position", ["learned", "rope", "relative"])
@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_static_decoding_replays_cuda_graphs_with_the_eager_tokens(family, position):
    torch.manual_seed(0)
    model = zoo.build_model(tiny(family, position, d_model=64, n_heads=2, max_seq_len=64)).to(DEVICE).eval()
    ids, _ = prompts(family)
    ids = ids.to(DEVICE)
    bos = 1 if family == "encoder_decoder" else None
    eager = generate(model, ids, max_new_tokens=10, bos_id=bos)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]
    ) as prof:
        fast = generate(
            model, ids, max_new_tokens=10, bos_id=bos, config=GenerationConfig(static_cache=True, compile=True)
        )
        fast = generate(
            model,
            ids,
            max_new_tokens=10,
            bos_id=bos,  # the second call replays
            config=GenerationConfig(static_cache=True, compile=True),
        )
    assert torch.equal(fast, eager)
    assert _replays_cuda_graphs(prof), "no CUDA graph replay seen in the profile"


@torch.no_grad()
def test_compiled_greedy_decoding_reads_the_host_only_to_ask_whether_to_stop():
    """compile=true over a static cache: after a warm-up call (compilation, graph capture), a
    whole generate call of 24 tokens without an end token never waits for the GPU until its
    output is read (torch.cuda.set_sync_debug_mode("error") raises on any synchronising call),
    and gives plain greedy decoding's tokens."""
    torch.manual_seed(0)
    model = zoo.build_model(tiny("decoder_only", "rope", d_model=64, n_heads=2, max_seq_len=64)).to(DEVICE).eval()
    ids = torch.randint(4, 37, (1, 6), device=DEVICE)
    config = GenerationConfig(static_cache=True, compile=True, max_new_tokens=24)
    plain = generate(model, ids, max_new_tokens=24)
    generate(model, ids, config=config)  # compile and capture
    with no_waits():
        fast = generate(model, ids, config=config)
    assert torch.equal(fast.cpu(), plain.cpu())


@torch.no_grad()
def test_compiled_sampling_never_waits_for_the_gpu_and_is_seeded():
    """compile=true sampling over a static cache (the draw inside the step, every uniform drawn
    before the first): after a warm-up call, a whole call of 24 tokens runs under
    torch.cuda.set_sync_debug_mode("error"), a seed gives its tokens again, and top_k=1 gives
    plain greedy's."""
    torch.manual_seed(0)
    model = zoo.build_model(tiny("decoder_only", "rope", d_model=64, n_heads=2, max_seq_len=64)).to(DEVICE).eval()
    ids = torch.randint(4, 37, (2, 6), device=DEVICE)
    config = GenerationConfig(static_cache=True, compile=True, max_new_tokens=24, strategy="sample", seed=5)
    first = generate(model, ids, config=config)  # compile and capture
    with no_waits():
        again = generate(model, ids, config=config)
    assert torch.equal(first.cpu(), again.cpu())
    greedy = GenerationConfig(static_cache=True, compile=True, max_new_tokens=24, strategy="sample", top_k=1, seed=6)
    assert torch.equal(generate(model, ids, config=greedy).cpu(), generate(model, ids, max_new_tokens=24).cpu())
