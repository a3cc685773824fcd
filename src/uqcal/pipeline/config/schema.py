"""The config's JSON schema (workflow/schemas/config.schema.yaml): types, required and unknown keys."""

from __future__ import annotations

import difflib
from pathlib import Path

from uqcal.pipeline.config.source import SCHEMA_RELPATH, ConfigError, load_yaml


def validate_schema(config: dict, root: Path) -> None:
    import jsonschema

    schema_path = root / SCHEMA_RELPATH
    if not schema_path.exists():
        return
    schema = load_yaml(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        key = ".".join(str(p) for p in err.absolute_path) or "(top level)"
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
