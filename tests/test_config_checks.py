"""The config checks and the --help of train.main: every flag named, every key described."""

import dataclasses
import importlib
import pkgutil

import ml_collections
import pytest

import train.configs
from jaxenc import configs
from jaxenc.errors import ConfigError
from jaxenc.models import registry
from jaxenc.models.config import EncoderConfig
from jaxenc.training import sections, usage, validation
from train.configs import phrase_transformer_pos


def _flat_keys(section, prefix):
    for key, value in section.items():
        if isinstance(value, ml_collections.ConfigDict):
            yield from _flat_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


@pytest.mark.parametrize("model", list(registry.ENCODERS))
def test_every_key_outside_the_model_sections_is_a_field_of_its_section(model):
    config = configs.get_config(f"{model},trec")
    keys = {key for section in config.keys() if section not in ("model", "baselines", "recipes")
            for key in _flat_keys(config[section], f"{section}.")}
    assert keys == set(sections.MEANINGS) == {key for key, _ in sections.keys()}
    assert set(validation.RULES) <= keys and usage.MEANINGS is sections.MEANINGS


def test_typed_sections_hold_the_config_values_and_read_as_mappings():
    """What a component receives (`Sections.of`) is the config's values, by attribute and by
    key alike; the carved splits' seed is task.split_seed, or train.seed when it is -1."""
    config = configs.get_config("disan,trec")
    config.data.update(dict(batch_size=32, text_columns="a,b"))
    config.task.head.hidden_dims = (7, 5)
    config.train.seed = 3
    typed = sections.Sections.of(config)
    for name in sections.SECTIONS:
        expected = config[name].to_dict()
        assert dict(_flat_items(getattr(typed, name))) == dict(_flat_items(expected))
    assert typed.data["batch_size"] == typed.data.batch_size == 32
    assert typed.data.get("no_such_key", "absent") == "absent" and "text_columns" in typed.data
    with pytest.raises(KeyError):
        typed.data["no_such_key"]
    assert typed.task.head.hidden_dims == (7, 5) and typed.split_seed == 3
    config.task.split_seed = 11
    assert sections.Sections.of(config).split_seed == 11


