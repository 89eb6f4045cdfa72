"""One torch-free table per axis, one row per kind: position schemes, tasks, corpora, model
families, and the parameter arithmetic they feed."""
