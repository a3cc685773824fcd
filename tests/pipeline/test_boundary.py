"""Issue 49: names, sizes and values checked once, at the boundary, each refused with one line that
docs/bad-inputs.md quotes as it is."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import REPO
from uqcal.pipeline.config.load import prepare_config
from uqcal.pipeline.config.source import ConfigError, check_raw_config

PAGE = (REPO / "docs/bad-inputs.md").read_text()


@pytest.fixture(scope="module")
def smoke_raw() -> dict:
    return check_raw_config(REPO / "config/smoke.yaml")


def _refused(cfg: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        prepare_config(cfg, REPO)
    message = str(raised.value)
    assert "\n" not in message
    return message


def _with_dataset_named(raw: dict, name: str) -> dict:
    """The smoke config with rio's dataset (concrete) renamed ``name`` in the config's own registry."""
    cfg = copy.deepcopy(raw)
    from uqcal.pipeline.config.registry import dataset_registry

    cfg["datasets"] = {**(cfg.get("datasets") or {}), name: dataset_registry(cfg, REPO)["concrete"]}
    cfg["families"]["rio"]["datasets"] = [name]
    return cfg


NAME_RULE = ("is not an identifier: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', starting with a letter or a "
             "digit (a name becomes a folder, a DVC stage and a Snakemake wildcard)")


@pytest.mark.parametrize("name", ["my data", "données", "../escape", "a" * 255, ".hidden", "a.b", ""])
def test_a_dataset_name_that_is_not_an_identifier_is_refused_at_validation(smoke_raw, name):
    message = _refused(_with_dataset_named(smoke_raw, name))
    assert message.startswith("datasets: dataset name ") and message.endswith(NAME_RULE)
    assert len(message) < 300  # a 255-character name is shortened, not printed whole


@pytest.mark.parametrize("kind", ["settings", "methods"])
def test_a_setting_or_method_name_that_is_not_an_identifier_is_refused_at_validation(smoke_raw, kind):
    cfg = copy.deepcopy(smoke_raw)
    entries = cfg["families"]["rio"][kind]
    entries["bad name"] = entries.pop(next(iter(entries)))
    assert _refused(cfg) == f"families.rio.{kind}: {kind[:-1]} name 'bad name' {NAME_RULE}"


def test_64_characters_is_a_name_65_is_not(smoke_raw):
    prepare_config(_with_dataset_named(smoke_raw, "d" * 64), REPO)
    assert "characters" in _refused(_with_dataset_named(smoke_raw, "d" * 65))


def test_the_bad_inputs_page_quotes_the_name_message(smoke_raw):
    assert f"``{_refused(_with_dataset_named(smoke_raw, 'my data'))}``" in PAGE
