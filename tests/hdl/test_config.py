import pytest

from hdl.config import PRESETS, Config, ConfigError, preset


def test_presets_are_valid():
    for name, cfg in PRESETS.items():
        assert isinstance(cfg, Config), name


@pytest.mark.parametrize("field,value", [
    ("num_colors", 0), ("num_colors", 33), ("vc_depth", 3), ("mesh_rows", 0), ("mesh_cols", -1),
    ("swarmx_leaves", 0), ("swarmx_leaves", 193), ("lanes", 17), ("sram_words", 100),
    ("sram_banks", 3), ("num_tasks", 0), ("fp_latency", 1), ("fp_latency", 7),
])
def test_bad_field_is_named(field, value):
    with pytest.raises(ConfigError, match=field):
        Config(**{field: value})


def test_non_int_rejected():
    with pytest.raises(ConfigError, match="lanes must be an int"):
        Config(lanes="4")


def test_replace_and_unknown_field():
    assert Config().replace(mesh_rows=2).mesh_rows == 2
    with pytest.raises(ConfigError, match="unknown configuration field.*bogus"):
        Config().replace(bogus=1)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        preset("nope")
    assert preset("tiny", lanes=3).lanes == 3
