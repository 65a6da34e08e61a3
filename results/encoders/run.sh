#!/usr/bin/env bash
# The runs behind the README's table of every encoder (TREC, SICK-R, SICK-E, SST-5) and the
# per-model results files. Same embeddings and schedule as DiSAN's table (results/disan):
# the two partial GloVe 6B 50-d files, fine-tuned; Adam, global-norm clip 5, no L2, batch 64;
# TREC and SICK-R 10 epochs, SICK-E 15, SST-5 8,000 steps of phrases oversampled 3x; no dropout
# (DiSAN's table rows use keep 1.0 except SICK-R's 0.75). Only the learning rate differs by family:
# the post-LN Transformer family (transformer, dependency_transformer, phrase_transformer) uses
# Adam 3e-4 with Vaswani's sqrt(d) embedding scale, because at 1e-3 without warm-up its sentence
# vectors collapse and SICK-R does not learn at all (results/dependency_transformer/README.md).
#
# Table: python -m reports.
# Usage: [SEEDS="0 1 2"] [MODELS="..."] [TASKS="..."] [POOLINGS="..."] [AAE_EPOCHS=40] results/encoders/run.sh TIER [PARALLEL]
# TIER: 1 (TREC, SICK-R), 2 (SICK-E), 3 (SST-5), dt (SICK-E, SST-2, MRPC: DT, plain, Transformer, Tree-LSTM),
# psan_table4 (PSAN's ablations on TREC), aae.
# Runs go to $RUNS (default ../runs, beside the repository); a run whose results.md exists is skipped, an unfinished one resumes,
# one that another queue is running (its flock on $dir.lock) is left to it: queues can be added at any time.
set -euo pipefail
tier=${1:-1}; parallel=${2:-2}
RUNS=${RUNS:-../runs}; mkdir -p "$RUNS"
SEEDS=${SEEDS:-0 1 2}
D=${JAXENC_DATA_DIR:?set JAXENC_DATA_DIR to shared/data}/glove_subsets
G="--config.data.embeddings=$D/glove.6B.50d.first2446.txt,$D/glove.6B.50d.subset5403.txt --config.model.embed_dim=50 --config.train.progress_bar=False --config.train.log_every=20 --config.data.batch_size=64 --config.train.patience=0"
ADAM="--config.optim.name=adam --config.optim.learning_rate=1e-3 --config.optim.weight_decay=0.0 --config.optim.clip_norm=5.0"
TF="--config.optim.learning_rate=3e-4 --config.model.scale_embeddings=True --config.model.dropout_rate=0.0"
declare -A TASK=(
  [trec]="trec --config.train.epochs=10"
  [sick_r]="sick_r --config.train.epochs=10"
  [sick_e]="sick_e --config.train.epochs=15"
  [sst2]="sst2 --config.train.epochs=10"
  [mrpc]="mrpc --config.train.epochs=10"
  [sst5]="sst5_phrases --config.data.phrase_repeats=3 --config.task.head.activation=relu --config.train.num_steps=8000 --config.train.eval_every=1000"
)
declare -A MODEL=(
  [transformer]="transformer $TF"
  [dt]="dependency_transformer $TF"
  [dt_plain]="dependency_transformer $TF --config.model.variant=transformer"
  [tree_lstm]="tree_lstm"
  [psan]="psan --config.model.keep_prob=1.0"
  [psan_norm]="psan --config.model.keep_prob=1.0 --config.model.memory_norm=layer"
  # PSAN's Table 4 ablations (results/psan/README.md): (1)-(3) PSA on one level only, (4) w/o PSA,
  # (5) w/o syntactic division, (6) w/o gated memory, (7) w/o both (one sentence-level attention)
  [psan_level1]="psan --config.model.keep_prob=1.0 --config.model.single_level=1"
  [psan_level2]="psan --config.model.keep_prob=1.0 --config.model.single_level=2"
  [psan_level3]="psan --config.model.keep_prob=1.0 --config.model.single_level=3"
  [psan_no_psa]="psan --config.model.keep_prob=1.0 --config.model.division=sentence"
  [psan_equal]="psan --config.model.keep_prob=1.0 --config.model.division=equal"
  [psan_concat]="psan --config.model.keep_prob=1.0 --config.model.memory=concat"
  [psan_no_both]="psan --config.model.keep_prob=1.0 --config.model.division=sentence --config.model.memory=concat --config.model.single_level=1"
  [phrase_transformer]="phrase_transformer $TF"
)
commands=()
add() {  # add MODEL_KEY TASK_KEY SEED [extra overrides]
  local m=$1 t=$2 s=$3; shift 3
  local model=(${MODEL[$m]}) task=(${TASK[$t]})
  local dir="$RUNS/${m}_${t}_s$s"
  commands+=("[ -f $dir/results.md ] || flock -n $dir.lock python -m train.main --config=train/configs/base.py:${model[0]},${task[0]} --workdir=$dir $G $ADAM ${task[*]:1} ${model[*]:1} --config.train.seed=$s $* > $dir.log 2>&1")
}
case $tier in
  1) for s in $SEEDS; do for m in ${MODELS:-transformer dt dt_plain tree_lstm psan phrase_transformer}; do
       for t in ${TASKS:-trec sick_r}; do add $m $t $s; done; done; done ;;
  2) for s in $SEEDS; do for m in ${MODELS:-transformer dt tree_lstm psan phrase_transformer}; do
       add $m sick_e $s; done; done ;;
  3) for s in $SEEDS; do for m in ${MODELS:-transformer dt psan phrase_transformer}; do
       add $m sst5 $s; done; done ;;
  psan_table4)  # PSAN's Table 4 ablations on TREC (the paper's SNLI is not available here)
    for s in $SEEDS; do for m in ${MODELS:-psan_level1 psan_level2 psan_level3 psan_no_psa psan_equal psan_concat psan_no_both}; do
       add $m trec $s; done; done ;;
  dt)  # DT_full vs the plain Transformer vs Tree-LSTM on SICK-E, SST-2 and MRPC
    for s in $SEEDS; do for t in sick_e sst2 mrpc; do for m in ${MODELS:-dt dt_plain transformer tree_lstm}; do
       add $m $t $s; done; done; done ;;
  aae)  # Mean-Max AAE (unsupervised) on the shared sentences, its ablations, then transfer
        # (and SICK-R again with SentEval's linear relatedness head, the vectors cached);
        # AAE_EPOCHS=40 raises the 4-epoch cap so that patience stops the run (results/meanmax_aae/converged/)
    corpus=$RUNS/aae_corpus.txt
    [ -f $corpus ] || python -m jaxenc.data.corpus --data_dir $JAXENC_DATA_DIR --out $corpus
    cap=${AAE_EPOCHS:+_e$AAE_EPOCHS}; cap_flag=${AAE_EPOCHS:+--config.train.epochs=$AAE_EPOCHS}
    for s in $SEEDS; do for pooling in ${POOLINGS:-meanmax mean max}; do
      dir=$RUNS/meanmax_aae_small_${pooling}${cap}_s$s
      commands+=("{ [ -f $dir/results.md ] || python -m train.main --config=train/configs/meanmax_aae_small.py --workdir=$dir --config.data.corpus_files=$corpus --config.model.pooling=$pooling --config.train.seed=$s $cap_flag --config.train.progress_bar=False; } > $dir.log 2>&1 && { [ -f $dir/transfer/results.md ] || python -m eval.transfer --encoder $dir --data_dir $JAXENC_DATA_DIR --out $dir/transfer; } > $dir.transfer.log 2>&1 && { [ -f $dir/transfer_senteval_head/results.md ] || python -m eval.transfer --encoder $dir --tasks SICKR --relatedness_head senteval --data_dir $JAXENC_DATA_DIR --out $dir/transfer_senteval_head --cache_dir $dir/transfer/cache; } > $dir.senteval_head.log 2>&1")
    done; done ;;
  *) echo "unknown tier $tier" >&2; exit 2 ;;
esac
printf '%s\n' "${commands[@]}" | xargs -P "$parallel" -I{} bash -c '{}; echo "done: {}" | cut -c1-160'
