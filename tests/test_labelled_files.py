"""A user's own labelled files (dataset "files"): each layout read against examples written by
hand, every bad row one DataError naming file:line, and encoders trained on files the test
writes, with and without dev / test files."""

import json
from pathlib import Path

import numpy as np
import pytest

import jaxenc
from jaxenc.data import labelled_files, registry
from jaxenc.encoding import Encoder
from jaxenc.errors import ConfigError, DataError
from jaxenc.text_io import tokenize
from jaxenc.training import experiment, loop, predict, preparation, run_files
from train.configs import base

ROWS = [("positive", "The coach won the final, again!"),
        ("negative", "the match was not good ."),
        ("neutral", "Fans said nothing."),
        ("positive", "what a game"),
        ("negative", "a dull, slow half")]


def data(**files) -> dict:
    """A data section: the defaults of the "files" dataset with `files` set."""
    section = base.get_config("bag,files").data.to_dict()
    section.update(files)
    return section


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_headerless_tsv_is_label_tab_text_tokenised_as_encode_does(tmp_path):
    train = write(tmp_path / "train.tsv", "".join(f"{label}\t{text}\n" for label, text in ROWS))
    described, splits = labelled_files.load_splits(data(train_file=str(train)))
    assert described.columns == labelled_files.Columns(("text",), "label", "single")
    assert described.label_names == ("negative", "neutral", "positive")  # sorted
    examples = splits["train"]
    assert list(splits) == ["train"]  # dev and test are left to be carved
    assert [described.label_names[e.label] for e in examples] == [label for label, _ in ROWS]
    assert examples[0].sentences[0].tokens == ("The", "coach", "won", "the", "final", ",",
                                               "again", "!")
    assert [e.sentences[0].tokens for e in examples] == [tokenize(text) for _, text in ROWS]
    assert examples[2].uid == "train.tsv:3"


def test_csv_and_jsonl_with_headers_read_the_same_examples(tmp_path):
    csv_text = "id,text,label\n" + "".join(
        f'{i},"{text}",{label}\n' for i, (label, text) in enumerate(ROWS))
    csv = write(tmp_path / "train.csv", csv_text)
    jsonl = write(tmp_path / "train.jsonl", "".join(
        json.dumps({"label": label, "text": text, "id": i}) + "\n"
        for i, (label, text) in enumerate(ROWS)))
    tsv = write(tmp_path / "train.tsv", "label\ttext\n" + "".join(
        f"{label}\t{text}\n" for label, text in ROWS))
    read = [labelled_files.load_splits(data(train_file=str(path))) for path in (csv, jsonl, tsv)]
    for described, splits in read:
        assert described == read[0][0]
        assert ([(e.label, e.sentences[0].tokens) for e in splits["train"]]
                == [(e.label, e.sentences[0].tokens) for e in read[0][1]["train"]])
    assert read[0][1]["train"][0].sentences[0].text == "The coach won the final, again!"


def test_integer_labels_sort_as_numbers_and_pairs_read_two_columns(tmp_path):
    train = write(tmp_path / "train.jsonl", "".join(
        json.dumps({"text_a": f"a {i} .", "text_b": f"b {i} .", "label": label}) + "\n"
        for i, label in enumerate([10, 2, 1, 2])))
    described, splits = labelled_files.load_splits(data(train_file=str(train)))
    assert described.columns.kind == "pair" and described.label_names == ("1", "2", "10")
    example = splits["train"][0]
    assert [s.tokens for s in example.sentences] == [("a", "0", "."), ("b", "0", ".")]
    assert example.label == 2  # "10"


def test_a_score_column_makes_a_relatedness_task_over_the_train_range(tmp_path):
    train = write(tmp_path / "train.tsv", "text_a\ttext_b\tscore\n"
                  "a cat .\ta dog .\t1.5\nthe sun .\tthe sun .\t4.2\nup\tdown\t2\n")
    described, splits = labelled_files.load_splits(data(train_file=str(train)))
    assert described.columns == labelled_files.Columns(("text_a", "text_b"), "score",
                                                       "relatedness")
    assert described.score_range == (1.0, 5.0)
    assert [e.score for e in splits["train"]] == [1.5, 4.2, 2.0]
    info = registry.files_info(described)
    assert (info.kind, info.num_classes, info.score_range) == ("relatedness", 5, (1.0, 5.0))


def _error(tmp_path: Path, **files: str) -> str:
    with pytest.raises(DataError) as caught:
        labelled_files.load_splits(data(**{key: str(tmp_path / name)
                                           for key, name in files.items()}))
    message = str(caught.value)
    assert "\n" not in message and "fix:" in message
    return message


