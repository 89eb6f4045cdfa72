"""Every preset's training step (forward, loss and backward) is one graph under torch.compile:
traced by Dynamo with `fullgraph=True` (which fails at the first graph break) through
AOTAutograd (backend "aot_eager", which traces the backward too), on the CPU, with the compiled
loss equal to the eager one. The presets are read from `conf/model/`, so a new preset is held to
it as soon as its YAML exists.

The one exception is stated and held here too: a mixture of experts over the CPU's per-expert
loop reads its row counts on the host, a break in each mixture layer; over the grouped GEMM (the
default on CUDA in bfloat16, `zoo.nn.moe`) the same presets are one graph."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch._dynamo

import zoo
from tests.perf.conftest import TASK_OF, batch_for
from zoo.config import as_model_config
from zoo.config.schema.task import OutputLoss
from zoo.models.base import ZooModel
from zoo.nn.moe import moe_layers
from zoo.tasks import TASKS

PRESETS = sorted(p.stem for p in (Path(zoo.__file__).parent.parent / "conf" / "model").glob("*.yaml"))
# dropout off: the compiled and eager steps draw different masks
SMALL = [
    "model.d_model=32",
    "model.n_heads=2",
    "model.n_layers=2",
    "model.vocab_size=37",
    "model.max_seq_len=32",
    "model.dropout=0.0",
]


LAYERS = {
    "smollm3": 4,
    "gdn_hybrid": 4,
    "qwen3_next": 4,
    "bamba": 4,
}  # its NoPE layer is the 4th; the hybrid's full layer is its 4th
# experts the grouped GEMM cannot run (it takes no per-expert bias): the loop's break, as above
LOOP_ONLY = {"gpt_oss"}


def _task(preset: str, dispatch: str = "grouped"):
    layers = f"model.n_layers={LAYERS.get(preset, 2)}"
    model = as_model_config(zoo.compose([f"model={preset}", *SMALL, layers]).model)
    family = model.family.value
    torch.manual_seed(0)
    task = TASKS[TASK_OF[family]](model=model.to_dict(), task={"kind": TASK_OF[family]})
    for layer in moe_layers(task.model):
        layer.dispatch = dispatch
    return task, batch_for(family)


def _compiled_and_eager(task, batch):
    inputs, labels, _ = task.model_inputs(batch)
    options = dict(chunk=4, sparse_targets=task.sparse_targets, output_loss=OutputLoss.chunked)
    torch._dynamo.reset()
    step = torch.compile(ZooModel.forward_loss, backend="aot_eager", fullgraph=True)
    compiled = step(task.model, inputs, labels, **options)
    compiled.backward()
    grads = [p.grad.clone() for p in task.model.parameters() if p.grad is not None]
    task.model.zero_grad()
    eager = task.model.forward_loss(inputs, labels, **options)
    eager.backward()
    again = [p.grad for p in task.model.parameters() if p.grad is not None]
    return compiled, eager, grads, again


def test_the_presets_are_found():
    assert {"gpt", "llama", "bert", "t5", "mixtral"} <= set(PRESETS)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.slow
def test_a_presets_training_step_is_one_graph(preset):
    if preset in LOOP_ONLY:
        task, batch = _task(preset, dispatch="loop")
        with pytest.raises(Exception, match="(?i)data-dependent|graph break|unsupported"):
            _compiled_and_eager(task, batch)
        return
    task, batch = _task(preset)
    compiled, eager, grads, again = _compiled_and_eager(task, batch)
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
    assert len(grads) == len(again) > 0
    for g, e in zip(grads, again):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_the_cpu_expert_loop_breaks_the_graph_as_documented():
    task, batch = _task("mixtral", dispatch="loop")
    with pytest.raises(Exception, match="(?i)data-dependent|graph break|unsupported"):
        _compiled_and_eager(task, batch)
