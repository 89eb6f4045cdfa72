"""One torch-free table per axis, one row per kind: position schemes, norm types, activations,
feed-forward kinds, tasks, corpora, model families, and the parameter arithmetic they feed;
`axes.AXES` lists the ablation axes the contract tests cover."""
