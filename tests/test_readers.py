"""Dataset readers: encodings and line handling, each format against a slow reference parse written
here, and bad input (files the tests write) raising DataError that names file and line."""

import collections
import json
import logging
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxenc import text_io
from jaxenc.data import mrpc, multi30k, senteval_binary, sick, snli, sst, sts, trec
from jaxenc.errors import DataError
from jaxenc.structures.trees import parse_bracketed

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0 and C1 control characters, CR among them


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _raw_lines(path: Path) -> list[bytes]:
    """Reference line split: bytes on b"\\n", CR and a final empty chunk removed."""
    chunks = path.read_bytes().split(b"\n")
    if chunks[-1] == b"":
        chunks.pop()
    return [chunk.removesuffix(b"\r") for chunk in chunks]


def _assert_clean(examples) -> None:
    """No CR, BOM or control character in any token; no CR or BOM in any text."""
    for example in examples:
        sentences = example.sentences + ((example.target,) if example.target else ())
        for sentence in sentences:
            assert not any(_CONTROLS.search(token) or "\ufeff" in token
                           for token in sentence.tokens), example.uid
            assert "\r" not in sentence.text and "\ufeff" not in sentence.text, example.uid


def _assert_error_at(error: pytest.ExceptionInfo, file_name: str, line: int) -> None:
    message = str(error.value)
    assert f"{file_name}:{line}:" in message, message
    assert "\n" not in message and "(fix: " in message


# ----------------------------------------------------------------------------------- text_io

def test_read_lines_strips_bom_and_crlf_and_numbers_lines(tmp_path):
    path = _write(tmp_path / "f.txt", b"\xef\xbb\xbfa\tb\r\nc\r\n\r\nlast")
    lines = text_io.read_lines(path)
    assert [line.text for line in lines] == ["a\tb", "c", "", "last"]
    assert [line.number for line in lines] == [1, 2, 3, 4]
    assert lines[1].uid == "f.txt:2"


def test_read_lines_splits_on_newline_only(tmp_path):
    # 0x85 is U+0085 (a line break for str.splitlines) in latin-1 and "…" in cp1252.
    path = _write(tmp_path / "f.txt", b"so\x85 good\nfin\xe9\n")
    latin = text_io.read_lines(path, encoding="latin-1")
    assert [line.text for line in latin] == ["so\x85 good", "fin\xe9"]
    assert len(path.read_bytes().decode("latin-1").splitlines()) == 3  # the trap avoided
    assert [line.text for line in text_io.read_lines(path, encoding="cp1252")] == [
        "so\u2026 good", "fin\xe9"]


def test_cp1252_decoding_agrees_with_python_codec_and_never_fails(tmp_path):
    path = _write(tmp_path / "all_bytes.bin", bytes(byte for byte in range(256) if byte != 0x0A))
    (line,) = text_io.read_lines(path, encoding="cp1252")
    expected = []
    for byte in range(256):
        if byte == 0x0A:
            continue
        try:
            expected.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:  # the five bytes cp1252 leaves undefined stay latin-1
            expected.append(bytes([byte]).decode("latin-1"))
    assert line.text == "".join(expected).removesuffix("\r")


def test_undecodable_byte_names_file_and_line(tmp_path):
    path = _write(tmp_path / "latin.txt", b"ok\nok\nna\xefve\n")
    with pytest.raises(DataError) as error:
        text_io.read_lines(path)
    _assert_error_at(error, "latin.txt", 3)
    assert "0xef" in str(error.value)


def test_missing_file_names_path(tmp_path):
    with pytest.raises(DataError, match="nowhere.txt: file not found"):
        text_io.read_lines(tmp_path / "nowhere.txt")


def test_line_field_helpers_raise_with_file_and_line(tmp_path):
    line = text_io.Line(tmp_path / "x.tsv", 7, "a\tb\tnan")
    assert line.fields(3) == ["a", "b", "nan"]
    assert line.fields(2, at_least=True) == ["a", "b", "nan"]
    for call in (lambda: line.fields(2), lambda: line.fields(4, at_least=True),
                 lambda: line.number_field("nan", "score", low=0, high=5),
                 lambda: line.number_field("5.5", "score", low=0, high=5),
                 lambda: line.label_field("maybe", {"yes": 1, "no": 0}, "answer"),
                 lambda: line.nonempty("  ", "sentence")):
        with pytest.raises(DataError) as error:
            call()
        _assert_error_at(error, "x.tsv", 7)
    assert line.number_field(" 4.25 ", "score", low=0, high=5) == 4.25


