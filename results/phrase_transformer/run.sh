#!/usr/bin/env bash
# The runs behind results/phrase_transformer/README.md:
#   pos       UD English-EWT XPOS tagging, the paper's Table 2 setup (train/configs/phrase_transformer_pos.py:
#             d 300, 6 heads, 2 layers, Adam 5e-4, GloVe 6B 50-d words and the vectors' 100,000 first
#             words in the vocabulary, until 3 epochs without a dev gain, cap 40): k=2 with its
#             Transformer twin, then alone (`:solo`) k=3, linear k=2, linear k=3, semantic
#             (dependency hypernodes) k=2 on gold UD arcs and on spaCy parses, and the literal
#             readings of Algorithm 1: the Hadamard mask (`hadamard`) and no residual / FFN around
#             the phases (`bare`)
#   pos_trainvocab  the same with the training words alone in the vocabulary (the other words
#             read as the unknown id)
#   pos_random300  the same with the earlier recipe: randomly initialised 300-d words, 10 epochs
#   multi30k  Multi30k de->en, the small config (phrase_transformer_multi30k_small.py: d 128, 2+2 layers,
#             5 epochs, beam 4, sacrebleu): k=2 with its Transformer twin and linear k=2 alone, both with
#             the decoder attending words and hypernodes (`decoder_memory=nodes`, as the runs committed
#             under those names were made), then alone with the default decoder memory (the words):
#             k=2 (`k2words`), k=3, linear k=3
# Table (mean ± std over seeds, the twins included):
#   python -m train.compare $RUNS/pos_*_s? $RUNS/pos_k2_s?/baselines/transformer   (likewise pos_random300_*)
#   python -m train.compare $RUNS/multi30k_*_s? $RUNS/multi30k_k2_s?/baselines/transformer
# Usage: [SEEDS="0 1 2"] [VARIANTS="..."] results/phrase_transformer/run.sh pos|pos_trainvocab|pos_random300|multi30k [PARALLEL]
# Runs go to $RUNS (default ../runs, beside the repository) as pos_<variant>_s<seed> / multi30k_<variant>_s<seed>; a run whose
# results.md exists is skipped, an unfinished one resumes, one another queue holds (flock) is left to it.
set -euo pipefail
tier=${1:?pos, pos_trainvocab, pos_random300 or multi30k}; parallel=${2:-1}
RUNS=${RUNS:-../runs}; mkdir -p "$RUNS"
: "${JAXENC_DATA_DIR:?set JAXENC_DATA_DIR to shared/data}"
declare -A VARIANT=(
  [k2]="twin"
  [k3]="solo --config.model.k=3"
  [linear]="solo --config.model.nonlinear=False"
  [semantic]="solo --config.model.hypernodes=dependency --config.model.phase2=dense"
  [semantic_spacy]="solo --config.model.hypernodes=dependency --config.model.phase2=dense --config.model.parser=spacy"
  [k3linear]="solo --config.model.k=3 --config.model.nonlinear=False"
  [hadamard]="solo --config.model.phrase_mask=hadamard"
  [bare]="solo --config.model.residual=False --config.model.feed_forward=False"
  [k2words]="solo"
)
case $tier in
  pos|pos_trainvocab|pos_random300) config=train/configs/phrase_transformer_pos.py; seeds=${SEEDS:-0 1 2}
       variants=${VARIANTS:-k2 k3 linear k3linear semantic semantic_spacy hadamard bare} ;;
  multi30k) config=train/configs/phrase_transformer_multi30k_small.py; seeds=${SEEDS:-0}
       variants=${VARIANTS:-k2 linear k2words k3 k3linear} ;;
  *) echo "unknown tier $tier (pos, pos_trainvocab, pos_random300 or multi30k)" >&2; exit 2 ;;
esac
commands=()
for s in $seeds; do for v in $variants; do
  spec=(${VARIANT[$v]}); dir="$RUNS/${tier}_${v}_s$s"
  if [ "$tier" = multi30k ] && { [ "$v" = k2 ] || [ "$v" = linear ]; }; then
    spec+=(--config.model.decoder_memory=nodes)
  fi
  if [ "$tier" = pos_trainvocab ]; then
    spec+=(--config.data.vector_vocabulary=0)
  fi
  if [ "$tier" = pos_random300 ]; then
    spec+=(--config.data.embeddings= --config.data.vector_vocabulary=0 --config.model.embed_dim=300
           --config.train.epochs=10)
    if [ "${spec[0]}" = twin ]; then spec+=(--config.baselines.transformer.embed_dim=300); fi
  fi
  commands+=("[ -f $dir/results.md ] || flock -n $dir.lock python -m train.main --config=$config:${spec[0]} --workdir=$dir --config.train.progress_bar=False --config.train.seed=$s ${spec[*]:1} > $dir.log 2>&1")
done; done
printf '%s\n' "${commands[@]}" | xargs -P "$parallel" -I{} bash -c '{}; echo "done: {}" | cut -c1-160'
