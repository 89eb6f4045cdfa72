"""lm-evaluation-harness (EleutherAI's `lm_eval`, the optional extra `zoo[eval]`) on zoo's own
models: `ZooLM`, the harness model adapter over a model and its run's tokenizer
(`zoo.harness.adapter`); the built-in offline tasks made from zoo's corpora
(`zoo.harness.tasks`); and `evaluate_tasks`, which runs a list of tasks and flattens the
harness's results into zoo's metric names, `harness/TASK/METRIC` (`zoo.harness.run`); and
zoo's own associative-recall probe (`zoo.harness.recall`).

Nothing here imports `lm_eval` at import time: the extra is needed only when a task runs."""