@pytest.mark.parametrize("text, tokens", [
    ("A man isn't cutting the dog's hair.", "A man is n't cutting the dog 's hair ."),
    ('He said "no", then left.', 'He said " no " , then left .'),
    ("It cost $2.5 billion in 1998, i.e. 1,000 U.S. firms.",
     "It cost $ 2.5 billion in 1998 , i.e. 1,000 U.S. firms ."),
    ("Zwei Männer, ein Mädchen.", "Zwei Männer , ein Mädchen ."),
    ("a re-imagining of 21st-century can't-miss fare", "a re-imagining of 21st-century ca n't"
     " - miss fare"),
])
def test_tokenize_examples(text, tokens):
    assert text_io.tokenize(text) == tuple(tokens.split(" "))


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_tokenize_keeps_every_visible_character(text):
    tokens = text_io.tokenize(text)
    assert "".join(tokens) == _CONTROLS.sub("", "".join(text.split()))
    assert all(token and not any(char.isspace() for char in token) for token in tokens)
    assert not any(_CONTROLS.search(token) for token in tokens)


# -------------------------------------------------------------------------------------- SICK

def _sick_reference(path: Path) -> list[tuple[str, str, str, float]]:
    rows = [row.decode().split("\t") for row in _raw_lines(path)]
    header, rows = rows[0], rows[1:]
    label_column = "entailment_judgment" if "entailment_judgment" in header else "entailment_label"
    return [(row[header.index("sentence_A")].strip(), row[header.index("sentence_B")].strip(),
             row[header.index(label_column)], float(row[header.index("relatedness_score")]))
            for row in rows]


@pytest.mark.parametrize("file_name, count", [
    ("SICK_train.txt", 4500), ("SICK_trial.txt", 500), ("SICK_test_annotated.txt", 4927)])
def test_sick_per_split_files(data_root, file_name, count):
    examples = sick.read_sick(data_root / "sick" / file_name)
    reference = _sick_reference(data_root / "sick" / file_name)
    assert len(examples) == len(reference) == count
    for example, (first, second, label, score) in zip(examples, reference, strict=True):
        assert (example.sentences[0].text, example.sentences[1].text) == (first, second)
        assert sick.ENTAILMENT_LABELS[example.label] == label.lower()
        assert example.score == score and 1 <= score <= 5
    assert set(collections.Counter(example.label for example in examples)) == {0, 1, 2}
    _assert_clean(examples)  # SICK_test_annotated.txt has CRLF line ends


def test_sick_full_release_agrees_with_per_split_files(data_root):
    folder = data_root / "sick"
    split_column = [row.decode().split("\t")[-1] for row in
                    _raw_lines(folder / "SICK_full_12col.txt")[1:]]
    for split, file_name in (("train", "SICK_train.txt"), ("dev", "SICK_trial.txt"),
                             ("test", "SICK_test_annotated.txt")):
        full = sick.read_sick(folder / "SICK_full_12col.txt", split=split)
        assert len(full) == split_column.count(sick.SPLIT_COLUMN_VALUES[split])
        per_split = collections.defaultdict(set)
        for example in sick.read_sick(folder / file_name):
            per_split[example.sentences[0].text, example.sentences[1].text].add(
                (example.label, example.score))
        for example in full:
            pair = example.sentences[0].text, example.sentences[1].text
            assert (example.label, example.score) in per_split[pair], example.uid
        _assert_clean(full)


_SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


