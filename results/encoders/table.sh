#!/usr/bin/env bash
# Tabulates the finished runs of run.sh (dev and test of the best-dev checkpoint, mean ± std over
# the seeds present) with `python -m train.compare`, one line per model and task.
# Usage: results/encoders/table.sh [RUNS]   (default /work/runs)
set -euo pipefail
RUNS=${1:-${RUNS:-/work/runs}}
for task in trec sick_r sick_e sst5; do
  for model in transformer dt dt_plain tree_lstm psan phrase_transformer; do
    dirs=$(ls -d "$RUNS/${model}_${task}"_s* 2>/dev/null | while read -r d; do
      [ -f "$d/results.md" ] && echo "$d"; done || true)
    [ -n "$dirs" ] || continue
    echo "## $model $task"
    python -m train.compare $dirs | grep '^|' | tail -n 1
  done
done
