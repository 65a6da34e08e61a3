"""PhraseTransformer encoder-decoder on Multi30k German -> English (lower-cased tokenised files),
the paper's Table 1 setup: d 512, 8 heads of 64, 6 layers; PhraseTransformer (k = 2) in the
encoder self-attention, the standard Transformer decoder (paper BLEU: 34.61; Transformer 20.90,
linear PhraseTransformer 21.60). Test BLEU: beam 4, length penalty 0.6, sacrebleu on detokenised
output (results.md). The plain Transformer twin of the same size and budget trains in
workdir/baselines/transformer. Too slow for a CPU: phrase_transformer_multi30k_small.py is the
one that trains on 2 cores.
"""

from __future__ import annotations

from train.configs import base

SIZE = dict(embed_dim=512, model_dim=512, num_layers=6, num_heads=8, ff_dim=2048,
            dropout_rate=0.1)


def get_config():
    config = base.get_config("phrase_transformer,multi30k")
    config.model.update(dict(SIZE, k=2))
    config.baselines.transformer = base.model_config("transformer", **SIZE)
    config.task.head.decoder.update(dict(model_dim=512, num_layers=6, num_heads=8, ff_dim=2048,
                                         dropout_rate=0.1, label_smoothing=0.1, beam_size=4,
                                         length_penalty=0.6, max_decode_length=48))
    config.data.update(dict(batch_size=64, max_length=48, min_count=2, lowercase=True))
    config.optim.update(dict(name="adam", learning_rate=2e-4, b2=0.98, eps=1e-9,
                             weight_decay=0.0, clip_norm=5.0))
    config.train.update(dict(epochs=20, patience=3))
    return config
