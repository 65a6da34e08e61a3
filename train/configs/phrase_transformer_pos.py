"""PhraseTransformer POS tagger on UD English-EWT XPOS (PTB tags), the paper's Table 2 setup:
d 300, 6 heads of 50, 2 layers, k = 2 (paper, PTB: 96.87% accuracy; plain Transformer 96.36%).

transformer_pos.py (task, data, optimiser, budget) with the PhraseTransformer of the same sizes;
that Transformer is the twin (`baselines.transformer`, workdir/baselines/transformer).
Variants of the paper's table (with `phrase_transformer_pos.py:solo` they train without the twin):
  --config.model.k=3                      PhraseTransformer (k=3), paper 96.80
  --config.model.nonlinear=False          linear PhraseTransformer (k=2), paper 96.54
  --config.model.hypernodes=dependency  semantic PhraseTransformer on gold UD trees, 96.35
  --config.task.dataset=ptb_sample        the NLTK PTB sample (carved dev/test) instead of UD
"""

from __future__ import annotations

from train.configs import base, transformer_pos


def get_config(arg: str | None = None):
    """`arg`: "twin" (default) or "solo" (no twin, for the variants: base.twin_option)."""
    config = base.with_model(transformer_pos.get_config(), "phrase_transformer", k=2)
    return base.twin_option(config, arg)
