"""PhraseTransformer POS tagger on UD English-EWT XPOS (PTB tags), the paper's Table 2 setup:
d 300, 6 heads of 50, 2 layers, k = 2 (paper, PTB: 96.87% accuracy; plain Transformer 96.36%).

transformer_pos.py (task, data, optimiser, budget) with the PhraseTransformer of the same sizes;
that Transformer is the twin (`baselines.transformer`, workdir/baselines/transformer).
Variants of the paper's table (with `phrase_transformer_pos.py:solo` they train without the twin):
  --config.model.k=3                      PhraseTransformer (k=3), paper 96.80
  --config.model.nonlinear=False          linear PhraseTransformer (k=2), paper 96.54
  --config.model.k=3 --config.model.nonlinear=False   linear PhraseTransformer (k=3), paper 96.52
  --config.model.hypernodes=dependency  semantic PhraseTransformer on gold UD trees, 96.35
      (add --config.model.parser=spacy for spaCy's parses, as the paper's parser-made trees)
  --config.model.phrase_mask=hadamard     Algorithm 1's literal Hadamard mask (not in the table)
  --config.model.residual=False --config.model.feed_forward=False
                                          no residual / FFN around the phases (literal reading)
  --config.task.dataset=ptb_sample        the NLTK PTB sample (carved dev/test) instead of UD
results/phrase_transformer/run.sh pos runs every variant; results/phrase_transformer/README.md
has the numbers.
"""

from __future__ import annotations

from train.configs import base, transformer_pos


def get_config(arg: str | None = None):
    """`arg`: "twin" (default) or "solo" (no twin, for the variants: base.twin_option)."""
    config = base.with_model(transformer_pos.get_config(), "phrase_transformer", k=2)
    return base.twin_option(config, arg)