def _flat_items(section, prefix=""):
    for key, value in section.items():
        if hasattr(value, "items"):
            yield from _flat_items(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", tuple(value) if isinstance(value, list) else value


def test_every_key_has_a_meaning_and_every_number_a_check():
    """A key's meaning is one line of --help; a number needs a check (a string or a bool keeps
    its type, which the config enforces)."""
    for key, field in sections.keys():
        meaning = field.metadata["meaning"]
        assert meaning and "\n" not in meaning and len(meaning) < 100, key
        default = field.default_factory() if field.default is dataclasses.MISSING \
            else field.default
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert field.metadata["check"] is not None, f"{key} has no check"
        if field.metadata["check"] is not None:
            assert field.metadata["check"].accepts(default), key


@pytest.mark.parametrize("model", list(registry.ENCODERS))
def test_every_model_field_is_described_from_its_config_class(model):
    cls = registry.encoder_spec(model).config
    docs = usage.field_docs(cls)
    assert list(docs) == [field.name for field in dataclasses.fields(cls)]
    assert all(docs.values())


def test_field_docs_come_from_attributes_sections_and_field_comments():
    disan = usage.field_docs(registry.encoder_spec("disan").config)
    assert disan["hidden"] == "d_h, the width of each direction (the sentence vector is 2 d_h)."
    assert disan["block_size"].startswith("queries per block of the blocked implementation")
    psan = usage.field_docs(registry.encoder_spec("psan").config)
    assert psan["num_levels"].startswith("the structure options")  # "parser, num_levels, ...:"
    transformer = usage.field_docs(registry.encoder_spec("transformer").config)
    assert transformer["scale_embeddings"].startswith("Vaswani et al. multiply the embeddings")
    assert transformer["num_heads"].startswith("attention heads per layer")
    assert usage.field_docs(EncoderConfig)["embed_dim"].startswith("width of the word table")


def test_one_line_keeps_the_first_sentence_within_the_limit():
    text = "sigma_h of eq. 14 (the hidden layer; as\n  the paper). More here."
    assert usage._one_line(text, 80) == "sigma_h of eq. 14 (the hidden layer; as the paper)"
    assert usage._one_line(text, 20) == "sigma_h of eq. 14"
    assert usage._one_line("a b c d e f g h", 10) == "a b c..."


def _bad_value(rule, default):
    candidates = {int: [-1, 0, -2], float: [-1.0, 0.0, 1.0], tuple: [(0,)]}[type(default)]
    return next(value for value in candidates if not rule.accepts(value))


@pytest.mark.parametrize("key", list(validation.RULES))
def test_each_rule_names_the_flag_and_its_default(key):
    config = configs.get_config("bag,trec")
    holder = config
    *sections, name = key.split(".")
    for section in sections:
        holder = holder[section]
    default = holder[name]
    bad = _bad_value(validation.RULES[key], default)
    holder[name] = bad
    with pytest.raises(ConfigError) as error:
        validation.check_config(config)
    message = str(error.value)
    assert message.startswith(f"--config.{key}={bad}: must be ")
    assert message.endswith(f"(fix: --config.{key}={default}, the default)")
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize("field, bad", [("num_heads", 0), ("dropout_rate", 1.0),
                                        ("attention_dropout_rate", -0.1)])
def test_model_rules_apply_to_the_model_and_the_baselines(field, bad):
    config = phrase_transformer_pos.get_config()
    validation.check_config(config)
    for prefix in ("model", "baselines.transformer"):
        changed = phrase_transformer_pos.get_config()
        section = changed.model if prefix == "model" else changed.baselines.transformer
        section[field] = bad
        with pytest.raises(ConfigError, match=rf"^--config\.{prefix}\.{field}={bad}: must be"):
            validation.check_config(changed)


def test_a_model_class_error_names_the_baseline_flag():
    config = phrase_transformer_pos.get_config()
    config.baselines.transformer.num_heads = 7
    with pytest.raises(ConfigError) as error:
        validation.check_config(config)
    assert str(error.value) == (
        "--config.baselines.transformer.model_dim=300 is not divisible by "
        "baselines.transformer.num_heads=7 (fix: --config.baselines.transformer.model_dim=294)")


def test_auto_model_options_are_resolved_into_the_config_after_overrides():
    config = phrase_transformer_pos.get_config()
    config.model.hypernodes = "dependency"  # as --config.model.hypernodes=dependency
    config.baselines.ngram = configs.model_config("phrase_transformer")
    config.baselines.hadamard = configs.model_config("phrase_transformer", phrase_mask="hadamard")
    assert {config.model.phase2, config.baselines.ngram.phase2} == {"auto"}
    validation.check_config(config)
    assert config.model.phase2 == "dense"
    assert config.baselines.ngram.phase2 == "sparse"
    assert config.baselines.hadamard.phase2 == "dense"
    assert config.baselines.transformer == phrase_transformer_pos.get_config().baselines.transformer


def test_an_explicit_invalid_combination_stays_a_one_line_error():
    config = phrase_transformer_pos.get_config()
    config.model.hypernodes = "dependency"
    config.model.phase2 = "sparse"
    with pytest.raises(ConfigError) as error:
        validation.check_config(config)
    assert str(error.value) == (
        "--config.model.phase2='sparse' has no fixed neighbour list for dependency hypernodes "
        "(a head word has one per dependent) (fix: --config.model.phase2=dense)")
    assert config.model.phase2 == "sparse"


@pytest.mark.parametrize("made_for, dataset, parser", [
    ("sst5_trees", "sst5_trees", "gold"),       # the data's phrase trees
    ("trec", "trec", "spacy-constituency"),     # no trees: spaCy's, as before "auto"
    ("sst2_trees", "trec", "spacy-constituency"),  # --config.task.dataset=trec: no gold to read
    ("trec", "snli", "gold"),                   # --config.task.dataset=snli: its trees
])
def test_psan_parser_auto_is_resolved_by_the_dataset_after_overrides(made_for, dataset, parser):
    config = configs.get_config(f"psan,{made_for}")
    assert config.model.parser == "auto"
    config.task.dataset = dataset  # as --config.task.dataset=...
    config.baselines.psan = configs.model_config("psan")
    validation.check_config(config)
    assert config.model.parser == config.baselines.psan.parser == parser
    validation.check_config(config)  # resolving again changes nothing
    assert config.model.parser == parser
    made_for_it = configs.get_config(f"psan,{dataset}")  # what a config made for it trains
    validation.check_config(made_for_it)
    assert made_for_it.model.parser == parser


def test_a_fixed_parser_default_is_still_set_when_the_config_is_made():
    assert configs.get_config("tree_lstm,synthetic").model.parser == "gold"
    assert configs.get_config("tree_lstm,trec").model.parser == "spacy"


@pytest.mark.parametrize("prefix", ["model", "baselines.psan"])
def test_an_explicit_parser_that_gives_psan_no_phrase_trees_is_a_one_line_error(prefix):
    config = configs.get_config("disan,sst5_trees")
    config.baselines.psan = configs.model_config("psan")
    section = config.model if prefix == "model" else config.baselines.psan
    if prefix == "model":
        config.model = section = configs.model_config("psan")
    section.parser = "spacy"
    with pytest.raises(ConfigError) as error:
        validation.check_config(config)
    assert str(error.value) == (f"--config.{prefix}.parser='spacy' gives no phrase trees for "
                                f"PSAN (fix: --config.{prefix}.parser=auto)")
    assert section.parser == "spacy"


def test_an_explicit_benepar_parser_without_benepar_is_a_one_line_error():
    import importlib.util

    if importlib.util.find_spec("benepar") is not None:
        pytest.skip("benepar is installed here")
    config = configs.get_config("psan,trec")
    config.model.parser = "benepar"
    with pytest.raises(ConfigError) as error:
        validation.check_config(config)
    message = str(error.value)
    assert message.startswith("--config.model.parser='benepar': the benepar parser needs benepar")
    assert message.endswith("(fix: install it, or --config.model.parser=auto)")
    assert "\n" not in message and "pip install 'jaxenc[benepar]'" in message


def test_no_epochs_and_no_steps_is_refused():
    config = configs.get_config("bag,trec")
    config.train.epochs = 0
    with pytest.raises(ConfigError, match=r"^--config.train.epochs=0 trains nothing"):
        validation.check_config(config)
    config.train.num_steps = 100
    validation.check_config(config)


def test_every_shipped_config_passes():
    for module in pkgutil.iter_modules(train.configs.__path__):
        if not module.name.startswith("_"):
            validation.check_config(
                importlib.import_module(f"train.configs.{module.name}").get_config())


@pytest.mark.parametrize("path, message", [
    ("optim.learning_rate", None),
    ("task.head.decoder.beam_size", None),
    ("optim.lr", "unknown key --config.optim.lr (did you mean --config.optim.learning_rate?)"),
    ("optm.lr", "unknown key --config.optm.lr (did you mean --config.optim.lr?)"),
    ("optim.nme", "unknown key --config.optim.nme (did you mean --config.optim.name?)"),
    ("data.bs", "unknown key --config.data.bs (did you mean --config.data.batch_size or "
                "--config.data.bucket_step?)"),
    ("train.learnig_rate", "unknown key --config.train.learnig_rate (did you mean "
                           "--config.optim.learning_rate?)"),  # a key of another section
    ("learning_rate", "unknown key --config.learning_rate (did you mean "
                      "--config.optim.learning_rate?)"),
    ("model.zzz", "unknown key --config.model.zzz (fix: a key of --config.model: dtype, "
                  "embed_dim, freeze_embeddings, name; every key: --help)"),
    ("baselines.x", "unknown key --config.baselines.x (fix: --config.baselines is empty in "
                    "this config; --help)"),
    ("data.batch_size.x", "--config.data.batch_size.x: --config.data.batch_size is a value, "
                          "not a section (fix: --config.data.batch_size=VALUE)"),
])
def test_unknown_keys_are_named_with_the_closest_keys(path, message):
    assert validation.unknown_key(configs.get_config("bag,trec"), path) == message


@pytest.mark.parametrize("key, value, fix", [("batch_size", 12, 16),
                                             ("eval_batch_size", 100, 104)])
def test_a_batch_that_does_not_split_over_the_devices_is_named_before_any_data_is_read(
        tmp_path, key, value, fix):
    import jax

    from jaxenc.training import experiment

    devices = jax.device_count()  # 8 fake CPU devices (conftest)
    assert devices == 8
    config = configs.get_config("bag,synthetic")
    config.data[key] = value
    with pytest.raises(ConfigError) as error:
        experiment.run(config, tmp_path / "run")
    assert str(error.value) == (f"--config.data.{key}={value} does not split over 8 devices "
                                f"(fix: --config.data.{key}={fix}, a multiple of 8)")
    assert not (tmp_path / "run").exists()
