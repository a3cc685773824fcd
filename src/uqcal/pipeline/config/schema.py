"""The config's JSON schema (workflow/schemas/config.schema.yaml): types, required and unknown keys."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from uqcal.methods.api import get_family
from uqcal.pipeline.config.source import SCHEMA_RELPATH, ConfigError, load_yaml


def validate_schema(config: dict, root: Path) -> None:
    import jsonschema

    schema_path = root / SCHEMA_RELPATH
    if not schema_path.exists():
        return
    _raise_first_error(jsonschema.Draft202012Validator(load_yaml(schema_path)), config, ())


# The run selectors a setting takes beside its split keys (uqcal.pipeline.config.runs.SETTING_SELECTORS).
_RUN_SELECTORS = {
    "datasets": {"type": "array", "items": {"type": "string"}},
    "seeds": {"oneOf": [{"type": "integer", "minimum": 1},
                        {"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer", "minimum": 1}}]},
}


def validate_family_keys(config: dict) -> None:
    """A family's ``split:`` and settings take the keys its splitter and its methods read (``Splitter.keys``,
    ``Family.setting_keys``); any other key fails, naming it and the closest known one."""
    import jsonschema

    for name, fam in config["families"].items():
        family = get_family(name)
        keys = {**family.load_splitter().keys, **family.setting_keys}
        split = jsonschema.Draft202012Validator({"type": "object", "additionalProperties": False, "properties": keys})
        _raise_first_error(split, fam.get("split") or {}, ("families", name, "split"))
        setting = jsonschema.Draft202012Validator(
            {"type": "object", "additionalProperties": False, "properties": {**keys, **_RUN_SELECTORS}})
        for setting_name, values in fam["settings"].items():
            _raise_first_error(setting, values or {}, ("families", name, "settings", setting_name))


def _raise_first_error(validator, instance: Any, where: tuple[str, ...]) -> None:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        key = ".".join(str(p) for p in (*where, *err.absolute_path)) or "(top level)"
        message = err.message
        if err.validator in ("additionalProperties", "unevaluatedProperties"):
            message = _unknown_key_message(err)
        raise ConfigError(f"config key {key}: {message}")


def _unknown_key_message(err) -> str:
    """``unknown key 'test_frac'; did you mean 'test_fraction'? known: ...`` for an additionalProperties error."""
    known = sorted((err.schema.get("properties") or {}) if isinstance(err.schema, dict) else {})
    unknown = sorted(k for k in (err.instance if isinstance(err.instance, dict) else {}) if k not in known)
    if not unknown or not known:
        return f"unknown key: {err.message}"
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
        parts.append(f"unknown key {name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"{'; '.join(parts)}; known keys: {', '.join(known)}"
