"""Hugging Face transformers as a peer: the zoo model converted with `zoo.interop.hf.to_hf`
(GPT-2, Llama, BERT, T5 or BART, same weights), SDPA attention, its own loss (`labels=`) and
`generate`."""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

from zoo.bench.peers.unavailable import PeerUnavailable
from zoo.bench.workload import Workload, decoding_copy, optimizer_step
from zoo.interop.hf import UnsupportedConfig, to_hf


class HFSubject:
    def __init__(self, work: Workload, *, zoo_model, compile: bool = False) -> None:
        if importlib.util.find_spec("transformers") is None:
            raise PeerUnavailable("transformers is not installed (pip install '.[bench]' in zoo's source directory)")
        try:
            self.model = to_hf(zoo_model).to(work.device)
        except UnsupportedConfig as exc:
            raise PeerUnavailable(f"no Hugging Face equivalent: {exc}") from None
        self.model.set_attn_implementation("sdpa")
        self.name = f"hf {type(self.model).__name__}"
        self.work = work
        if work.stacks.decoder:
            self.model.generation_config.eos_token_id = None  # always exactly new_tokens tokens
            self.model.generation_config.pad_token_id = 0
        self.static = compile  # compiled: generate with transformers' static cache, as its docs advise
        # the bf16 variants decode a bf16 copy (as torch_dtype=torch.bfloat16 loads one), made before compiling
        self.decoder: Any = decoding_copy(work, self.model)
        if compile:
            self.model.compile()
            if self.decoder is not self.model:
                self.decoder.compile()
        self.optimizer = work.adamw(self.model.parameters())

    def _inputs(self, batch: dict) -> dict:
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if self.work.stacks.cross_attention:
            inputs["decoder_input_ids"] = batch["decoder_input_ids"]
        return inputs

    def train_step(self, batch: dict) -> None:
        labels = batch["labels"]
        if self.work.stacks.prompt_in_decoder:  # a decoder alone: causal-LM labels
            labels = batch["input_ids"]  # transformers shifts causal-LM labels itself
        optimizer_step(
            self.work, self.model, self.optimizer, lambda: self.model(**self._inputs(batch), labels=labels).loss
        )

    @torch.no_grad()
    def forward(self, batch: dict) -> None:
        self.model.eval()
        with self.work.autocast():
            self.model(**self._inputs(batch))

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor | None:
        if not self.work.stacks.decoder:  # nothing to generate with
            return None
        self.decoder.eval()
        kwargs: dict[str, Any] = {"decoder_start_token_id": 1} if self.work.stacks.cross_attention else {}
        if self.static:
            kwargs["cache_implementation"] = "static"
        with self.work.autocast():
            out = self.decoder.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=new_tokens,
                do_sample=False,
                use_cache=True,
                **kwargs,
            )
        return out[:, -new_tokens:]