@pytest.mark.parametrize("bad_row, problem", [
    ("2\tA dog runs\tA dog is running\t4.5\n", "expected 5"),
    ("2\tA dog runs\tA dog is running\tvery\tNEUTRAL\n", "relatedness_score 'very'"),
    ("2\tA dog runs\tA dog is running\t5.5\tNEUTRAL\n", "relatedness_score '5.5'"),
    ("2\tA dog runs\tA dog is running\t3\tMAYBE\n", "unknown entailment_judgment 'MAYBE'"),
    ("2\t \tA dog is running\t3\tNEUTRAL\n", "empty sentence_A"),
])
def test_sick_bad_row_names_file_and_line(tmp_path, bad_row, problem):
    good = "1\tA man sings\tA person sings\t4.9\tENTAILMENT\n"
    path = _write(tmp_path / "SICK_bad.txt", _SICK_HEADER + good + bad_row)
    with pytest.raises(DataError, match=problem) as error:
        sick.read_sick(path)
    _assert_error_at(error, "SICK_bad.txt", 3)


def test_sick_layout_and_split_mismatches(tmp_path):
    per_split = _write(tmp_path / "SICK_train.txt", _SICK_HEADER + "1\ta\tb\t1\tNEUTRAL\n")
    with pytest.raises(DataError, match="no SemEval_set column"):
        sick.read_sick(per_split, split="train")
    full = _write(tmp_path / "full.txt", "pair_ID\tsentence_A\tsentence_B\tentailment_label\t"
                  "relatedness_score\tSemEval_set\r\n1\ta\tb\tNEUTRAL\t2\tTRIAL\r\n")
    with pytest.raises(DataError, match="needs split="):
        sick.read_sick(full)
    (example,) = sick.read_sick(full, split="dev")
    assert (example.label, example.score, example.uid) == (1, 2.0, "full.txt:2")
    assert sick.read_sick(full, split="test") == []
    with pytest.raises(DataError, match="lacks column"):
        sick.read_sick(_write(tmp_path / "noheader.txt", "1\ta\tb\t1\tNEUTRAL\n"))


# -------------------------------------------------------------------------------------- TREC

@pytest.mark.parametrize("file_name, count", [("TREC.train", 5452), ("TREC.test", 500)])
def test_trec_against_reference(data_root, file_name, count):
    path = data_root / "trec" / file_name
    examples = trec.read_trec(path)
    reference = [row.decode("latin-1").split(" ", 1) for row in _raw_lines(path)]
    assert len(examples) == len(reference) == count
    for example, (tag, question) in zip(examples, reference, strict=True):
        assert trec.FINE_LABELS[example.fine_label] == tag
        assert trec.COARSE_LABELS[example.label] == tag.split(":")[0]
        assert example.sentences[0].tokens == tuple(question.split())
    assert set(example.label for example in examples) == set(range(len(trec.COARSE_LABELS)))
    fine = trec.read_trec(path, fine=True)
    assert [example.label for example in fine] == [example.fine_label for example in examples]
    _assert_clean(examples)


def test_trec_latin1_byte(data_root):
    questions = [example.sentences[0].text for example in
                 trec.read_trec(data_root / "trec" / "TREC.train")]
    assert sum("sister\u00f0city" in question for question in questions) == 1


@pytest.mark.parametrize("bad_line, problem", [
    ("DESC How did it go ?", "no 'COARSE:fine' label"),
    ("WHAT:manner How did it go ?", "unknown coarse class 'WHAT'"),
    ("DESC:colour How did it go ?", "unknown fine class 'DESC:colour'"),
    ("DESC:manner", "empty question"),
])
def test_trec_bad_line_names_file_and_line(tmp_path, bad_line, problem):
    path = _write(tmp_path / "TREC.bad", f"NUM:date When did it end ?\n{bad_line}\n")
    with pytest.raises(DataError, match=problem) as error:
        trec.read_trec(path)
    _assert_error_at(error, "TREC.bad", 2)


# -------------------------------------------------------------------------------------- MRPC

@pytest.mark.parametrize("file_name, count", [
    ("msr_paraphrase_train.txt", 4076), ("msr_paraphrase_test.txt", 1725)])
