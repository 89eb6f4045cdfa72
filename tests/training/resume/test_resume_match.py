"""The refusal of a resume whose command differs from its checkpoint names the overrides that
would make the command describe the checkpoint's run."""

from __future__ import annotations

import pytest

from zoo.training.resume.match import ResumeMismatch, check_resume


def test_a_refused_resume_names_the_overrides_that_match_the_checkpoint():
    saved = {"scheduler": {"warmup_steps": 2, "kind": "cosine"}, "optim": {"lr": 0.003, "betas": [0.9, 0.95]}}
    command = {"scheduler": {"warmup_steps": 3, "kind": "cosine"}, "optim": {"lr": 0.01, "betas": [0.9, 0.99]}}
    with pytest.raises(ResumeMismatch) as caught:
        check_resume(saved, command, "the checkpoint")
    message = str(caught.value)
    assert "(add scheduler.warmup_steps=2 optim.betas=[0.9,0.95] optim.lr=0.003)" in message, message


def test_what_may_change_on_resume_is_not_refused():
    check_resume(
        {"optim": {"lr": 0.003, "implementation": "auto"}},
        {"optim": {"lr": 0.003, "implementation": "foreach"}},
        "the checkpoint",
    )


def test_a_checkpoint_from_before_muon_and_wsd_resumes_at_their_keys_defaults():
    """A checkpoint written before optim's Muon keys and scheduler's WSD keys existed ran at their
    defaults: the command at those defaults continues it; a command that changes one is refused."""
    from zoo.config.records.hparams import from_hparams
    from zoo.config.schema.convert import plain
    from zoo.config.schema.train import OptimConfig, SchedulerConfig
    from zoo.training.resume.match import saved_sections

    old = {
        "model": {},
        "task": {"kind": "causal_lm"},
        "optim": {
            "kind": "adamw",
            "lr": 3e-4,
            "betas": [0.9, 0.95],
            "eps": 1e-8,
            "weight_decay": 0.1,
            "implementation": "auto",
        },
        "scheduler": {"kind": "cosine", "warmup_steps": 100, "min_lr_ratio": 0.1, "total_steps": None},
    }
    command = {"optim": plain(OptimConfig()), "scheduler": plain(SchedulerConfig())}
    check_resume(saved_sections(from_hparams(old)), command, "the checkpoint")
    with pytest.raises(ResumeMismatch, match="optim.kind='adamw' in the checkpoint, 'muon' here"):
        check_resume(
            saved_sections(from_hparams(old)), {**command, "optim": plain(OptimConfig(kind="muon"))}, "the checkpoint"
        )


def test_a_checkpoint_from_before_the_router_losses_resumes_at_their_defaults():
    """task.moe_balance and task.moe_router_z did not exist before the mixture of experts: an older
    checkpoint's task ran at their defaults (they act on mixture layers only)."""
    from zoo.config.records.hparams import from_hparams
    from zoo.config.schema.convert import plain
    from zoo.config.schema.task import TaskConfig
    from zoo.training.resume.match import saved_sections

    command = {"task": plain(TaskConfig())}
    old = {"model": {}, "task": {k: v for k, v in command["task"].items() if k not in ("moe_balance", "moe_router_z")}}
    check_resume(saved_sections(from_hparams(old)), command, "the checkpoint")
    with pytest.raises(ResumeMismatch, match="task.moe_balance=0.01 in the checkpoint, 0.0 here"):
        check_resume(saved_sections(from_hparams(old)), {"task": plain(TaskConfig(moe_balance=0))}, "the checkpoint")
