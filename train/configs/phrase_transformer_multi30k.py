"""PhraseTransformer encoder-decoder on Multi30k German -> English (lower-cased tokenised files),
the paper's Table 1 setup: d 512, 8 heads of 64, 6 layers; PhraseTransformer (k = 2) in the
encoder self-attention, the standard Transformer decoder (paper BLEU: 34.61; Transformer 20.90,
linear PhraseTransformer 21.60). Test BLEU: beam 4, length penalty 0.6, sacrebleu on detokenised
output (results.md).

transformer_multi30k.py (task, data, optimiser, budget) at the paper's 6 layers, with the
PhraseTransformer of the same sizes; that Transformer is the twin (`baselines.transformer`).
Too slow for a CPU: phrase_transformer_multi30k_small.py is the one that trains on 2 cores.

The decoder attends the encoder's word nodes only (model.decoder_memory="words", Algorithm 1
returns H_k[:n]); --config.model.decoder_memory=nodes adds the hypernodes. The source is not
wrapped in <s> ... </s> (model.boundary_tokens=False: the paper's text builds hypernodes over the
words, and the twin sees no boundary tokens); --config.model.boundary_tokens=True gives the
"<s> a" and ". </s>" hypernodes that the paper's Fig. 3 shows.
"""

from __future__ import annotations

from train.configs import base, transformer_multi30k


def sized(model_dim: int, num_layers: int, num_heads: int, ff_dim: int,
          max_decode_length: int):
    """transformer_multi30k.py at these sizes (encoder and decoder), decoding with beam 4, then
    the PhraseTransformer (k = 2) in its place and the Transformer as its twin."""
    config = transformer_multi30k.get_config()
    sizes = dict(model_dim=model_dim, num_layers=num_layers, num_heads=num_heads, ff_dim=ff_dim)
    config.model.update(dict(sizes, embed_dim=model_dim))
    config.task.head.decoder.update(dict(sizes, beam_size=4, length_penalty=0.6,
                                         max_decode_length=max_decode_length))
    return base.with_model(config, "phrase_transformer", k=2)


def get_config():
    return sized(model_dim=512, num_layers=6, num_heads=8, ff_dim=2048, max_decode_length=48)