def test_mrpc_against_reference(data_root, file_name, count):
    path = data_root / "mrpc" / file_name
    examples = mrpc.read_mrpc(path)
    reference = [row.decode("utf-8-sig").split("\t") for row in _raw_lines(path)]
    assert len(examples) == len(reference) == count
    for example, (quality, _, _, first, second) in zip(examples, reference, strict=True):
        assert example.label == int(quality)
        assert (example.sentences[0].text, example.sentences[1].text) == (first, second)
    counts = collections.Counter(example.label for example in examples)
    assert counts[1] > counts[0] > 0  # about two thirds are paraphrases
    _assert_clean(examples)


def test_mrpc_bom_crlf_and_header(tmp_path):
    path = _write(tmp_path / "msr.txt", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
                  "1\t1\t2\tHe's here.\tHe is here.\r\n0\t3\t4\tIt rains\tIt's sunny!\r\n")
    first, second = mrpc.read_mrpc(path)
    assert (first.label, second.label) == (1, 0)
    assert first.sentences[0].tokens == ("He", "'s", "here", ".")
    assert second.sentences[1].text == "It's sunny!"
    assert (first.uid, second.uid) == ("msr.txt:2", "msr.txt:3")
    _assert_clean([first, second])
    bad = _write(tmp_path / "msr_bad.txt", "1\t1\t2\ta\tb\n2\t3\t4\tc\td\n")
    with pytest.raises(DataError, match="unknown Quality '2'") as error:
        mrpc.read_mrpc(bad)
    _assert_error_at(error, "msr_bad.txt", 2)


# --------------------------------------------------------------------------------------- SST

@pytest.mark.parametrize("folder, stem, num_classes", [
    ("sst2_sentences", "stsa.binary", 2), ("sst5_sentences", "stsa.fine", 5)])
def test_sst_sentence_files_against_reference(data_root, folder, stem, num_classes):
    path = data_root / folder / f"{stem}.dev"
    examples = sst.read_sst_sentences(path, num_classes=num_classes)
    reference = [row.decode().split(" ", 1) for row in _raw_lines(path)]
    assert [(example.label, example.sentences[0].tokens) for example in examples] == [
        (int(label), tuple(text.split())) for label, text in reference]
    assert set(example.label for example in examples) == set(range(num_classes))


def test_sst_sentence_label_out_of_range(tmp_path):
    path = _write(tmp_path / "stsa.binary.bad", "1 good\n2 so-so\n")
    with pytest.raises(DataError, match="unknown label '2'") as error:
        sst.read_sst_sentences(path, num_classes=2)
    _assert_error_at(error, "stsa.binary.bad", 2)


def _sst_words(bracketed: str) -> tuple[str, ...]:
    """Reference leaves: drop every "(label" and ")", keep the words."""
    return tuple(re.sub(r"\(\d", " ", bracketed).replace(")", " ").split())


def test_sst_trees_against_reference(data_root):
    path = data_root / "sst_ptb_trees" / "dev.txt"
    examples = sst.read_sst_trees(path)
    rows = [row.decode() for row in _raw_lines(path)]
    assert len(examples) == len(rows) == 1101
    for example, row in zip(examples, rows, strict=True):
        (sentence,) = example.sentences
        assert example.label == int(row[1]) and sentence.tree == row
        assert sentence.tokens == _sst_words(row)
    assert set(example.label for example in examples) == set(range(5))


def test_sst_binary_trees_map_labels_and_drop_neutral(tmp_path, caplog):
    lines = ["(0 (0 bad) (2 .))", "(2 (2 so) (2 so))", "(1 meh)", "(3 fine)", "(4 (4 great) (2 !))"]
    path = _write(tmp_path / "trees.txt", "\n".join(lines) + "\n")
    with caplog.at_level(logging.INFO):
        examples = sst.read_sst_trees(path, binary=True)
    assert [(example.label, example.uid) for example in examples] == [
        (0, "trees.txt:1"), (0, "trees.txt:3"), (1, "trees.txt:4"), (1, "trees.txt:5")]
    assert "skipped 1 records" in caplog.text and "trees.txt" in caplog.text


