"""The training loss (stack, output head and loss) of every family × position scheme is one
graph under torch.compile: no host sync, no data-dependent branch, no graph break. Traced with
Dynamo alone (backend "eager", fullgraph=True fails on the first break), which is what decides
the graph; the compiled result must equal the eager one.

And in eager mode off the CPU the step reads no value on the host (each read is a sync that
stalls the accelerator's queue): run on the `meta` device, where any such read raises."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch._dynamo

from tests.conftest import tiny
from tests.covering import cases, model_axes
from tests.perf.conftest import TASK_OF, batch_for
from zoo.config.schema.task import OutputLoss
from zoo.models.base import ZooModel
from zoo.tasks import TASKS


def _task(family: str, position: str, **model):
    torch.manual_seed(0)
    return TASKS[TASK_OF[family]](model=tiny(family, position, **model), task={"kind": TASK_OF[family]})


def _one_graph_loss(task, batch, **options):
    """(compiled loss, eager loss) of the task's forward_loss; raises on a graph break."""
    torch._dynamo.reset()
    inputs, labels, _ = task.model_inputs(batch)
    options = dict(chunk=4, sparse_targets=task.sparse_targets, **options)
    graph = torch.compile(ZooModel.forward_loss, backend="eager", fullgraph=True)
    return graph(task.model, inputs, labels, **options), task.model.forward_loss(inputs, labels, **options)


# every pair of family x position x output loss: 21 of the product's 42, a task each
@pytest.mark.parametrize(
    "family, position, output_loss", cases({**model_axes("family", "position"), "loss": ["chunked", "logits"]})
)
@pytest.mark.slow
def test_a_rows_training_loss_is_one_graph_and_reads_no_value_off_the_cpu(subtests, family, position, output_loss):
    """The loss is one graph and equals eager; and forward, loss and backward on `meta` tensors
    (shapes only: `.item()`, `bool(t)` and `int(t)` raise there) run. Masked LM drops its
    untargeted rows with one read (sparse targets: 6x less output head); that choice is switched
    off on `meta` to check the rest of the path."""
    with subtests.test("one graph"):
        task = _task(family, position)
        compiled, eager = _one_graph_loss(task, batch_for(family), output_loss=OutputLoss(output_loss))
        torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
    with subtests.test("no host read off the CPU"):
        task = _task(family, position).to("meta")
        task.sparse_targets = False
        task.task_config = replace(task.task_config, output_loss=OutputLoss(output_loss))  # the config is frozen
        batch = {key: value.to("meta") for key, value in batch_for(family).items()}
        loss, _, _ = task.training_loss(batch)
        loss.backward()
        assert loss.device.type == "meta" and loss.shape == ()
        assert all(p.grad is not None and p.grad.device.type == "meta" for p in task.model.parameters())


@pytest.mark.parametrize(
    "options",
    [
        dict(norm_type="rmsnorm", activation="swiglu", n_heads=4, n_kv_heads=2, tie_embeddings=False),
        dict(norm="post", activation="gelu_tanh", checkpoint_activations=True),
    ],
    ids=["llama-like", "post-norm-checkpointed"],
)
@pytest.mark.slow
def test_model_options_keep_one_graph(options):
    task = _task("decoder_only", "rope", **options)
    compiled, eager = _one_graph_loss(task, batch_for("decoder_only"))
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_bf16_autocast_keeps_one_graph():
    task = _task("decoder_only", "learned")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compiled, eager = _one_graph_loss(task, batch_for("decoder_only"))
    torch.testing.assert_close(compiled, eager, atol=2e-2, rtol=2e-2)


@pytest.mark.slow
def test_label_smoothing_keeps_one_graph():
    task = _task("encoder_decoder", "relative")
    compiled, eager = _one_graph_loss(task, batch_for("encoder_decoder"), label_smoothing=0.1)
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_a_host_sync_in_the_loss_is_caught():
    """The check itself can fail: a data-dependent branch in the loss breaks the graph."""
    task = _task("decoder_only", "learned")

    def synced(model, inputs, labels, **options):
        loss = ZooModel.forward_loss(model, inputs, labels, **options)
        return loss * 2 if bool(loss > 0) else loss

    inputs, labels, _ = task.model_inputs(batch_for("decoder_only"))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="(?i)graph break|data-dependent|item"):
        torch.compile(synced, backend="eager", fullgraph=True)(task.model, inputs, labels)


def test_a_host_read_off_the_cpu_is_caught():
    """The meta check can fail: the CPU-only id check forced on raises there."""
    task = _task("decoder_only", "learned").to("meta")
    batch = {key: value.to("meta") for key, value in batch_for("decoder_only").items()}
    with pytest.raises((RuntimeError, NotImplementedError), match="(?i)meta"):
        int(batch["input_ids"].max())
    task.model.embed.forward = lambda ids: int(ids.max())  # a module that reads a value
    with pytest.raises((RuntimeError, NotImplementedError), match="(?i)meta"):
        task.training_loss(batch)
