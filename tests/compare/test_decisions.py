def test_a_skewed_bootstrap_whose_mean_lies_outside_its_interval_is_drawn(tmp_path):
    """Most draws agree and a few do not: the mean (0.98) lies below the percentile interval
    [1, 1], and the prediction below its own; the plot draws both (matplotlib refuses a negative
    error bar, which was a traceback of zoo-compare)."""
    from zoo.compare.decisions_plot import plot_decisions
    from zoo.compare.transfer import Decisions, Prediction, SizeDecision

    found = Decisions(
        key="model.d_model",
        rate=0.8,
        largest=256,
        sizes=[SizeDecision(size=128, pairs=6, arms=4, accuracy=1.0, mean=0.98, low=1.0, high=1.0)],
        predictions=[Prediction("arm 0", 256, "line", 2, predicted=1.9, low=1.95, high=2.0, observed=1.93)],
    )
    path = plot_decisions(found, tmp_path / "decisions.png")
    assert path is not None and path.stat().st_size > 0
