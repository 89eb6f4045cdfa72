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
    check_resume({"optim": {"lr": 0.003, "implementation": "auto"}},
                 {"optim": {"lr": 0.003, "implementation": "foreach"}}, "the checkpoint")
