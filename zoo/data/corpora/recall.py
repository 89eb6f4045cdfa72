"""Multi-query associative recall sequences as a corpus (`data=recall`): one document per
sequence, one character per symbol (`zoo.data.recall`), drawn from numpy with data.recall_seed.

Each sequence has data.seq_len - 1 symbols, so with its eos it fills one training window
exactly: every window starts at a sequence's first key. The data module holds out
data.val_fraction of the sequences for validation. The loss is the causal LM's, on every
position; only a value after a query can be predicted better than chance."""

from __future__ import annotations

from zoo.config.schema.recall import RecallSpec
from zoo.data.recall import as_text, draw


def load_recall(
    seq_len: int = 65,
    recall_vocab: int = 256,
    recall_pairs: int = 8,
    recall_examples: int = 20000,
    recall_power: float = 0.01,
    recall_seed: int = 0,
):
    """Dataset with one column, text: `recall_examples` sequences."""
    from datasets import Dataset

    spec = RecallSpec(vocab_size=recall_vocab, seq_len=seq_len - 1, num_kv_pairs=recall_pairs, power_a=recall_power)
    drawn = draw(spec, recall_examples, recall_seed)
    return Dataset.from_dict({"text": [as_text(row) for row in drawn.symbols]})
