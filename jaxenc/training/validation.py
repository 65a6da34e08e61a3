"""Checks of a training config that name the offending `--config.` flag in one line.

`check_config(config)` refuses numeric values that cannot make sense (a negative batch size, a
learning rate of 0, a dropout rate of 1, ...) before anything is read or written, so a typo on
the command line never leaves a half-made workdir behind. Each rule of `RULES` (the keys' checks,
jaxenc.training.sections) and `MODEL_RULES` (every model section: `model` and each
`baselines.NAME`) states what a key must be; the fix offered is the key's default. A model
section is then validated by its own config class (jaxenc.models.config.EncoderConfig.validate),
whose messages name the same flags, and its
"auto" options are replaced in the config by the values the encoder is built with
(`registry.resolved_auto`; a `parser` left "auto" becomes "gold" first where task.dataset ships
the trees the model reads): overrides are applied by then, and the training loop checks the
config before it compares it with a resumed run's and saves it, so config.json records the
resolved values. An explicit parser="benepar" is checked to be installed here, before anything is
read.

`unknown_key(config, path)` words an override of a key the config does not have, with the
closest keys of that section as the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

import ml_collections

from jaxenc import configs
from jaxenc.errors import ConfigError
from jaxenc.models import registry
from jaxenc.models.config import AUTO
from jaxenc.training.sections import POSITIVE_INT, RATE, RULES, Rule

# Model field -> what its value must be, in every model section that has the field (the rest of
# a model's fields are checked by its config class).
MODEL_RULES: dict[str, Rule] = {
    **{field: POSITIVE_INT for field in (
        "embed_dim", "model_dim", "num_layers", "num_heads", "ff_dim", "hidden", "memory_dim",
        "relation_dim", "max_positions", "block_size", "num_levels")},
    "dropout_rate": RATE,
    "attention_dropout_rate": RATE,
}


def _flag(path: str, value: Any) -> str:
    shown = repr(value) if isinstance(value, str) else str(value)
    return f"--config.{path}={shown}"


def _refuse(path: str, value: Any, requirement: str, default: Any,
            whose: str = "the default") -> ConfigError:
    return ConfigError(f"{_flag(path, value)}: {requirement} (fix: {_flag(path, default)}, "
                       f"{whose})")


def _model_sections(config: ml_collections.ConfigDict) -> Iterator[tuple[str, Any]]:
    """(flag prefix, model section) of the model and of each baseline."""
    yield "model", config.model
    for name, section in config.get("baselines", {}).items():
        yield f"baselines.{name}", section


def _check_model(prefix: str, section: Any, dataset: str | None) -> None:
    """MODEL_RULES, then the model's config class, with messages naming `--config.<prefix>.`;
    then the section's "auto" options are set to their resolved values: a `parser` by `dataset`
    first (`_resolve_parser`), every other one by its config class."""
    spec = registry.encoder_spec(section["name"])
    defaults = spec.config().to_dict()
    for field, rule in MODEL_RULES.items():
        if field in section and not rule.accepts(section[field]):
            raise _refuse(f"{prefix}.{field}", section[field], rule.requirement, defaults[field])
    try:
        _resolve_parser(section, dataset)
        resolved = registry.resolved_auto(section)
        _check_parser_installed(section, defaults.get("parser"))
    except ConfigError as error:  # its message names "model.FIELD=VALUE ... --config.model.FIELD"
        text = str(error).replace("--config.model.", f"--config.{prefix}.")
        text = re.sub(r"(?<![\w.-])model\.", f"{prefix}.", text)
        if text.startswith(f"{prefix}."):
            text = f"--config.{text}"
        raise ConfigError(text) from None
    for field, value in resolved.items():
        section[field] = value


def _resolve_parser(section: Any, dataset: str | None) -> None:
    """A `parser` left "auto" becomes "gold" where `dataset` ships the trees the model reads
    (`configs.ships_gold_trees`); elsewhere the model's config class resolves it (PSAN: spaCy's
    phrase trees). Done here, not when the config is made, because the dataset is known only
    once the command line's overrides are applied."""
    if section.get("parser") == AUTO and dataset and configs.ships_gold_trees(section, dataset):
        section["parser"] = "gold"


def _check_parser_installed(section: Any, default: Any) -> None:
    """An explicit parser="benepar" without benepar or its model installed: a one-line error
    now, before anything is read, rather than once the data is (benepar is optional)."""
    if section.get("parser") != "benepar":
        return
    from jaxenc.errors import ParserUnavailableError
    from jaxenc.structures.parsers import BeneparParser

    try:
        BeneparParser()  # checks the distributions and the model; loads nothing
    except ParserUnavailableError as error:
        raise ConfigError(f"model.parser='benepar': {error} (fix: install it, or "
                          f"--config.model.parser={default})") from None