def _reference_phrases(bracketed: str) -> list[tuple[tuple[str, ...], int]]:
    """Every "(digit" bracket in the order of its "(", with the words up to its matching ")"."""
    phrases, open_brackets, words = [], [], []
    for label, close, word in re.findall(r"\((\d)|(\))|([^\s()]+)", bracketed):
        if label:
            open_brackets.append((len(phrases), len(words)))
            phrases.append(int(label))
        elif close:
            index, start = open_brackets.pop()
            phrases[index] = (tuple(words[start:]), phrases[index])
        else:
            words.append(word)
    return phrases


def test_expand_phrases_against_reference(tmp_path):
    tree = r"(3 (2 (2 The) (2 Rock)) (4 (2 8 1\/2) (3 (4 rocks) (2 .))))"
    path = _write(tmp_path / "one.txt", tree + "\n")
    (example,) = sst.read_sst_trees(path)
    assert example.sentences[0].tokens == ("The", "Rock", "8", r"1\/2", "rocks", ".")
    phrases = sst.expand_phrases(example)
    assert [(p.sentences[0].tokens, p.label) for p in phrases] == _reference_phrases(tree)
    assert phrases[0].sentences[0].tree == tree
    assert phrases[5].sentences[0].tree == r"(2 8 1\/2)"
    assert [p.uid for p in phrases[:2]] == ["one.txt:1#0", "one.txt:1#1"]


def test_expand_phrases_on_real_trees(data_root):
    examples = sst.read_sst_trees(data_root / "sst_ptb_trees" / "test.txt")[:100]
    for example in examples:
        tree = example.sentences[0].tree
        phrases = sst.expand_phrases(example)
        assert [(p.sentences[0].tokens, p.label) for p in phrases] == _reference_phrases(tree)
        assert phrases[0].sentences == example.sentences  # the root's subtree is the whole line
        for phrase in phrases[1:]:
            subtree = parse_bracketed(phrase.sentences[0].tree)
            assert (subtree.leaves(), subtree.label) == (
                list(phrase.sentences[0].tokens), str(phrase.label))


def test_repeat_emphasised_counts_each_phrase_by_label_and_root(tmp_path):
    # Root neutral (kept 3x as a whole sentence), one non-neutral and three neutral sub-phrases.
    tree = "(2 (2 (2 a) (3 good)) (2 film))"
    (example,) = sst.read_sst_trees(_write(tmp_path / "t.txt", tree + "\n"))
    phrases = sst.expand_phrases(example)
    repeated = sst.repeat_emphasised(phrases, 3)
    expected = []  # written out: root x3, (2 a good) x1, (2 a) x1, (3 good) x3, (2 film) x1
    for phrase, copies in zip(phrases, [3, 1, 1, 3, 1], strict=True):
        expected += [(phrase.sentences, phrase.label)] * copies
    assert [(p.sentences, p.label) for p in repeated] == expected
    assert len({p.uid for p in repeated}) == len(repeated)
    assert repeated[1].uid == phrases[0].uid + "*1"
    assert sst.repeat_emphasised(phrases, 1) == phrases
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        sst.repeat_emphasised(phrases, 0)


def test_sst_bad_trees_name_file_and_line(tmp_path):
    unbalanced = _write(tmp_path / "unbalanced.txt", "(2 fine)\n(3 (2 a) (3 b)\n")
    with pytest.raises(DataError, match="unbalanced.txt:2"):
        sst.read_sst_trees(unbalanced)
    bad_label = _write(tmp_path / "label.txt", "(2 fine)\n(3 (X a) (3 b))\n")
    (_, example) = sst.read_sst_trees(bad_label)
    with pytest.raises(DataError, match=r"label.txt:2: node label 'X'"):
        sst.expand_phrases(example)
    with pytest.raises(DataError, match=r"root.txt:1: node label 'S'"):
        sst.read_sst_trees(_write(tmp_path / "root.txt", "(S (2 a) (3 b))\n"))


# ------------------------------------------------------------------------ MR, CR, SUBJ, MPQA

@pytest.mark.parametrize("name", ["mr", "subj"])
def test_windows_1252_corpora_against_reference(data_root, name):
    corpus = senteval_binary.CORPORA[name]
    examples = senteval_binary.read_binary_corpus(data_root / name, name)
    reference = [(label, tuple(row.decode("cp1252").split()))
                 for label, file_name in enumerate(corpus.files)
                 for row in _raw_lines(data_root / name / file_name)]
    assert [(example.label, example.sentences[0].tokens) for example in examples] == reference
    _assert_clean(examples)