BAD_ROWS = {
    "a missing column (tsv)": ("train.tsv", "text\tlabel\nfine .\tpositive\nno label\n",
                               "train.tsv:3: expected 2 tab-separated fields"),
    "a missing key (jsonl)": ("train.jsonl", '{"text": "ok .", "label": 1}\n{"text": "x"}\n',
                              "train.jsonl:2: no label in column 'label'"),
    "empty text": ("train.csv", 'text,label\n"ok .",a\n"  ",b\n',
                   "train.csv:3: empty 'text'"),
    "an empty label": ("train.tsv", "positive\ta good one .\n\tanother\n",
                       "train.tsv:2: empty label in column 'label'"),
    "a score that is not a number": ("train.tsv", "text_a\ttext_b\tscore\na\tb\t2\nc\td\tlots\n",
                                     "train.tsv:3: score 'lots' is not a number"),
    "an unclosed quote": ("train.csv", 'text,label\n"open,a\n', "train.csv:"),
    "no text column": ("train.csv", "sentence,label\nhi,a\n", "no text column among"),
    "no label column": ("train.csv", "text,class\nhi,a\n", "no label column 'label'"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_each_bad_row_is_one_line_naming_file_and_line(tmp_path, case):
    name, text, expected = BAD_ROWS[case]
    write(tmp_path / name, text)
    assert expected in _error(tmp_path, train_file=name)


def test_a_test_label_unseen_in_train_names_its_line_and_the_train_labels(tmp_path):
    write(tmp_path / "train.tsv", "positive\tgood .\nnegative\tbad .\n")
    write(tmp_path / "test.tsv", "positive\tfine .\nsurprised\twow .\n")
    message = _error(tmp_path, train_file="train.tsv", test_file="test.tsv")
    assert "test.tsv:2: label 'surprised' does not occur in the training file" in message
    assert "'negative', 'positive'" in message


def test_files_with_other_columns_than_train_are_refused(tmp_path):
    write(tmp_path / "train.tsv", "positive\tgood .\n")
    write(tmp_path / "dev.csv", "text_a,text_b,label\na,b,positive\n")
    assert "--config.data.dev_file is read as pair examples" in _error(
        tmp_path, train_file="train.tsv", dev_file="dev.csv")


def test_missing_or_unreadable_files_are_refused_before_training(tmp_path):
    config = base.get_config("bag,files")
    with pytest.raises(DataError, match="--config.data.train_file is not set"):
        preparation.validate(config)
    config.data.train_file = str(write(tmp_path / "train.txt", "positive\tgood .\n"))
    with pytest.raises(DataError, match="cannot tell the format of 'train.txt'"):
        preparation.validate(config)
    config.data.train_file = str(tmp_path / "absent.tsv")
    with pytest.raises(DataError, match="train_file: file not found"):
        preparation.validate(config)
    with pytest.raises(DataError, match="dataset 'files' is the files of"):
        registry.load("files", "train")


def tiny_files_config(model: str, **files: Path):
    config = base.get_config(f"{model},files")
    config.model.embed_dim = 16
    if model != "bag":
        config.model.memory_dim = 16
    config.task.head.hidden_dims = (16,)
    config.task.update(dict(dev_fraction=0.25, test_fraction=0.25))
    config.data.update(dict(batch_size=8, eval_batch_size=16, max_length=16, bucket_step=16,
                            **{key: str(path) for key, path in files.items()}))
    config.optim.update(dict(name="adam", learning_rate=3e-3))
    config.train.update(dict(num_steps=2, eval_every=1, progress_bar=False))
    return config


SENTENCES = ["the team won the final .", "the team lost the final .", "a great , fast game .",
             "a slow and dull game .", "fans cheered all night .", "fans left early .",
             "what a goal !", "what a miss !"]
LABELS = ["win", "loss"] * 4


def _write_format(folder: Path, suffix: str, rows: list[tuple[str, str]]) -> Path:
    path = folder / f"{len(rows)}{suffix}"
    if suffix == ".tsv":  # no header: label<TAB>text
        return write(path, "".join(f"{label}\t{text}\n" for label, text in rows))
    if suffix == ".csv":
        return write(path, "text,label\n" + "".join(f'"{text}",{label}\n' for label, text in rows))
    return write(path, "".join(json.dumps({"text": text, "label": label}) + "\n"
                               for label, text in rows))


@pytest.mark.parametrize(("model", "suffix", "with_dev_test"), [
    ("bag", ".tsv", False), ("tree_lstm", ".csv", True), ("bag", ".jsonl", True)])
def test_an_encoder_trains_on_files_of_each_format(tmp_path, capsys, model, suffix,
                                                   with_dev_test):
    rows = list(zip(LABELS * 2, SENTENCES * 2, strict=True))
    files = {"train_file": _write_format(tmp_path, suffix, rows)}
    if with_dev_test:
        files["dev_file"] = _write_format(tmp_path, suffix, rows[:6])
        files["test_file"] = _write_format(tmp_path, suffix, rows[:5])
    row = loop.train_and_evaluate(tiny_files_config(model, **files), tmp_path / "run")
    assert row["steps"] == 2 and 0.0 <= row["test accuracy"] <= 1.0
    assert f"\n{model} step 2: dev accuracy " in capsys.readouterr().out  # the log names the run
    record = json.loads((tmp_path / "run" / run_files.CONFIG_FILE).read_text())
    assert record["dataset"] == {"name": "files", "kind": "single", "num_classes": 2,
                                 "label_names": ["loss", "win"], "score_range": None}
    counts = {split: entry["examples"] for split, entry in record["data_identity"].items()}
    assert counts == ({"train": 16, "dev": 6, "test": 5} if with_dev_test
                      else {"train": 9, "dev": 3, "test": 4})  # a quarter of 16, then of 12
    if model == "tree_lstm":
        assert record["model"]["parser"] == "spacy"  # parsed as any untokenised text
    if with_dev_test:  # the exported classifier predicts what the run predicted on test
        expected = predict.predict(tmp_path / "run", "test")["prediction"]
        export = jaxenc.export(tmp_path / "run", tmp_path / "export", platforms=("cpu",))
        texts = [text for _, text in rows[:5]]
        for encoder in (jaxenc.load(export), Encoder.from_workdir(tmp_path / "run")):
            predicted = encoder.predict(texts)
            assert predicted.labels == [["loss", "win"][i] for i in expected]
            assert predicted.probabilities.shape == (5, 2) and predicted.scores is None
            np.testing.assert_allclose(predicted.probabilities.sum(1), 1.0, rtol=1e-5)


def test_a_relatedness_pair_file_trains_with_the_relatedness_head(tmp_path):
    rows = "".join(f"{a}\t{b}\t{1 + i % 5}\n" for i, (a, b) in enumerate(
        zip(SENTENCES, reversed(SENTENCES), strict=True)))
    train = write(tmp_path / "train.tsv", "text_a\ttext_b\tscore\n" + rows * 2)
    test = write(tmp_path / "test.tsv", "text_a\ttext_b\tscore\n" + rows)
    config = tiny_files_config("bag", train_file=train, test_file=test)
    row = loop.train_and_evaluate(config, tmp_path / "run")
    assert row["steps"] == 2 and -1.0 <= row["test pearson"] <= 1.0
    expected = predict.predict(tmp_path / "run", "test")["prediction"]
    export = jaxenc.export(tmp_path / "run", tmp_path / "export", platforms=("cpu",))
    pairs = [tuple(line.split("\t")[:2]) for line in rows.splitlines()]
    predicted = jaxenc.load(export).predict(pairs)
    assert predicted.labels is None and predicted.probabilities.shape == (8, 5)
    np.testing.assert_allclose(predicted.scores, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ConfigError, match="item 0 is not a \\(first, second\\) pair"):
        jaxenc.load(export).predict(["one sentence ."])


def test_a_files_run_resumes_from_another_folder_but_not_on_other_rows(tmp_path):
    rows = list(zip(LABELS * 2, SENTENCES * 2, strict=True))
    train = _write_format(tmp_path, ".tsv", rows)
    loop.train_and_evaluate(tiny_files_config("bag", train_file=train), tmp_path / "run")
    moved = tmp_path / "moved"
    moved.mkdir()
    copy = write(moved / train.name, train.read_text())
    config = tiny_files_config("bag", train_file=copy)
    config.train.num_steps = 3
    assert loop.train_and_evaluate(config, tmp_path / "run")["steps"] == 3
    write(copy, copy.read_text().replace("win", "loss", 1))
    config.train.num_steps = 4
    with pytest.raises(ConfigError, match="was trained on other"):
        loop.train_and_evaluate(config, tmp_path / "run")


def test_a_run_refused_on_a_bad_row_leaves_no_workdir(tmp_path):
    train = write(tmp_path / "train.tsv", "positive\tgood .\nnegative\t\n")
    with pytest.raises(DataError, match="train.tsv:2: empty 'text'"):
        experiment.run(tiny_files_config("bag", train_file=train), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_an_encoder_without_a_task_head_says_it_only_encodes():
    from jaxenc.data.synthetic import generate

    sentences = [example.sentences[0] for example in generate(4, seed=3)]
    encoder = Encoder.initialised(base.model_config("bag", embed_dim=8), sentences)
    with pytest.raises(ConfigError, match="has no task head to predict with: it encodes only"):
        encoder.predict(["a sentence ."])
