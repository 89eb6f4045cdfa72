"""A run's validation curve reads tokens seen at each validation from metrics.csv, also when the
validation step has no training row of its own (the interval is not a multiple of
log_every_n_steps): the tokens then scale from the nearest logged step."""

from __future__ import annotations

from zoo.compare.runs import read_curve


def test_validation_points_get_the_tokens_of_their_step(tmp_path):
    path = tmp_path / "metrics.csv"
    rows = ["epoch,step,train/loss,tokens_seen,val/loss"]
    rows += [f"0,{s},1.0,{(s + 1) * 128}," for s in (9, 19, 29)]  # 128 tokens a step, logged every 10
    rows += ["0,14,,,2.5", "0,29,,,2.0", "0,4,,,3.0"]  # validations at steps 15, 30 and 5
    path.write_text("\n".join(rows) + "\n")
    curve, last = read_curve(path)
    assert curve == [(15 * 128, 2.5), (30 * 128, 2.0), (5 * 128, 3.0)]
    assert last == {"val/loss": 3.0}