def test_blank_lines_are_kept_as_empty_sentences(tmp_path):
    _write(tmp_path / "custrev.pos", "great !\n\nlove it\n")
    _write(tmp_path / "custrev.neg", "broke .\n")
    examples = senteval_binary.read_binary_corpus(tmp_path, "cr")
    assert [(example.label, len(example.sentences[0])) for example in examples] == [
        (0, 2), (1, 2), (1, 0), (1, 2)]
    with pytest.raises(DataError, match="unknown binary corpus"):
        senteval_binary.read_binary_corpus(tmp_path, "imdb")


# -------------------------------------------------------------------------------------- SNLI

def test_snli_against_reference(data_root, caplog):
    path = data_root / "snli" / "snli_1.0_dev.first1289.jsonl"
    with caplog.at_level(logging.INFO):
        examples = snli.read_snli(path)
    records = [json.loads(row) for row in _raw_lines(path)]
    kept = [record for record in records if record["gold_label"] != "-"]
    assert len(records) == 1289 and len(examples) == len(kept) == 1289 - 16
    assert "skipped 16 records" in caplog.text
    for example, record in zip(examples, kept, strict=True):
        assert snli.NLI_LABELS[example.label] == record["gold_label"]
        for sentence, key in zip(example.sentences, ("sentence1", "sentence2"), strict=True):
            assert sentence.text == record[key]
            assert sentence.tree == record[f"{key}_parse"]
            assert sentence.binary_tree == record[f"{key}_binary_parse"]
            assert list(sentence.tokens) == parse_bracketed(sentence.tree).leaves()
    assert set(example.label for example in examples) == {0, 1, 2}


@pytest.mark.parametrize("bad_line, problem", [
    ('{"gold_label": "neutral", ', "invalid JSON"),
    ('{"gold_label": "neutral"}', "lacks string field"),
    ("[1, 2]", "lacks string field"),
])
def test_snli_bad_line_names_file_and_line(tmp_path, bad_line, problem):
    good = json.dumps({
        "gold_label": "entailment", "sentence1": "A b.", "sentence2": "A.",
        "sentence1_parse": "(ROOT (S (NP (DT A)) (NN b) (. .)))", "sentence2_parse": "(X (DT A))",
        "sentence1_binary_parse": "( ( A b ) . )", "sentence2_binary_parse": "( A . )"})
    path = _write(tmp_path / "snli_bad.jsonl", f"{good}\n{bad_line}\n")
    with pytest.raises(DataError, match=problem) as error:
        snli.read_snli(path)
    _assert_error_at(error, "snli_bad.jsonl", 2)
    unknown = _write(tmp_path / "snli_label.jsonl", good.replace('"entailment"', '"maybe"'))
    with pytest.raises(DataError, match="unknown gold_label 'maybe'"):
        snli.read_snli(unknown)


def test_snli_binary_parse_leaves():
    assert snli.binary_parse_leaves("( ( Two women ) ( ( are ( here -LRB- ) ) . ) )") == (
        "Two", "women", "are", "here", "-LRB-", ".")


# ---------------------------------------------------------------------------------- Multi30k

@pytest.mark.parametrize("split, count", [("dev", 1014), ("test", 1000)])
def test_multi30k_layouts_agree(data_root, split, count):
    folder = data_root / "multi30k"
    raw = multi30k.read_multi30k(folder, split, layout="raw")
    tokenized = multi30k.read_multi30k(folder, split)
    assert len(raw) == len(tokenized) == count
    assert raw[0].sentences[0].text == _raw_lines(
        folder / f"{multi30k.SPLIT_PREFIXES[split]}.de")[0].decode().strip()
    for side in (lambda example: example.sentences[0], lambda example: example.target):
        same = sum(tuple(token.lower() for token in side(a).tokens) == side(b).tokens
                   for a, b in zip(raw, tokenized, strict=True))
        assert same / count > 0.97  # our tokenizer vs Moses: they differ on "ca." / "st." only
    assert not any("&apos;" in example.target.text or "&quot;" in example.target.text
                   for example in tokenized)
    _assert_clean(raw + tokenized)


