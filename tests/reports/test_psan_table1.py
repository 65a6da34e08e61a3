"""results/psan/table1.md against the numbers reports.psan_table1 stores (the gold-tree rows
re-measured when the data folder is present), and a row for every PSAN training config."""

import re
from pathlib import Path

from jaxenc.structures import stats
from reports import psan_table1 as table1

REPO = Path(__file__).resolve().parents[2]


def test_table1_md_is_the_rendering_of_the_stored_numbers():
    stored = table1.load_stored()
    assert stored, "results/psan/table1.json is missing (fix: python -m reports.psan_table1)"
    assert table1.TABLE.read_text(encoding="utf-8") == table1.render(stored), (
        "results/psan/table1.md differs from its rendering (fix: python -m reports.psan_table1 "
        "--render)")


def test_stored_rows_read_the_trees_psan_gets():
    stored = table1.load_stored()
    for key, numbers in stored.items():
        row = table1.ROWS_BY_KEY[key]
        model = table1.psan_model_config(row.datasets[0])
        assert numbers["parser"] == (row.parser or model.parser), key
        assert (numbers["num_levels"], numbers["min_split_len"], numbers["binarize"],
                numbers["division"]) == (model.num_levels, model.min_split_len, model.binarize,
                                         model.division), key
    assert {stored[key]["parser"] for key in ("sst5_trees", "sst5_phrases", "snli")} == {"gold"}
    assert stored["trec"]["parser"] == stored["ud_ewt"]["parser"] == "spacy-constituency"
    assert stored["ud_ewt_gold"]["parser"] == stored["ptb_sample"]["parser"] == "gold"


def test_every_psan_training_config_has_a_row():
    trained = {match for path in (REPO / "train" / "configs").glob("psan_*.py")
               for match in re.findall(r'paper_config\("psan", "(\w+)"\)', path.read_text())}
    assert trained, "no train/configs/psan_*.py names its dataset as the test expects"
    covered = {dataset for row in table1.ROWS if table1.TRAINING in row.uses
               for dataset in row.datasets}
    assert trained <= covered


def test_gold_rows_equal_a_fresh_measurement(data_root, tmp_path):
    stored = table1.load_stored()
    # gold trees: nothing to parse
    for key in ("sst5_trees", "sst2_trees", "snli", "ud_ewt_gold", "ptb_sample"):
        assert table1.measure(table1.ROWS_BY_KEY[key], str(data_root),
                              str(tmp_path)) == stored[key], key
    assert stored["sst5_trees"]["sentences"] == 11855
    assert stored["sst5_trees"]["phrases_per_sentence"] == [1.99, 3.25, 4.62]


def test_ud_gold_row_is_what_the_stats_command_prints(data_root, capsys):
    """`python -m jaxenc.structures.stats --conllu` over the UD English-EWT files (phrase trees
    derived from the gold arcs, straight from CoNLL-U) prints the ud_ewt_gold row's numbers."""
    folder = data_root / "ud_english_ewt"
    files = sorted(str(path) for path in folder.glob("en_ewt-ud-*.conllu"))
    assert len(files) >= 3, f"no UD English-EWT CoNLL-U files in {folder}"
    stats.main(["--conllu", "--trees", *files])
    measured = capsys.readouterr().out.splitlines()[2].strip("| ").split(" | ")[1:]
    stored = table1.load_stored()["ud_ewt_gold"]
    assert measured == [str(stored["sentences"])] + [
        f"{value:.2f}" for value in stored["phrases_per_sentence"] + stored["words_per_phrase"]]
