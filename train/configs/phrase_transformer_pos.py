"""PhraseTransformer POS tagger on UD English-EWT XPOS (PTB tags), the paper's Table 2 setup:
d 300, 6 heads of 50, 2 layers, k = 2 (paper, PTB: 96.87% accuracy; plain Transformer 96.36%).

The plain Transformer twin (`baselines.transformer`, same width, heads, layers, FFN, optimiser
and budget) trains in workdir/baselines/transformer. Variants of the paper's table:
  --config.model.k=3                      PhraseTransformer (k=3), paper 96.80
  --config.model.nonlinear=False          linear PhraseTransformer (k=2), paper 96.54
  --config.model.hypernodes=dependency --config.model.phase2=dense
                                          semantic PhraseTransformer on gold UD trees, 96.35
  --config.task.dataset=ptb_sample        the NLTK PTB sample (carved dev/test) instead of UD
"""

from __future__ import annotations

from train.configs import base

SIZE = dict(num_layers=2, num_heads=6, ff_dim=600, dropout_rate=0.1)


def get_config():
    config = base.get_config("phrase_transformer,ud_ewt")
    config.model.update(dict(SIZE, k=2))
    config.baselines.transformer = base.model_config("transformer", **SIZE)
    config.task.head.hidden_dims = ()
    config.data.update(dict(batch_size=32, max_length=64))
    config.optim.update(dict(name="adam", learning_rate=5e-4, b2=0.98, weight_decay=0.0,
                             clip_norm=5.0))
    config.train.update(dict(epochs=10, patience=3))
    return config