def test_parallel_files_must_align(tmp_path):
    _write(tmp_path / "a.de", "eins\nzwei\n")
    _write(tmp_path / "a.en", "one\n")
    with pytest.raises(DataError, match="2 source lines but 1 target lines"):
        multi30k.read_parallel(tmp_path / "a.de", tmp_path / "a.en", moses_tokenized=False)
    with pytest.raises(DataError, match="unknown Multi30k split"):
        multi30k.read_multi30k(tmp_path, "val")


# --------------------------------------------------------------------------------------- STS

def test_sts_subset_skips_unscored_pairs(tmp_path, caplog):
    _write(tmp_path / "STS.input.news.txt", "A cat sat.\tA cat sits.\nHi\tHello\n"
           "Stocks fell.\tMarkets dropped.\textra column\nNo.\tYes.\n")
    _write(tmp_path / "STS.gs.news.txt", "4.8\n\n3.25\r\n0\n")
    with caplog.at_level(logging.INFO):
        examples = sts.read_sts_subset(tmp_path, "news")
    assert [(example.score, example.uid) for example in examples] == [
        (4.8, "STS.input.news.txt:1"), (3.25, "STS.input.news.txt:3"),
        (0.0, "STS.input.news.txt:4")]
    assert examples[0].sentences[1].tokens == ("A", "cat", "sits", ".")
    assert examples[1].sentences[1].text == "Markets dropped."
    assert "skipped 1 records" in caplog.text and "STS.gs.news.txt" in caplog.text


@pytest.mark.parametrize("gold, problem, line", [
    ("4\nabc\n1\n", "gold score 'abc'", 2),
    ("4\n2\n5.5\n", "gold score '5.5'", 3),
])
def test_sts_bad_gold_names_file_and_line(tmp_path, gold, problem, line):
    _write(tmp_path / "STS.input.x.txt", "a\tb\nc\td\ne\tf\n")
    _write(tmp_path / "STS.gs.x.txt", gold)
    with pytest.raises(DataError, match=problem) as error:
        sts.read_sts_subset(tmp_path, "x")
    _assert_error_at(error, "STS.gs.x.txt", line)


def test_sts_misaligned_and_malformed(tmp_path):
    _write(tmp_path / "STS.input.x.txt", "a\tb\nc\td\n")
    _write(tmp_path / "STS.gs.x.txt", "1\n")
    with pytest.raises(DataError, match="2 sentence pairs but 1 gold lines"):
        sts.read_sts_subset(tmp_path, "x")
    _write(tmp_path / "STS.input.y.txt", "a\tb\nno tab here\n")
    _write(tmp_path / "STS.gs.y.txt", "1\n2\n")
    with pytest.raises(DataError) as error:
        sts.read_sts_subset(tmp_path, "y")
    _assert_error_at(error, "STS.input.y.txt", 2)


def test_stsb_reader(tmp_path, caplog):
    path = _write(tmp_path / "sts-dev.csv",
                  "main-captions\tMSRvid\t2012test\t0000\t5.000\tA man plays.\tA man is playing.\n"
                  "main-news\theadlines\t2015\t0001\t\tX\tY\n"
                  "main-news\theadlines\t2015\t0002\t1.5\tOil's up.\tOil is down.\tsrc\tsrc\n")
    with caplog.at_level(logging.INFO):
        first, second = sts.read_stsb(path)
    assert (first.score, second.score) == (5.0, 1.5)
    assert second.sentences[0].tokens == ("Oil", "'s", "up", ".")
    assert (first.uid, second.uid) == ("sts-dev.csv:1", "sts-dev.csv:3")
    assert "skipped 1 records" in caplog.text
    bad = _write(tmp_path / "sts-bad.csv", "g\ts\ty\t1\t-1\ta\tb\n")
    with pytest.raises(DataError, match="gold score '-1'") as error:
        sts.read_stsb(bad)
    _assert_error_at(error, "sts-bad.csv", 1)
