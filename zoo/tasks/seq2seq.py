"""Sequence-to-sequence with teacher forcing (Sutskever et al. 2014; Vaswani et al. 2017): the
decoder reads [BOS] + y and predicts y + [EOS]. Validation also decodes greedily and scores
corpus BLEU (Papineni et al. 2002) and exact match."""

from __future__ import annotations

import torch
from torchmetrics import MeanMetric
from torchmetrics.text import BLEUScore

from zoo.config.facts.tasks import TaskKind, families_of
from zoo.data.even_batches import is_filler
from zoo.models.generate import generate, strip_special
from zoo.tasks.base import IGNORE, ZooTask


class Seq2Seq(ZooTask):
    kind = TaskKind.seq2seq
    families = families_of(kind)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.val_bleu = BLEUScore()
        self.val_exact = MeanMetric()

    token_level = True

    def model_inputs(self, batch):
        inputs = {
            "input_ids": batch["input_ids"],
            "attention_mask": batch.get("attention_mask"),
            "decoder_input_ids": batch["decoder_input_ids"],
            "decoder_attention_mask": batch.get("decoder_attention_mask"),
        }
        n = batch["input_ids"].numel() + batch["decoder_input_ids"].numel()
        return inputs, batch["labels"], n

    def forward_batch(self, batch):
        return self.predict_tokens(batch)

    def preceding_ids(self, batch):
        """The decoder's inputs: [BOS] + y before the targets y + [EOS]."""
        return batch["decoder_input_ids"].reshape(-1)

    def translate(self, input_ids, attention_mask=None, max_new_tokens=None) -> list[list[int]]:
        """Greedy target ids per source row, without BOS/EOS/padding (a task with its tokenizer)."""
        tokenizer = self.tokenizer
        assert tokenizer is not None  # validation_step translates only with one attached
        specials = tokenizer.special_ids()
        pad = specials["pad"]
        assert pad is not None  # a seq2seq tokenizer pads its batches (zoo.data.collate.select)
        out = generate(
            self.model,
            input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens or self.task_config.generate_max_tokens,
            bos_id=specials["bos"],
            eos_id=specials["eos"],
            pad_id=pad,
            vocab_limit=tokenizer.vocab_size,
            stop=self.decoding_stop(),
        )
        return strip_special(out, specials["eos"], pad)

    def validation_step(self, batch, batch_idx):
        super().validation_step(batch, batch_idx)
        if self.tokenizer is None:
            return
        translated = self.translate(batch["input_ids"], batch.get("attention_mask"))
        if is_filler(batch):  # run for a sharded model's collectives only
            return
        hyps = [self.tokenizer.decode(ids) for ids in translated]
        refs = []
        for labels in batch["labels"].tolist():
            ids = [t for t in labels if t != IGNORE and t != self.tokenizer.special_ids()["eos"]]
            refs.append(self.tokenizer.decode(ids))
        self.val_bleu.update(hyps, [[r] for r in refs])
        self.val_exact.update(torch.tensor([float(h.strip() == r.strip()) for h, r in zip(hyps, refs)]))

    def on_validation_epoch_end(self):
        if self.tokenizer is not None and self.counted_anywhere(self.val_exact.weight):
            self.log_everywhere("val/bleu", self.val_bleu.compute())
            self.log_everywhere("val/exact_match", self.val_exact.compute())
            self.val_bleu.reset()
            self.val_exact.reset()
        super().on_validation_epoch_end()
