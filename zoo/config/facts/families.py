"""The model families, in one torch-free table: which stacks a family has. The parameter count,
the model schema's checks, decoding and its length limits, the pooling of classification and
the attention plots read these rows instead of comparing family names; `zoo.models.FAMILIES`
maps each family to its module. zoo/models/README.md says how to add one."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.config.choice import Choice


class Family(Choice):
    encoder_only = "encoder_only"
    decoder_only = "decoder_only"
    encoder_decoder = "encoder_decoder"


@dataclass(frozen=True, kw_only=True)
class FamilyFacts:
    """One family's row.

    - `encoder`: it has a bidirectional stack over its input (`model.n_layers` blocks).
    - `decoder`: it has a causal stack that predicts the next token and can generate (with an
      encoder: `model.n_decoder_layers` blocks with cross-attention; alone: `model.n_layers`).
    - `paper`: where it comes from.
    """

    encoder: bool
    decoder: bool
    paper: str

    def __post_init__(self) -> None:
        if not (self.encoder or self.decoder):
            raise ValueError("a family has an encoder, a decoder or both")

    @property
    def cross_attention(self) -> bool:
        """Two stacks, the decoder attending to the encoder's output (`model.n_decoder_layers`
        applies)."""
        return self.encoder and self.decoder

    @property
    def prompt_in_decoder(self) -> bool:
        """A prompt is the decoder's own input, so prompt and new tokens share its positions and
        its cache (decoder-only); with an encoder the prompt is the source."""
        return self.decoder and not self.encoder


FAMILY_FACTS: dict[Family, FamilyFacts] = {
    Family.encoder_only: FamilyFacts(encoder=True, decoder=False, paper="Devlin et al. 2019 (BERT)"),
    Family.decoder_only: FamilyFacts(encoder=False, decoder=True, paper="Radford et al. 2018 (GPT)"),
    Family.encoder_decoder: FamilyFacts(encoder=True, decoder=True, paper="Vaswani et al. 2017"),
}


def family_facts(family: Family | str) -> FamilyFacts:
    """The row of `family` (a Family or its name); ConfigError naming model.family otherwise."""
    return FAMILY_FACTS[Family.parse(family, "model.family")]
