"""Tiny Hugging Face directories built offline: a byte-level BPE tokenizer trained here on the
pydoc corpus zoo ships, and small random models of each family over its vocabulary, each saved
with `save_pretrained` as a downloaded model would be."""

from __future__ import annotations

from pathlib import Path

SPECIALS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


# the sizes of the tiny Llama every interop test builds
TINY_LLAMA = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def save_tokenizer(directory: Path, vocab_size: int = 316, **specials):
    """A byte-level BPE tokenizer (no text is unknown) of `vocab_size` pieces, the special
    tokens appended after them: bos 316, eos 317, unk 318, pad 319 by default, so none has
    the id zoo's own tokenizers give it; `specials` adds or removes some (`mask_token="<mask>"`,
    `pad_token=None`). Returns the transformers tokenizer, saved in `directory`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from zoo.data.corpora import load_pydoc

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(load_pydoc()["text"][:12], trainer)  # ~60 KB of text
    named = {key: token for key, token in {**SPECIALS, **specials}.items() if token is not None}
    hf = PreTrainedTokenizerFast(tokenizer_object=backend, **named)
    hf.save_pretrained(directory)
    return hf


# each family's special tokens, as its own tokenizer has them
FAMILY_SPECIALS = {
    "llama": {},
    "gpt2": {
        "bos_token": "<|endoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "pad_token": None,
    },
    "bert": {
        "bos_token": None,
        "eos_token": None,
        "unk_token": "[UNK]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
    "t5": {"bos_token": None},
    "bart": {"mask_token": "<mask>"},
    "gemma2": {},
    "gpt_neox": {
        "bos_token": "<|endoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|padding|>",
    },
    "mixtral": {},
    "olmoe": {"bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|padding|>"},
}


def llama(tokenizer, seed: int = 0):
    """LlamaForCausalLM: 2 layers, d 32, grouped-query attention, weights ~ N(0, 0.1)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        **TINY_LLAMA,
        initializer_range=0.1,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config).eval()


def gpt2(tokenizer, seed: int = 0):
    """GPT2LMHeadModel: 2 layers, d 32, no dropout, weights ~ N(0, 0.1)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=128,
        n_embd=32,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        initializer_range=0.1,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return GPT2LMHeadModel(config).eval()


def bert(tokenizer, seed: int = 0):
    """BertForMaskedLM: 2 layers, d 32, no dropout."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.1,
        pad_token_id=tokenizer.pad_token_id,
    )
    return BertForMaskedLM(config).eval()


def t5(tokenizer, seed: int = 0):
    """T5ForConditionalGeneration (v1.0): 2 + 2 layers, d 32; the decoder starts with pad."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
        dropout_rate=0.0,
        decoder_start_token_id=tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return T5ForConditionalGeneration(config).eval()


def bart(tokenizer, seed: int = 0):
    """BartForConditionalGeneration: 2 + 2 layers, d 32, no dropout."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(seed)
    config = BartConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=128,
        dropout=0.0,
        attention_dropout=0.0,
        init_std=0.1,
        forced_eos_token_id=None,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
    )
    return BartForConditionalGeneration(config).eval()


def gemma2(tokenizer, seed: int = 0):
    """Gemma2ForCausalLM: 3 layers (sliding, full, sliding; a window of 4), d 32, soft-caps,
    norm weights ~ N(0, 0.1) (fresh ones are all zero)."""
    import torch
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(seed)
    config = Gemma2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        query_pre_attn_scalar=8,
        sliding_window=4,
        max_position_embeddings=128,
        initializer_range=0.1,
        attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Gemma2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name:
                tensor.normal_(0.0, 0.1)
    return model


def gpt_neox(tokenizer, seed: int = 0):
    """GPTNeoXForCausalLM: 2 layers, d 32, parallel attention and feed-forward, RoPE over the
    whole head (rotary_pct 1.0)."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    config = GPTNeoXConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        rotary_pct=1.0,
        initializer_range=0.1,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPTNeoXForCausalLM(config).eval()


def mixtral(tokenizer, seed: int = 0):
    """MixtralForCausalLM: 2 layers, d 32, 4 experts of width 24, top-2, weights ~ N(0, 0.1)."""
    import torch
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(seed)
    config = MixtralConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        initializer_range=0.1,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return MixtralForCausalLM(config).eval()


def olmoe(tokenizer, seed: int = 0):
    """OlmoeForCausalLM: 2 layers, d 32, QK-norm, 4 experts of width 24, top-2 not renormalised."""
    import torch
    from transformers import OlmoeConfig, OlmoeForCausalLM

    torch.manual_seed(seed)
    config = OlmoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        initializer_range=0.1,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return OlmoeForCausalLM(config).eval()


MODELS = {
    "llama": llama,
    "gpt2": gpt2,
    "bert": bert,
    "t5": t5,
    "bart": bart,
    "gemma2": gemma2,
    "gpt_neox": gpt_neox,
    "mixtral": mixtral,
    "olmoe": olmoe,
}


def save_model(directory: Path, family: str = "llama", seed: int = 0):
    """A model directory as the Hub gives one: the family's tokenizer and a random model over
    its vocabulary; returns (transformers model, transformers tokenizer)."""
    tokenizer = save_tokenizer(directory, **FAMILY_SPECIALS[family])
    model = MODELS[family](tokenizer, seed)
    model.save_pretrained(directory)
    return model, tokenizer
