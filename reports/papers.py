"""The table "Against the papers" of docs/results.md (`papers`): for each encoder, the number its
paper reports on a task beside jaxenc's committed test mean on the same task, with the inputs and
training on each side.

Ours: test at the best-dev checkpoint, mean ± sample std over the committed seeds of the model's
chosen recipe, as the encoder tables compute it (reports.encoder_tables.seed_runs, from
results/encoders/runs/); the PhraseTransformer's k=2 runs of results/phrase_transformer/runs/ and
the small Mean-Max AAE's transfer reports of results/meanmax_aae/runs/, as their pages read them.
Our inputs are read from the committed config.json of those runs where the run files carry one.

Paper: a number printed in the paper, recorded in code with its table: PAPER_NUMBERS below,
jaxenc.evaluation.paper_results.PAPER_RESULTS (transfer tables), reports.psan.PSAN_TABLE5 and
reports.phrase_transformer's specs. "not reported" where the paper has no number on the task.
The Child-Sum Tree-LSTM's paper (Tai et al. 2015) is not among the papers here: its numbers are
those the DiSAN and Dependency-Transformer papers print for it, so cited.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from jaxenc.evaluation.paper_results import PAPER_RESULTS
from reports import encoder_tables, meanmax_aae, phrase_transformer, psan
from reports.markdown import DASH, markdown
from reports.run_files import bleu, row, seeded, value

NOT_REPORTED = "not reported"

SHEN = "Shen et al. 2018 (DiSAN)"
WU = "Wu et al. 2018 (PSAN)"
MA = "Ma et al. 2022 (Dependency-Transformer)"
ZHANG = "Zhang et al. 2018 (Mean-Max AAE)"
PT_PAPER = "PhraseTransformer (ICLR 2020 submission)"

# (model, task) -> (number as the paper prints it, where it is printed). Tasks as
# reports.encoder_runs names them; SICK-R of the Dependency-Transformer papers is MSE (METRIC).
PAPER_NUMBERS: dict[tuple[str, str], tuple[str, str]] = {
    # Shen et al. 2018: Table 2 (SST fine-grained, test accuracy), Table 4 (SICK relatedness,
    # Pearson's r), Table 5 (TREC, test accuracy)
    ("disan", "sst5"): ("51.72", f"{SHEN}, Table 2"),
    ("disan", "sick_r"): ("0.8704", f"{SHEN}, Table 4"),
    ("disan", "trec"): ("94.4", f"{SHEN}, Table 5"),
    # Tai et al. 2015's Dependency (Child-Sum) Tree-LSTM as Shen et al. 2018 Table 4 cite it
    ("tree_lstm", "sick_r"): ("0.8676", f"{SHEN}, Table 4 (Dependency Tree-LSTM, Tai et al. "
                                        "2015)"),
    # Ma et al. 2022 Table 1: Tree-LSTM_DT row (SICK-E, SST-2, MRPC accuracy)
    ("tree_lstm", "sick_e"): ("82.00", f"{MA}, Table 1 (Tree-LSTM_DT)"),
    ("tree_lstm", "sst2"): ("85.70", f"{MA}, Table 1 (Tree-LSTM_DT)"),
    ("tree_lstm", "mrpc"): ("72.07", f"{MA}, Table 1 (Tree-LSTM_DT)"),
    # Ma et al. 2022 Table 1: "Ours" (SICK-R MSE, SICK-E, SST-2, MRPC accuracy)
    ("dt", "sick_r"): (".2428", f"{MA}, Table 1"),
    ("dt", "sick_e"): ("85.10", f"{MA}, Table 1"),
    ("dt", "sst2"): ("88.70", f"{MA}, Table 1"),
    ("dt", "mrpc"): ("73.58", f"{MA}, Table 1"),
    # Ma et al. 2022 Table 3: "Transformer", the same model without relation attention
    ("dt_plain", "sick_r"): ("0.2833", f"{MA}, Table 3 (Transformer)"),
    ("dt_plain", "sick_e"): ("83.34", f"{MA}, Table 3 (Transformer)"),
    ("dt_plain", "sst2"): ("87.19", f"{MA}, Table 3 (Transformer)"),
    ("dt_plain", "mrpc"): ("72.41", f"{MA}, Table 3 (Transformer)"),
}
# (model, task) -> the metric compared when it is not the task's primary one (the paper's)
METRIC = {("dt", "sick_r"): "mse", ("dt_plain", "sick_r"): "mse"}

# Numbers recorded elsewhere in code, with their tables.
_PSAN_T5 = {model: accuracy for model, _, accuracy, _ in psan.PSAN_TABLE5}
_PSAN_T3 = PAPER_RESULTS["PSAN"]
RECORDED: dict[tuple[str, str], tuple[str, str]] = {
    **PAPER_NUMBERS,
    # Wu et al. 2018 Table 5: trained and tested on TREC, 300-d sentence vectors
    ("psan", "trec"): (_PSAN_T5["psan"], f"{WU}, Table 5"),
    ("transformer", "trec"): (_PSAN_T5["transformer"], f"{WU}, Table 5 (their multi-head "
                                                       "re-implementation)"),
    # Wu et al. 2018 Table 3: the SNLI-trained encoder, frozen, SentEval
    ("psan", "sick_r"): (f"{_PSAN_T3['SICKR']['pearson']:.3f}", f"{WU}, Table 3 (transfer)"),
    ("psan", "sick_e"): (f"{_PSAN_T3['SICKE']['accuracy']:.1f}", f"{WU}, Table 3 (transfer)"),
}

# Inputs and training on the paper's side, as each paper's setup section states them.
PAPER_INPUTS = {
    "disan": "300-d GloVe 6B, fine-tuned; no parser; Adadelta, batch 64 (section 5, Training "
             "Setup); runs not stated",
    "psan": "300-d GloVe Common Crawl (uncased), fixed; Stanford PCFG parses; Adadelta 0.75, "
            "batch 16, dropout 0.5 (sections 3.1, 3.2); runs not stated",
    "tree_lstm": "Tai et al. 2015's setup (not among the papers here): GloVe, Stanford "
                 "dependency parses; runs not stated",
    "dt": "300-d GloVe, fine-tuned; Stanford dependency parses; AdaGrad 1e-3, batch 32, [root] "
          "sentence vector (section 3.1); mean of 5 runs",
    "dt_plain": "as the Dependency-Transformer (section 3.1): 300-d GloVe, fine-tuned; AdaGrad "
                "1e-3, batch 32; mean of 5 runs",
    "transformer": "Wu et al.'s re-implementation at 300-d sentence vectors, PSAN's training "
                   "(fixed 300-d GloVe, Adadelta); runs not stated",
}
# (model, task) -> what the paper's number measures when the encoder was not trained on the task
PAPER_TASK_NOTES = {
    ("psan", "sick_r"): "trained on SNLI, frozen, SentEval's classifier; ",
    ("psan", "sick_e"): "trained on SNLI, frozen, SentEval's classifier; ",
}
PARSERS = {None: "no parser", "spacy": "spaCy dependency parses",
           "spacy-constituency": "phrases of spaCy-derived constituency trees",
           "gold": "gold SST trees"}

# encoder row name -> (model key of reports.encoder_runs, the tasks of its rows)
ENCODERS = {
    "DiSAN": ("disan", ("trec", "sick_r", "sick_e", "sst5")),
    "PSAN": ("psan", ("trec", "sick_r", "sick_e", "sst5")),
    "Tree-LSTM (Child-Sum)": ("tree_lstm", ("trec", "sick_r", "sick_e", "sst5", "sst2", "mrpc")),
    "Dependency-Transformer": ("dt", ("trec", "sick_r", "sick_e", "sst5", "sst2", "mrpc")),
    "Dependency-Transformer `variant=transformer`": ("dt_plain",
                                                     ("sick_r", "sick_e", "sst2", "mrpc")),
    "Transformer": ("transformer", ("trec",)),
}
METRIC_NAMES = {"accuracy": "acc", "pearson": "Pearson", "mse": "MSE"}

HEADER = ["encoder", "task (metric)", "paper", "paper's table", "ours: test mean ± std",
          "seeds", "paper's inputs and training", "ours"]


def _form(metric: str) -> Callable[[float], str]:
    if metric == "accuracy":
        return lambda x: f"{100 * x:.2f}"
    return lambda x: f"{x:.4f}" if metric == "mse" else f"{x:.3f}"


def _one(values: set[str]) -> str:
    return " / ".join(sorted(values))


def our_inputs(model: str, task: str) -> str:
    """Words vectors, parses, optimiser and batch of the committed runs, from their config."""
    configs = [run["config"] for run in encoder_tables.seed_runs(model, task)]
    embeddings = _one({c["data.embeddings"] for c in configs})
    frozen = _one({"fixed" if c["model.freeze_embeddings"] else "fine-tuned" for c in configs})
    parser = _one({PARSERS.get(c.get("model.parser"), str(c.get("model.parser")))
                   for c in configs})
    optimiser = _one({f"{c['optim.name'].capitalize()} {c['optim.learning_rate']:g}, batch "
                      f"{c['data.batch_size']}" for c in configs})
    extra = ""
    if model in ("dt", "dt_plain"):
        extra = ", " + _one({f"{c['model.sentence_vector']} sentence vector" for c in configs})
    phrases = any(c["task.dataset"].endswith("_phrases") for c in configs)
    return (f"`{embeddings}`, {frozen}; {parser}; {optimiser}{extra}; "
            f"{'trained on every labelled phrase, ' if phrases else ''}early stopping on dev")


def _encoder_rows() -> list[list[str]]:
    rows = []
    for name, (model, tasks) in ENCODERS.items():
        for task in tasks:
            metric = METRIC.get((model, task), encoder_tables.PRIMARY[task][0])
            found = encoder_tables.seed_runs(model, task)
            if not found:
                continue
            scores = [run["test"][metric] for run in found]
            number, source = RECORDED.get((model, task), (NOT_REPORTED, DASH))
            note = PAPER_TASK_NOTES.get((model, task), "")
            rows.append([name, f"{encoder_tables.TASK_NAMES[task]} ({METRIC_NAMES[metric]})",
                         number, source, _mean_std(scores, _form(metric)), str(len(scores)),
                         note + PAPER_INPUTS[model], our_inputs(model, task)])
    return rows


def _mean_std(values: list[float], form: Callable[[float], str]) -> str:
    if len(values) == 1:
        return form(values[0])
    return f"{form(statistics.mean(values))} ± {form(statistics.stdev(values))}"


PT_VARIANT = "k2"  # the paper's headline PhraseTransformer (k=2), ours trained with its twin
PT_INPUTS = {
    "pos": ("Penn Treebank; d 300, 6 heads, 2 layers (section 4.3); word vectors and runs "
            "not stated",
            "UD English-EWT XPOS (not the Penn Treebank); the paper's sizes; `glove-6b-50d`, "
            "fine-tuned, projected to the model width; Adam, early stopping on dev "
            "(`phrase_transformer_pos.py`)"),
    "multi30k": ("d 512, 8 heads, 6 layers (section 4.1); runs not stated",
                 "a smaller model on a fixed epoch budget, decoder reading words and hypernodes "
                 "(`phrase_transformer_multi30k_small.py`); detokenised sacrebleu"),
}


def _pt_rows() -> list[list[str]]:
    """PhraseTransformer k=2: POS accuracy and Multi30k BLEU beside the paper's Tables 2 and 1."""
    rows = []
    for task, spec, label, table, read in (
            ("pos", phrase_transformer.PT_POS_SPEC, "POS tagging (acc)", "Table 2",
             lambda path: value(row(path, "phrase_transformer")["test accuracy"])),
            ("multi30k", phrase_transformer.PT_MULTI30K_SPEC, "Multi30k de→en (BLEU)", "Table 1",
             lambda path: bleu(path)["phrase_transformer"] / 100)):
        paper = next(p for variant, model, _, p in spec
                     if variant == PT_VARIANT and model == "phrase_transformer")
        found = seeded(phrase_transformer.PT_RUNS, f"{task}_{PT_VARIANT}")
        if not found:
            continue
        scores = [read(path) for path in found.values()]
        rows.append(["PhraseTransformer k=2", label, paper, f"{PT_PAPER}, {table}",
                     _mean_std(scores, lambda x: f"{100 * x:.2f}"), str(len(scores)),
                     PT_INPUTS[task][0], PT_INPUTS[task][1]])
    return rows


