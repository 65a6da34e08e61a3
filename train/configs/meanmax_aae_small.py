"""Mean-Max AAE small enough to train on 2 CPU cores in well under an hour, on the unlabelled
sentences of shared/data; the paper's settings otherwise (meanmax_aae_paper.py).

Build the corpus once (no test sentence of any transfer task: jaxenc.data.corpus.DEFAULT_SOURCES
lists the dataset splits), then train and evaluate:

  python -m jaxenc.data.corpus --data_dir $JAXENC_DATA_DIR --out corpus.txt
  python -m train.main --config=train/configs/meanmax_aae_small.py --workdir=DIR \\
      --config.data.corpus_files=corpus.txt
  python -m eval.transfer --encoder DIR --data_dir $JAXENC_DATA_DIR

Of the corpus's 77,034 distinct sentences, 72,315 have 4..32 tokens; 7,683 training sentences
(dev 224, test 226) have every word in the 50-d GloVe subsets of shared/data (7,849 words; the
authors' rule drops the other 88%); vocabulary 4,160 words. Throughput of this config measured
with bench/bench_meanmax.py: ~85 sentences/s on 2 shared CPU cores (load average 9), so the 20
epochs (154k sentences) take about 30 minutes. Changes from the paper: 50-d vectors (lower-cased
GloVe 6B), d_m 512, d_f 1024, dropout 0.3, held-out fractions 3% each, 20 epochs, patience 5.
"""

from __future__ import annotations

import os

from train.configs import meanmax_aae_paper

GLOVE = ("glove_subsets/glove.6B.50d.first2446.txt", "glove_subsets/glove.6B.50d.subset5403.txt")


def get_config():
    config = meanmax_aae_paper.get_config()
    config.model.update(dict(embed_dim=50, model_dim=512, ff_dim=1024, num_heads=8,
                             dropout_rate=0.3))
    config.task.update(dict(dev_fraction=0.03, test_fraction=0.03))
    root = config.data.data_dir
    config.data.update(dict(
        embeddings=",".join(os.path.join(root, path) for path in GLOVE) if root else "",
        lowercase=True, min_count=1))
    config.train.update(dict(num_steps=0, epochs=20, eval_every=0, log_every=50, patience=5))
    config.checkpoint.every = 0
    return config
