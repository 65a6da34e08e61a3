"""Transfer evaluation of a frozen sentence encoder on the SentEval tasks, in JAX (no PyTorch/CUDA).

    python -m eval.transfer --encoder bag:glove.txt --tasks MR,TREC,SICKR --data_dir DIR --out DIR

or from Python `run_transfer(encoder, tasks, data_dir, out_dir)`. Protocols (SentEval's):

- MR, CR, SUBJ, MPQA: logistic regression, nested stratified 10-fold CV (inner folds choose L2).
- TREC (6 coarse classes), MRPC (accuracy and F1): 10-fold CV on train chooses L2, refit, test.
- SST2, SST5, SICKE: L2 chosen on dev, test once.
- SICKR, STSB: the Tai et al. relatedness head (`--relatedness_head tai`, the default) or
  SentEval's linear one (`senteval`), the best dev Pearson kept, test Pearson / Spearman / MSE;
  dev is read as SentEval reads it (`--relatedness_schedule senteval`, the default: every 50
  epochs, up to 1000) or after every epoch (`epoch`: 5 epochs of patience, up to 100;
  jaxenc/evaluation/relatedness.py).
- STS12..STS16: cosine similarity, Pearson and Spearman per subset, mean and size-weighted mean.

Pair tasks (MRPC, SICKE) classify [|u - v|, u * v]. Seeds are fixed (1111, as SentEval). The
command refuses a task named by --tasks whose data folder is absent (one line naming the folder)
unless --skip_missing; `run_transfer`, and the command without --tasks, report such a task as
skipped. An STS year lacking some subset files is evaluated on the others and marked partial. A
task that fails (bad data, sentence vectors that are not finite) is reported as failed and the
others still run; the report is rewritten as each task finishes, and the command exits with
status 2 naming the failures. Sentence vectors are cached per encoder, task and split (default
OUT/cache), so a second run only re-fits the classifiers. A model encoder (a run directory or an
export) batches by a token budget and cuts a sentence over its max_length tokens to its first
ones with a warning (--long_sentences truncate, the default) or fails the task naming it
(--long_sentences error): jaxenc/encoding.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxenc import cli
from jaxenc.data import paths, registry, sts
from jaxenc.encoding import LONG_SENTENCES
from jaxenc.errors import ConfigError, DataError, JaxencError
from jaxenc.evaluation.encoders import EmbeddingCache, SentenceEncoder, load_encoder
from jaxenc.evaluation.logreg import (
    ClassifierScore,
    cross_validate_then_test,
    nested_cross_validation,
    select_on_dev,
)
from jaxenc.evaluation.relatedness import (
    DEFAULT_HEAD,
    DEFAULT_SCHEDULE,
    HEADS,
    SCHEDULES,
    fit_relatedness,
)
from jaxenc.evaluation.sts import score_subset, summarize
from jaxenc.evaluation.transfer_report import render_markdown, write_report
from jaxenc.records import Example
from jaxenc.tasks.metrics import binary_f1

log = logging.getLogger(__name__)

SEED = 1111


@dataclasses.dataclass(frozen=True)
class TransferTask:
    """A SentEval task: the registry dataset it reads and how it is evaluated.

    protocol: "nested_cv", "cv_then_test" or "dev" (logistic regression, eval/logreg.py),
    "relatedness" (eval/relatedness.py) or "sts" (eval/sts.py).
    """

    dataset: str
    protocol: str
    report_f1: bool = False


TASKS: dict[str, TransferTask] = {
    "MR": TransferTask("mr", "nested_cv"),
    "CR": TransferTask("cr", "nested_cv"),
    "SUBJ": TransferTask("subj", "nested_cv"),
    "MPQA": TransferTask("mpqa", "nested_cv"),
    "SST2": TransferTask("sst2", "dev"),
    "SST5": TransferTask("sst5", "dev"),
    "TREC": TransferTask("trec", "cv_then_test"),
    "MRPC": TransferTask("mrpc", "cv_then_test", report_f1=True),
    "SICKE": TransferTask("sick_e", "dev"),
    "SICKR": TransferTask("sick_r", "relatedness"),
    **{f"STS{year}": TransferTask(f"sts{year}", "sts") for year in range(12, 17)},
    "STSB": TransferTask("stsb", "relatedness"),
}


def task_names(names: str | Sequence[str]) -> list[str]:
    """Canonical task names ("sick-r, mr" -> ["SICKR", "MR"]); ConfigError on unknown ones."""
    if isinstance(names, str):
        names = names.split(",")
    canonical = [name.strip().upper().replace("-", "").replace("_", "") for name in names]
    canonical = [name for name in canonical if name]
    unknown = [name for name in canonical if name not in TASKS]
    if unknown or not canonical:
        raise ConfigError(f"unknown transfer task(s) {unknown or names} (fix: choose from "
                          f"{','.join(TASKS)})")
    return canonical


@dataclasses.dataclass(frozen=True)
class _Run:
    """What every task evaluation needs: the encoder, its cache, the data root, the seed, and
    the relatedness head's schedule and head (names of relatedness.SCHEDULES and HEADS)."""

    encoder: SentenceEncoder
    cache: EmbeddingCache
    data_root: Path
    seed: int
    relatedness_schedule: str = DEFAULT_SCHEDULE
    relatedness_head: str = DEFAULT_HEAD

    def vectors(self, task: str, split: str) -> tuple[list[Example], list[np.ndarray]]:
        """(examples, [u] or [u, v]): float32[N, D] per sentence role, encoded in one call."""
        examples = registry.load(TASKS[task].dataset, split, self.data_root)
        roles = len(examples[0].sentences)
        sentences = [example.sentences[role] for role in range(roles) for example in examples]
        encoded = self.cache.encode(self.encoder, sentences, task, split)
        self._check_finite(encoded, examples, task, split)
        return examples, np.split(encoded, roles)

    def _check_finite(self, encoded: np.ndarray, examples: list[Example], task: str,
                      split: str) -> None:
        """DataError naming the encoder, the task and the first sentence whose vector holds
        nan or inf (a classifier fitted on them reports chance as if it were a result)."""
        bad = np.flatnonzero(~np.isfinite(encoded).all(axis=1))
        if bad.size:
            raise DataError(
                f"encoder {self.encoder.name} gave sentence vectors that are not finite for "
                f"{bad.size} of {len(encoded)} {task} {split} sentences (this one first)",
                path=examples[bad[0] % len(examples)].uid or None,
                fix="check the encoder's weights and word vectors for nan/inf or overflow")

    def classifier_inputs(self, task: str, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(features float32[N, F], labels int32[N]); pairs give [|u - v|, u * v]."""
        examples, vectors = self.vectors(task, split)
        if len(vectors) == 2:
            u, v = vectors
            vectors = [np.abs(u - v), u * v]
        return np.concatenate(vectors, axis=1), np.array([e.label for e in examples], np.int32)

    def scored_pairs(self, task: str, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(u, v, gold scores float32[N]) of a relatedness split."""
        examples, (u, v) = self.vectors(task, split)
        return u, v, np.array([e.score for e in examples], np.float32)


def _classification(run: _Run, task: str) -> dict:
    """Test accuracy (and F1), dev accuracy and chosen L2 of the task's logistic regression."""
    spec = TASKS[task]
    num_classes = registry.DATASETS[spec.dataset].num_classes
    if spec.protocol == "nested_cv":
        features, labels = run.classifier_inputs(task, "all")
        test_labels = labels
        score: ClassifierScore = nested_cross_validation(features, labels,
                                                         num_classes=num_classes, seed=run.seed)
    elif spec.protocol == "cv_then_test":
        train, test = run.classifier_inputs(task, "train"), run.classifier_inputs(task, "test")
        test_labels = test[1]
        score = cross_validate_then_test(*train, *test, num_classes=num_classes, seed=run.seed)
    else:
        splits = [run.classifier_inputs(task, split) for split in ("train", "dev", "test")]
        test_labels = splits[2][1]
        score = select_on_dev(*splits, num_classes=num_classes)
    metrics = {"accuracy": score.test_accuracy, "dev_accuracy": score.dev_accuracy,
               "l2": list(score.l2), "num_test": len(test_labels)}
    if spec.report_f1:
        metrics["f1"] = 100.0 * binary_f1(score.test_predictions, test_labels)
    return metrics


def _relatedness(run: _Run, task: str) -> dict:
    """Test Pearson / Spearman / MSE of the relatedness head, early-stopped on dev."""
    info = registry.DATASETS[TASKS[task].dataset]
    train, dev, test = (run.scored_pairs(task, split) for split in ("train", "dev", "test"))
    score = fit_relatedness(train, dev, test, score_range=info.score_range, seed=run.seed,
                            schedule=run.relatedness_schedule, head=run.relatedness_head)
    return {**dataclasses.asdict(score), "schedule": run.relatedness_schedule,
            "head": run.relatedness_head, "num_test": len(test[2])}


def _sts(run: _Run, task: str) -> dict:
    """Cosine-similarity correlations of every subset of the STS year present in its folder,
    and their means (naming the missing subsets)."""
    info = registry.DATASETS[TASKS[task].dataset]
    folder = run.data_root / info.folder
    present = [subset for subset in info.splits
               if all(path.is_file() for path in sts.subset_files(folder, subset))]
    if not present:
        raise DataError(f"none of the {task} subsets ({', '.join(info.splits)}) is here",
                        path=folder, fix="put SentEval's STS.input.<subset>.txt and "
                        "STS.gs.<subset>.txt files in this folder")
    missing = [subset for subset in info.splits if subset not in present]
    if missing:
        log.warning("%s: subsets %s missing from %s; evaluating the others", task,
                    ", ".join(missing), folder)
    return summarize({subset: score_subset(*run.scored_pairs(task, subset))
                      for subset in present}, missing)


_EVALUATORS = {"nested_cv": _classification, "cv_then_test": _classification,
               "dev": _classification, "relatedness": _relatedness, "sts": _sts}


def _data_folder(task: str, data_root: Path) -> Path:
    """Where the data of `task` is read from under `data_root`."""
    return data_root / registry.DATASETS[TASKS[task].dataset].folder


def _missing_data(task: str, data_root: Path) -> str | None:
    """Why the task cannot run (its folder is absent), or None. The folder is named relative to
    the data root, so a committed report names no machine's folders."""
    folder = _data_folder(task, data_root)
    if folder.is_dir():
        return None
    return f"no data ({folder.relative_to(data_root).as_posix()} not found in the data root)"


def check_data(tasks: Sequence[str], data_root: Path) -> None:
    """DataError naming the data folder of each of `tasks` that is absent under `data_root`,
    with the fix: add it, use another --data_dir, or --skip_missing."""
    folders = {task: _data_folder(task, data_root) for task in tasks}
    missing = {task: folder for task, folder in folders.items() if not folder.is_dir()}
    if not missing:
        return
    names, them = ", ".join(missing), "it" if len(missing) == 1 else "them"
    fix = (f"put the {names} data there, point --data_dir at a data root that has {them}, or "
           f"pass --skip_missing to skip {them}")
    if len(missing) == 1:
        raise DataError(f"data folder of {names} not found", path=next(iter(missing.values())),
                        fix=fix)
    raise DataError(f"data folders of {names} not found: "
                    f"{', '.join(map(str, missing.values()))}", fix=fix)


def run_transfer(encoder: SentenceEncoder | str, tasks: str | Sequence[str] = tuple(TASKS),
                 data_dir: str | os.PathLike | None = None,
                 out_dir: str | os.PathLike | None = None, *, seed: int = SEED,
                 cache_dir: str | os.PathLike | None = None,
                 long_sentences: str = "truncate",
                 relatedness_schedule: str = DEFAULT_SCHEDULE,
                 relatedness_head: str = DEFAULT_HEAD) -> dict:
    """Evaluates `encoder` on `tasks` and, with `out_dir`, writes the report there.

    Args:
      encoder: a SentenceEncoder, or a string for `eval.encoders.load_encoder`
        ("bag:GLOVE_FILE[,FILE...]" where a file may be a registered name such as glove-6b-50d,
        a training run directory or an export folder).
      tasks: names of TASKS (a list or a comma-separated string; case and "-" ignored).
      data_dir: the data root (jaxenc.data.registry); None means $JAXENC_DATA_DIR.
      out_dir: where results.json, results.md and plots/ go (nothing is written when None).
      seed: the seed of folds, shuffles and initialisations.
      cache_dir: sentence-vector cache; default OUT/cache (no cache without out_dir).
      long_sentences: with a string `encoder`, "truncate" or "error" for a sentence over the
        model encoder's max_length tokens (`jaxenc.encoding.Encoder`).
      relatedness_schedule: when SICKR's and STSB's head reads dev and stops: a name of
        `jaxenc.evaluation.relatedness.SCHEDULES`.
      relatedness_head: SICKR's and STSB's head and loss: a name of
        `jaxenc.evaluation.relatedness.HEADS` ("tai", or SentEval's linear "senteval").

    Returns:
      {"encoder": name, "seed": seed, "tasks": {TASK: {"status": "ok", "seconds", "metrics"} or
      {"status": "skipped" | "failed", "reason"}}}, in the order asked. A task fails on a
      JaxencError (reported in its reason); any other exception propagates, the results of the
      tasks before it already written to `out_dir`.
    """
    names = task_names(tasks)
    if relatedness_schedule not in SCHEDULES:
        raise ConfigError(f"relatedness schedule {relatedness_schedule!r} is not one of "
                          f"{', '.join(SCHEDULES)} (fix: --relatedness_schedule senteval)")
    if relatedness_head not in HEADS:
        raise ConfigError(f"relatedness head {relatedness_head!r} is not one of "
                          f"{', '.join(HEADS)} (fix: --relatedness_head {DEFAULT_HEAD})")
    if isinstance(encoder, str):
        encoder = load_encoder(encoder, long_sentences=long_sentences)
    data_root = paths.data_dir(data_dir)
    if cache_dir is None and out_dir is not None:
        cache_dir = Path(out_dir) / "cache"
    run = _Run(encoder, EmbeddingCache(cache_dir), data_root, seed, relatedness_schedule,
               relatedness_head)
    results = {"encoder": encoder.name, "seed": seed, "tasks": {}}
    for task in names:
        results["tasks"][task] = _evaluate(run, task)
        if out_dir is not None:
            write_report(results, out_dir, plots=[task])
    return results


def _evaluate(run: _Run, task: str) -> dict:
    """One task's entry of the results: ok (metrics), skipped (no data) or failed (one line)."""
    reason = _missing_data(task, run.data_root)
    if reason is not None:
        log.info("%s: skipped, %s", task, reason)
        return {"status": "skipped", "reason": reason}
    start = time.perf_counter()
    try:
        metrics = _EVALUATORS[TASKS[task].protocol](run, task)
    except JaxencError as error:
        log.warning("%s: failed: %s", task, error)
        return {"status": "failed", "reason": str(error)}
    seconds = time.perf_counter() - start
    log.info("%s: %s (%.1f s)", task, {k: v for k, v in metrics.items()
                                        if isinstance(v, float)}, seconds)
    return {"status": "ok", "seconds": seconds, "metrics": metrics}


@cli.reports_errors
def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m eval.transfer",
        description="Evaluate a frozen sentence encoder on the SentEval transfer tasks "
        "(logistic regression / relatedness head / cosine, as SentEval) and write "
        "OUT/results.md, OUT/results.json and OUT/plots/<TASK>.png.",
        epilog="Example: python -m eval.transfer --encoder bag:glove.840B.300d.txt "
        "--tasks MR,CR,TREC,SICKR --data_dir DATA --out results/bag")
    parser.add_argument("--encoder", required=True,
                        help="bag:GLOVE_FILE[,GLOVE_FILE...] for the mean-of-word-vectors baseline "
                        "(a file or a packaged source such as glove-6b-50d; several are merged, "
                        "the first having a word wins), the "
                        "--workdir of a python -m train.main run (its best checkpoint), or an "
                        "export folder (python -m jaxenc export WORKDIR OUT)")
    parser.add_argument("--tasks", default=None,
                        help=f"comma-separated tasks: {', '.join(TASKS)}; a task named here "
                        "whose data folder is missing is an error unless --skip_missing "
                        "(default: every task, those without data skipped)")
    parser.add_argument("--data_dir", default=None,
                        help="data root, one folder per dataset as docs/data.md describes "
                        f"(default: ${paths.DATA_DIR_ENV})")
    parser.add_argument("--skip_missing", action="store_true",
                        help="skip (with a note) the tasks whose data folder is missing")
    parser.add_argument("--out", required=True, help="output folder for the report")
    parser.add_argument("--cache_dir", default=None,
                        help="sentence-vector cache folder (default: OUT/cache)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"seed (default {SEED})")
    parser.add_argument("--long_sentences", choices=LONG_SENTENCES, default="truncate",
                        help="a sentence longer than a model encoder's max_length tokens "
                        "(jaxenc.encoding.DEFAULT_MAX_LENGTH) is cut to its first ones with a "
                        "warning counting them (truncate, the default) or fails its task, "
                        "naming it (error); the bag of embeddings has no limit")
    parser.add_argument("--relatedness_schedule", choices=list(SCHEDULES),
                        default=DEFAULT_SCHEDULE,
                        help="when the SICKR / STSB head reads dev Pearson and stops: as "
                        "SentEval, every 50 epochs, the 4th evaluation without a gain, at most "
                        "1000 (senteval, the default), or after every epoch, 5 epochs past the "
                        "best, at most 100 (epoch)")
    parser.add_argument("--relatedness_head", choices=list(HEADS), default=DEFAULT_HEAD,
                        help="the SICKR / STSB head: Tai et al.'s sigmoid hidden layer of 50 "
                        "with a KL loss (tai, the default), or SentEval's one linear layer "
                        "with a squared error on the probabilities (senteval)")
    args = parser.parse_args(argv)
    tasks = task_names(list(TASKS) if args.tasks is None else args.tasks)
    if args.tasks is not None and not args.skip_missing:  # before the encoder is loaded
        check_data(tasks, paths.data_dir(args.data_dir))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    results = run_transfer(args.encoder, tasks, args.data_dir, args.out, seed=args.seed,
                           cache_dir=args.cache_dir, long_sentences=args.long_sentences,
                           relatedness_schedule=args.relatedness_schedule,
                           relatedness_head=args.relatedness_head)
    print(render_markdown(results))
    failed = [f"{task}: {entry['reason']}" for task, entry in results["tasks"].items()
              if entry["status"] == "failed"]
    if failed:
        raise JaxencError(f"{len(failed)} of {len(results['tasks'])} tasks failed, the others' "
                          f"results are in {args.out}: {'; '.join(failed)}")
    return results


def command() -> None:
    """The `jaxenc-eval` command (a console script's return value would be its exit status)."""
    main()


if __name__ == "__main__":
    command()
