"""Short real runs: the bag baseline on TREC (partial GloVe) and on SICK-R (relatedness head)."""

from pathlib import Path

from jaxenc.data import registry
from jaxenc.training import experiment, input_pipeline, run_report
from train.configs import base

GLOVE_50D = Path("glove_subsets") / "glove.6B.50d.first2446.txt"


def _short(config, data_root: Path, epochs: int):
    config.model.embed_dim = 50
    config.data.update(dict(data_dir=str(data_root), embeddings=str(data_root / GLOVE_50D),
                            batch_size=64, eval_batch_size=256))
    config.optim.update(dict(name="adam", learning_rate=3e-3, weight_decay=0.0, clip_norm=5.0))
    config.train.update(dict(epochs=epochs, progress_bar=False, log_every=20))
    return config


def test_bag_on_trec_beats_chance_by_far(data_root, tmp_path):
    config = _short(base.get_config("bag,trec"), data_root, epochs=4)
    config.task.head.hidden_dims = (100,)
    splits = input_pipeline.load_splits(config)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [4907, 545, 500]
    again = input_pipeline.load_splits(config)  # the carved dev split is the same every time
    assert [e.uid for e in again["dev"]] == [e.uid for e in splits["dev"]]
    assert not {e.uid for e in splits["dev"]} & {e.uid for e in splits["train"]}
    majority = max(sum(e.label == c for e in splits["dev"]) for c in range(6)) / 545

    (row,) = experiment.run(config, tmp_path)
    assert row["dev accuracy"] > majority + 0.35, (row, majority)
    assert row["test accuracy"] > 0.6, row
    dev = run_report.read_metrics(tmp_path / run_report.METRICS_FILE, "dev")
    assert len(dev) == 4 and row["best step"] == max(dev, key=lambda r: r["accuracy"])["step"]


def test_bag_on_sick_r_learns_relatedness(data_root, tmp_path):
    config = _short(base.get_config("bag,sick_r"), data_root, epochs=3)
    info = registry.DATASETS["sick_r"]
    assert info.kind == "relatedness" and info.num_classes == 5
    (row,) = experiment.run(config, tmp_path)
    assert row["dev pearson"] > 0.5 and row["test pearson"] > 0.5, row
    assert 0.0 < row["test mse"] < 1.5 and row["test spearman"] > 0.4, row