AAE_INPUTS = (
    "70M Toronto Book sentences; d_m 2048 (4096-d codes); GloVe, fixed, vocabulary expanded; "
    "Adam, batch 64 (section 4.2); frozen, SentEval; runs not stated",
    "the small config (`meanmax_aae_small.py`) on the corpus of non-transfer datasets "
    "(`jaxenc.data.corpus`); `glove-6b-50d`, fixed; frozen, `eval.transfer` (SentEval's "
    "protocols)")
AAE_PAPER_CELLS = {"MRPC": lambda m: f"{m['accuracy']:.1f}/{m['f1']:.1f}",
                   "SICKR": lambda m: f"{m['pearson']:.3f}"}


def _aae_rows() -> list[list[str]]:
    """The small Mean-Max AAE's frozen transfer scores, mean ± std over seeds (the leading
    number's std, as results/meanmax_aae reads them), beside Zhang et al. 2018 Table 1."""
    found = meanmax_aae.aae_seeds("meanmax")
    ours = [meanmax_aae.transfer_scores(report) for _, report in found.values()]
    paper = PAPER_RESULTS["Mean-Max AAE"]
    rows = []
    for task in meanmax_aae.AAE_TASKS:
        cells = [scores[task] for scores in ours]
        std = meanmax_aae.std_over_seeds(cells)
        mean = meanmax_aae.mean_over_seeds(cells)
        metric = "Pearson" if task == "SICKR" else "acc/F1" if task == "MRPC" else "acc"
        if task in paper:
            number = AAE_PAPER_CELLS.get(task, lambda m: f"{m['accuracy']:.1f}")(paper[task])
            source = f"{ZHANG}, Table 1"
        else:
            number, source = NOT_REPORTED, DASH
        rows.append(["Mean-Max AAE", f"{task} transfer ({metric})", number, source,
                     f"{mean} ± {std}" if std != DASH else mean, str(len(cells)),
                     AAE_INPUTS[0], AAE_INPUTS[1]])
    return rows


