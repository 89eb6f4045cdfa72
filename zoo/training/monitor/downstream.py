"""`Downstream`: lm-evaluation-harness task scores during training (`callbacks.downstream`), the
way OLMo's in-loop downstream evaluations run: at each validation (or every
`callbacks.downstream_every` optimizer steps), the tasks are scored on the model being trained,
through the harness model adapter (`zoo.harness.adapter.ZooLM`) and the run's own tokenizer, on
`callbacks.downstream_limit` examples of each.

The scores are named as zoo-eval names them (`harness/TASK/METRIC`) and go to every logger at
the step the validation metrics of the same moment are logged at; the last ones join summary.json's metrics, where
zoo-compare ranks arms on them. Every score so far is kept in the callback's state, saved in
each checkpoint: a resumed run keeps its history and does not score a step twice.

The evaluation changes nothing of the training: the model's train/eval mode is restored, and
the random states the harness seeds (Python, NumPy, torch, CUDA) are put back as they were, so
a run with downstream tasks draws the same dropout masks and batches as one without. Under data
parallelism every rank scores the same examples (a sharded model needs every rank in its
forward); the loggers write rank 0's."""

from __future__ import annotations

import random

import lightning as L
import numpy as np
import torch

from zoo.harness.adapter import ZooLM
from zoo.harness.run import check_room, evaluate_tasks, load_tasks


class Downstream(L.Callback):
    """Scores `tasks` at each validation (`every` None) or every `every` optimizer steps, and at
    the last step (before that step's last.ckpt, placed after this callback, is written; `final`
    when the run ends elsewhere), each step once."""

    def __init__(
        self,
        tasks: list[str],
        *,
        every: int | None,
        limit: float | None,
        batch_size: int,
        positions: int | None = None,
    ) -> None:
        self.tasks, self.every, self.limit, self.batch_size = list(tasks), every, limit, batch_size
        # loaded once, before the model is built: an unknown name, a dataset that cannot be had (an
        # unreachable Hub) or a generation past the model's `positions` is refused before training
        self.loaded = load_tasks(self.tasks)
        check_room(self.loaded, positions)
        self.history: list[dict] = []  # {"step": s, metric: value, ...} per evaluation
        self.last: dict[str, float] = {}

    @property
    def state_key(self) -> str:
        return "Downstream"

    def state_dict(self) -> dict:
        return {"history": list(self.history), "last": dict(self.last)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.history = list(state_dict.get("history", []))
        self.last = dict(state_dict.get("last", {}))

    @property
    def scored_step(self) -> int | None:
        return self.history[-1]["step"] if self.history else None

    def on_validation_end(self, trainer, pl_module) -> None:
        if self.every is None and not trainer.sanity_checking:
            self.score(trainer, pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        final = 0 < trainer.max_steps <= step  # the last step: scored before its last.ckpt is written
        if step > 0 and (final or (self.every is not None and step % self.every == 0)):
            self.score(trainer, pl_module)

    def final(self, trainer, pl_module) -> dict[str, float]:
        """The scores at the run's last step (scored now unless they were at that step)."""
        self.score(trainer, pl_module)
        return dict(self.last)

    def score(self, trainer, pl_module) -> None:
        # the step the last optimizer step is logged at (0-based), as Lightning logs the
        # validation after it
        step = max(trainer.global_step - 1, 0)
        if step == self.scored_step:
            return
        python, numpy = random.getstate(), np.random.get_state()
        try:
            with torch.random.fork_rng(devices=[pl_module.device] if pl_module.device.type == "cuda" else []):
                lm = ZooLM(pl_module.model, pl_module.tokenizer, batch_size=self.batch_size)
                metrics = evaluate_tasks(lm, self.loaded, limit=self.limit)["metrics"]
        finally:
            random.setstate(python)
            np.random.set_state(numpy)
        self.last = metrics
        self.history.append({"step": step, **metrics})
        for logger in trainer.loggers:  # at this step, like the validation metrics
            logger.log_metrics(metrics, step=step)
            logger.save()
