"""The per-epoch benchmark (python -m bench.bench_epoch): its config specs, and one run of two
models on the embedded dataset checked for its table and for nothing recompiling after the
warm-up epoch, never for its timings."""

import math

import pytest

from bench import bench_epoch
from jaxenc.errors import ConfigError

SMALL = "model.embed_dim=16;model.model_dim=16;model.ff_dim=32;model.num_heads=2"


def test_a_spec_names_a_config_module_or_base_and_typed_overrides():
    label, config = bench_epoch.load_config(
        "Transformer=dependency_transformer_{dataset}:model.variant=transformer;"
        "model.num_layers=1;data.lowercase_fallback=False", "sick_e", batch=16)
    assert label == "Transformer"
    assert config.model.name == "dependency_transformer"
    assert config.model.variant == "transformer" and config.model.num_layers == 1
    assert config.data.lowercase_fallback is False
    assert config.optim.name == "adagrad"  # the paper config module, not base.py's default
    assert config.data.batch_size == config.data.eval_batch_size == 16
    assert config.data.embeddings == ""
    label, config = bench_epoch.load_config("bag=bag,{dataset}", "trec", batch=8)
    assert (label, config.model.name, config.task.dataset) == ("bag", "bag", "trec")


def test_two_models_take_turns_over_real_epochs(tmp_path):
    out = tmp_path / "epoch.md"
    rows = bench_epoch.main(["--dataset", "synthetic", "--batch", "40", "--repeats", "1",
                             "--models", f"Transformer=transformer,{{dataset}}:{SMALL};"
                             "model.num_layers=1", "bag=bag,{dataset}:model.embed_dim=16",
                             "--out", str(out)])
    assert [row["label"] for row in rows] == ["Transformer", "bag"]
    for row in rows:
        assert 4000 // 40 <= row["steps"] <= 4000 // 40 + 8  # + a partial batch per bucket
        assert math.isfinite(row["epoch_s"]) and row["epoch_s"] > 0
        assert math.isfinite(row["test_s"]) and row["test_s"] > 0
        assert row["recompiles"] == 0 and row["shapes"] >= 1
        assert row["test_sentences"] == 500  # the embedded test split, padding rows not counted
    table = out.read_text().splitlines()
    assert table[2].startswith("| model |") and len(table) == 4 + len(rows)
    assert table[4].startswith("| Transformer |") and "| 1.00 |" in table[4]


@pytest.mark.parametrize("spec, problem", [
    ("DT=no_such_config", "no config module train/configs/no_such_config.py"),
    ("bag=bag,{dataset}:model.no_such_field=1", "cannot set model.no_such_field=1"),
])
def test_a_bad_spec_is_a_config_error_naming_it(spec, problem):
    with pytest.raises(ConfigError, match=problem):
        bench_epoch.load_config(spec, "trec", batch=8)