_ABSENT = object()  # `_value_at` of a key a config does not have


def _value_at(config: ml_collections.ConfigDict | None, path: str) -> Any:
    """The value of flat key `path` in `config`, `_ABSENT` where it has none."""
    node: Any = config
    for part in path.split("."):
        if not hasattr(node, "keys") or part not in node:
            return _ABSENT
        node = node[part]
    return node


def check_config(config: ml_collections.ConfigDict,
                 file_config: ml_collections.ConfigDict | None = None) -> None:
    """Raises a one-line ConfigError naming the first `--config.` flag whose value is invalid
    (RULES, MODEL_RULES and the model config classes' own checks), its fix the value of
    `file_config` (the config file before command-line overrides) when that one is valid, else
    the default; then writes the resolved value of every "auto" model option into `config`
    (module docstring)."""
    defaults = ml_collections.ConfigDict(configs.get_config().to_dict())
    for path, rule in RULES.items():
        section, _, key = path.rpartition(".")
        holder = config
        for part in section.split("."):
            holder = holder.get(part) if holder is not None else None
        if holder is None or key not in holder:  # a config file without the key
            continue
        if not rule.accepts(holder[key]):
            own = _value_at(file_config, path)
            if own is not _ABSENT and rule.accepts(own):
                raise _refuse(path, holder[key], rule.requirement, own, "the config file's value")
            raise _refuse(path, holder[key], rule.requirement, _value_at(defaults, path))
    if config.train.get("num_steps", 0) == 0 and config.train.get("epochs", 1) == 0:
        raise ConfigError("--config.train.epochs=0 trains nothing while --config.train.num_steps=0 "
                          "(fix: --config.train.epochs=10, or a --config.train.num_steps > 0)")
    dataset = config.task.get("dataset") if config.get("task") else None
    for prefix, section in _model_sections(config):
        _check_model(prefix, section, dataset)


def _guesses(typed: str, keys: list[str]) -> list[str]:
    """Up to 3 keys `typed` may have meant: keys it begins (learn -> learning_rate), keys whose
    words' initials it is (lr -> learning_rate), then difflib's close matches (nme -> name)."""
    initials = {key: "".join(word[:1] for word in key.split("_")) for key in keys}
    found = [key for key in keys if key.startswith(typed)]
    found += [key for key in keys if initials[key] == typed]
    found += difflib.get_close_matches(typed, keys, n=3, cutoff=0.6)
    return list(dict.fromkeys(found))[:3]


def _keys_elsewhere(config: ml_collections.ConfigDict, typed: str,
                    section: list[str]) -> list[str]:
    """Up to 3 flat keys outside `section` whose last part `typed` may have meant (`_guesses`),
    e.g. optim.learning_rate for a mistyped train.learnig_rate."""
    def flat(node: Any, prefix: str) -> Iterator[str]:
        for key, value in node.items():
            yield from (flat(value, f"{prefix}{key}.") if hasattr(value, "items")
                        else (f"{prefix}{key}",))

    inside = "".join(f"{part}." for part in section)
    by_leaf: dict[str, list[str]] = {}
    for key in flat(config, ""):
        if not key.startswith(inside) or not inside:
            by_leaf.setdefault(key.rsplit(".", 1)[-1], []).append(key)
    return [key for leaf in _guesses(typed, list(by_leaf)) for key in by_leaf[leaf]][:3]


def unknown_key(config: ml_collections.ConfigDict, path: str) -> str | None:
    """The one-line message for an override `--config.<path>` naming a key `config` does not
    have (with the closest existing keys as the fix), or None when the path exists."""
    node: Any = config
    parts = path.split(".")
    for index, part in enumerate(parts):
        here = "--" + ".".join(["config", *parts[:index]])
        if not hasattr(node, "keys"):
            return f"--config.{path}: {here} is a value, not a section (fix: {here}=VALUE)"
        keys = list(node.keys())
        if part in keys:
            node = node[part]
            continue
        if not keys:
            return f"unknown key --config.{path} (fix: {here} is empty in this config; --help)"
        rest = "".join(f".{later}" for later in parts[index + 1:])
        guesses = [f"{here}.{guess}{rest}" for guess in _guesses(part, keys)]
        if not guesses and not rest:  # a key of another section?
            guesses = [f"--config.{key}" for key in _keys_elsewhere(config, part, parts[:index])]
        if guesses:
            return f"unknown key --config.{path} (did you mean {' or '.join(guesses)}?)"
        return (f"unknown key --config.{path} (fix: a key of {here}: {', '.join(sorted(keys))}; "
                "every key: --help)")
    return None
