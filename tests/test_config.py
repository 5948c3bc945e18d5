"""Configs: paper defaults, validation that names the field, presets that list the valid names."""

import dataclasses
import re

import pytest

import mtkit
from mtkit.config import (
    ConfigError,
    DecodeConfig,
    EngineConfig,
    ExportConfig,
    ModelConfig,
    TrainConfig,
    config_diff,
    config_from_dict,
    get_preset,
    model_config,
    parse_overrides,
)
from mtkit.errors import MtkitError


@pytest.mark.parametrize(
    "field, value", [("d_model", 0), ("heads", -1), ("dropout", 1.5), ("share_embeddings", "some"), ("d_model", 100)]
)
def test_bad_model_values_name_the_field(field, value):
    with pytest.raises(MtkitError, match=f"ModelConfig.{field}"):
        ModelConfig(**{field: value})


def test_bad_train_values_name_the_field():
    with pytest.raises(MtkitError, match="TrainConfig.label_smoothing"):
        TrainConfig(label_smoothing=1.0)


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(MtkitError, match="tiny, small, base, big"):
        get_preset("huge")


def test_overrides_are_applied_and_unknown_ones_listed():
    cfg = model_config("base", 8000, dropout=0.3, pre_norm=True)
    assert (cfg.vocab_size, cfg.dropout, cfg.pre_norm, cfg.d_model) == (8000, 0.3, True, 512)
    with pytest.raises(MtkitError, match="unknown model field.*dmodel.*valid fields"):
        model_config("base", 8000, dmodel=3)
    with pytest.raises(MtkitError, match="unknown model field"):
        mtkit.build_model("tiny", 100, layers=3)


def test_configs_round_trip_through_dicts_and_report_differences():
    cfg = model_config("small", 8000)
    assert config_from_dict(ModelConfig, dataclasses.asdict(cfg)) == cfg
    train = TrainConfig()
    assert config_from_dict(TrainConfig, dataclasses.asdict(train)) == train  # tuples survive JSON lists
    assert config_diff(cfg, dataclasses.replace(cfg, d_ff=512)) == ["d_ff: 1024 != 512"]
    with pytest.raises(MtkitError, match="unknown ModelConfig field"):
        config_from_dict(ModelConfig, {"d_model": 512, "colour": "red"})


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModelConfig().d_model = 3


def test_set_values_are_typed_by_the_field_annotation():
    items = ["tgt_vocab_size=none", "pre_norm=yes", "dropout=0.2", "share-embeddings=decoder", "heads=4"]
    assert parse_overrides(items, ModelConfig) == {
        "tgt_vocab_size": None,
        "pre_norm": True,
        "dropout": 0.2,
        "share_embeddings": "decoder",
        "heads": 4,
    }
    assert parse_overrides(["tgt_vocab_size=800"], ModelConfig) == {"tgt_vocab_size": 800}
    for item, message in [
        ("heads=four", "heads must be an integer"),
        ("pre_norm=maybe", "pre_norm must be true or false"),
        ("tgt_vocab_size=big", "tgt_vocab_size must be an integer or none"),
        ("dropout=lots", "dropout must be a number"),
    ]:
        with pytest.raises(MtkitError, match=f"--set '{item}': {message}"):
            parse_overrides([item], ModelConfig)


CONFIGS = (ModelConfig, TrainConfig, DecodeConfig, EngineConfig, ExportConfig)


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_that_declares_choices_refuses_another_word_naming_them(cls):
    """One check made from the choices each field declares: a field with choices needs no hand-written check."""
    with_choices = [f for f in dataclasses.fields(cls) if f.metadata.get("choices")]
    assert with_choices
    for f in with_choices:
        for good in f.metadata["choices"]:
            cls(**{f.name: good})
        expected = f"{cls.__name__}.{f.name} must be one of {', '.join(f.metadata['choices'])}, got 'nonsense'"
        with pytest.raises(ConfigError, match=re.escape(expected)):
            cls(**{f.name: "nonsense"})