AS_ABOVE = "as above"


def paper_rows() -> list[list[str]]:
    """Every row of the table, in HEADER's columns; an inputs cell that repeats the one above it
    for the same encoder reads AS_ABOVE."""
    rows = [*_encoder_rows(), *_pt_rows(), *_aae_rows()]
    shown = [list(r) for r in rows]
    for above, current, cells in zip(rows, rows[1:], shown[1:], strict=False):
        for column in (-2, -1):
            if current[0] == above[0] and current[column] == above[column]:
                cells[column] = AS_ABOVE
    return shown


def recorded_sources() -> set[tuple[str, str]]:
    """Every (number, table) pair recorded in code that the table may print."""
    pairs = set(RECORDED.values())
    for task in ("pos", "multi30k"):
        spec = phrase_transformer.PT_POS_SPEC if task == "pos" else \
            phrase_transformer.PT_MULTI30K_SPEC
        table = "Table 2" if task == "pos" else "Table 1"
        pairs |= {(p, f"{PT_PAPER}, {table}") for *_, p in spec if p != DASH}
    for task, metrics in PAPER_RESULTS["Mean-Max AAE"].items():
        cell = AAE_PAPER_CELLS.get(task, lambda m: f"{m['accuracy']:.1f}")
        if task == "STS14":
            continue
        pairs.add((cell(metrics), f"{ZHANG}, Table 1"))
    return pairs


def papers_table() -> str:
    return markdown(HEADER, paper_rows())
