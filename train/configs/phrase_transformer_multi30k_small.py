"""The Multi30k de -> en comparison sized for 2 CPU cores: phrase_transformer_multi30k.py (the
paper's setup) with d 128, 4 heads, 2 encoder and 2 decoder layers, training sentences up to 32
tokens, a fixed budget of 5 epochs (no early stop, so both models get the same 2265 steps).

Runs PhraseTransformer (k = 2), then its plain Transformer twin (same size, optimiser and budget,
workdir/baselines/transformer); each reports test BLEU (beam 4, sacrebleu). For the linear
ablation: --config=train/configs/phrase_transformer_multi30k_small.py:solo
--config.model.nonlinear=False (solo: without retraining the twin).

Cost on this project's 2-core CPU machine (bench/bench_phrase_transformer.py, shared machine,
median of 5 steps, batch 64): ms per train step at bucket 8 / 16 / 24 / 32: PhraseTransformer
k=2 272 / 805 / 748 / 962, k=3 255 / 819 / 1075 / 1335, Transformer 201 / 448 / 540 / 661.
Weighted by Multi30k's bucket mix: 789 ms (k=2) and 478 ms (Transformer) per step, i.e. about 30
+ 18 minutes for 2265 steps each, plus about 2.5 minutes of beam decoding per model: the whole
config in under an hour.
"""

from __future__ import annotations

from train.configs import base, phrase_transformer_multi30k


def get_config(arg: str | None = None):
    """`arg`: "twin" (default) or "solo" (no twin, e.g. the linear ablation: base.twin_option)."""
    config = phrase_transformer_multi30k.sized(model_dim=128, num_layers=2, num_heads=4,
                                               ff_dim=256, max_decode_length=40)
    config.data.update(dict(max_length=32, eval_batch_size=256))
    config.optim.update(dict(learning_rate=1e-3, warmup_steps=400))
    config.train.update(dict(epochs=5, patience=0))
    return base.twin_option(config, arg)
