"""Fitting a claimed run (`zoo.run.preflight.claim_run`: the config validated, the machine checked,
the checkpoint to resume found): `fit_run` builds its parts (callbacks, loggers, the Trainer, the
data and the task), fits, and finishes (final checkpoints and summary.json, which the experiment
trackers receive before their runs end); `fit` is Lightning's fit, what ends it early, and a
validation of the final step when the run ended between validations. The run directory's names
are `RunDir`'s."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.utilities.exceptions import MisconfigurationException, SIGTERMException

from zoo.config.errors import ConfigError
from zoo.config.schema.root import ZooConfig
from zoo.tasks.base import NonFiniteLoss
from zoo.training.callbacks import RunCallbacks, build_callbacks
from zoo.training.checkpoint.files import read_checkpoint
from zoo.training.finish import RunResult, finish
from zoo.training.origin import RunOrigin
from zoo.training.parts import build_data, build_task, build_trainer, split_batch
from zoo.training.quiet import quiet_lightning
from zoo.training.resume.point import Resume
from zoo.training.signals.interrupt import StopNow, ValidationStopped
from zoo.training.start import record_start
from zoo.training.stops import TrainingInterrupted, TrainingStopped
from zoo.training.tracking.identity import closing_trackers
from zoo.training.tracking.loggers import build_loggers

log = logging.getLogger("zoo")


def fit_run(
    spec: ZooConfig, run_dir: Path, resume: Resume, composed: Mapping[str, Any], origin: RunOrigin
) -> RunResult:
    """Train the claimed run (`spec`, continuing `resume`); the summary is also written to
    run_dir/summary.json. `composed`: the config it was validated from, resolved to plain data,
    which the run records as it is (config.yaml, the experiment trackers) and reads nothing
    from; `origin`: the command it came from, which the records name. Python callers use `zoo.train`, which claims it first."""
    import lightning as L

    quiet_lightning()
    L.seed_everything(spec.seed, workers=True, verbose=False)
    run_dir.mkdir(parents=True, exist_ok=True)
    callbacks = build_callbacks(spec, run_dir, resume.data_changed)
    # a signal from here to fit (the tokenizer, the data, the model) stops the run at once, with
    # the records of a stop in training; fit then takes the signals over
    with callbacks.interrupt.preparing():
        loggers = build_loggers(spec, composed, run_dir, resume.step, origin)
        trainer = build_trainer(spec, run_dir, callbacks.all, loggers)
        device_batch = split_batch(spec, trainer)
        datamodule = build_data(spec, device_batch)
        task = build_task(spec, datamodule, resume.path)
        record_start(composed, spec, run_dir, task, trainer, origin)
        with closing_trackers(loggers) as tracked:  # MLflow / W&B runs end after the summary
            wall = fit(trainer, task, datamodule, callbacks, resume.path)
            result = finish(spec, run_dir, trainer, task, datamodule, callbacks, resume, wall)
            if result.summary is not None:  # a requeued run's trackers go on in its next job
                tracked.record(result.summary.as_dict())
    return result


def fit(trainer, task, datamodule, callbacks: RunCallbacks, resume: str | None) -> float:
    """Train (from `resume` when set); the wall-clock seconds of fit and the final validation.
    TrainingStopped for a non-finite loss (task.on_nonfinite_loss=stop), naming the last good
    checkpoint; TrainingInterrupted after SIGTERM / SIGINT saved last.ckpt."""
    start = time.perf_counter()
    callbacks.interrupt.arm()  # from here to the end of the final validation no signal is lost
    try:
        _train(trainer, task, datamodule, callbacks, resume)
        if callbacks.final.needed(trainer) and not callbacks.requeued:
            _validate_final_step(trainer, task, datamodule, callbacks)
    except Exception as exc:  # a collective that failed because a rank died: the record names the rank
        died = callbacks.rank_watch.died if callbacks.rank_watch is not None else None
        if died is None:
            raise
        raise TrainingStopped(died) from exc
    except StopNow as exc:  # a second signal, or a step longer than the grace time: nothing saved now
        saved, step = callbacks.last.latest()  # last.ckpt, else a best-STEP one a validation wrote
        log.info("%s; the last checkpoint saved before: %s", exc, saved if step is not None else "none")
        raise TrainingInterrupted(exc.signum, step, saved, why=str(exc)) from None
    finally:
        callbacks.interrupt.disarm()
    return time.perf_counter() - start


def _train(trainer, task, datamodule, callbacks: RunCallbacks, resume: str | None) -> None:
    last, interrupt = callbacks.last, callbacks.interrupt
    try:
        trainer.fit(task, datamodule=datamodule, ckpt_path=resume, weights_only=True)
    except ValidationStopped:
        pass  # a signal during a validation: last.ckpt saved as of its start (interrupt.stopped_at)
    except SIGTERMException:  # Lightning's handler saw it before training began (the sanity check),
        # and its SystemExit would end the command with status 0: a stop before the first step
        raise StopNow(signal.SIGTERM, "before the first training step") from None
    except MisconfigurationException as exc:  # a setting Lightning refuses once it sees the data, e.g. a
        # trainer.limit_train_batches fraction that leaves no batch: the run trained nothing
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise ConfigError(f"Lightning refuses the trainer settings: {first}") from None
    except NonFiniteLoss as exc:
        kept = (
            f"the last good checkpoint is {last.path} (step {read_checkpoint(last.path, weights=False)['global_step']})"
            if last.path.exists()
            else "no checkpoint had been written yet"
        )
        raise TrainingStopped(
            f"{exc}; training stopped, {kept}; lower optim.lr, keep "
            f"trainer.gradient_clip_val, or set task.on_nonfinite_loss=skip"
        ) from None
    if interrupt.stopped_at is not None:
        assert interrupt.signum is not None  # set with stopped_at: the signal it stopped for
        raise TrainingInterrupted(interrupt.signum, interrupt.stopped_at, last.path)


def _validate_final_step(trainer, task, datamodule, callbacks: RunCallbacks) -> None:
    """The run ended between validations: its summary reports the weights it ends with. A signal
    here (or one since training ended) saves the trained state and ends like one in training."""
    last, interrupt, final = callbacks.last, callbacks.interrupt, callbacks.final
    before = f"the last validation was at step {final.step}" if final.step is not None else "no validation before it"
    log.info("validating the final step %d (%s)", trainer.global_step, before)
    # logged at the step a validation inside fit would use for this step (one less than the
    # count of finished steps), so metrics.csv reads the same either way
    loop = trainer.fit_loop.epoch_loop
    loop._batches_that_stepped -= 1
    stopped: int | None = None
    interrupt.listen()
    try:
        trainer.validate(task, datamodule=datamodule, verbose=False)
    except ValidationStopped as exc:
        stopped = exc.signum
    except SIGTERMException:  # Lightning's handler (it calls ours too) ends its loop as a SystemExit(0)
        stopped = signal.SIGTERM
    finally:
        loop._batches_that_stepped += 1
        interrupt.done_listening()
    stopped = stopped or interrupt.received
    if stopped:
        log.info(
            "%s during the final validation: saving %s at step %d and stopping",
            signal.Signals(stopped).name,
            last.path,
            trainer.global_step,
        )
        last.save(trainer)
        raise TrainingInterrupted(stopped, trainer.global_step, last.path)
