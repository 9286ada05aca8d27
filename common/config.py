"""Configuration: a TOML file, then ``MYOLO_*`` environment overrides, validated into a msgspec Struct.

Each leaf key ``section.name`` can be overridden by ``MYOLO_SECTION_NAME`` (``kafka.bootstrap`` ->
``MYOLO_KAFKA_BOOTSTRAP``). The variable names are derived from the schema, so underscores inside key names
are not ambiguous. Every error names the key (and the variable or file it came from) and the reason.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from myolo.common.errors import ConfigError, validation_problem

T = TypeVar("T", bound=msgspec.Struct)


def env_names(schema: type[msgspec.Struct], prefix: str = "MYOLO_") -> dict[str, tuple[str, ...]]:
    """Map every environment variable the schema understands to the key path it sets."""
    out: dict[str, tuple[str, ...]] = {}

    def walk(cls: type[msgspec.Struct], path: tuple[str, ...]) -> None:
        for f in msgspec.structs.fields(cls):
            sub = _struct_type(f.type)
            if sub is not None:
                walk(sub, (*path, f.encode_name))
            else:
                out[prefix + "_".join((*path, f.encode_name)).upper()] = (*path, f.encode_name)

    walk(schema, ())
    return out


def load_config(
    path: str | Path | None,
    schema: type[T],
    *,
    env: Mapping[str, str] | None = None,
    prefix: str = "MYOLO_",
) -> T:
    """Read ``path`` (if given; a missing file is an error) and apply environment overrides."""
    doc: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        p = Path(path)
        try:
            doc = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise ConfigError("(file)", f"config file {str(p)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("(file)", f"{str(p)!r} is not valid TOML: {exc}") from None
        source = str(p)
    env = os.environ if env is None else env
    origins: dict[tuple[str, ...], str] = {}
    for var, keypath in env_names(schema, prefix).items():
        if var in env:
            _set(doc, keypath, _parse_env(env[var]))
            origins[keypath] = var
    try:
        return msgspec.convert(doc, schema, strict=False)
    except msgspec.ValidationError as exc:
        raise _config_error(exc, origins, source, schema) from None


def _parse_env(raw: str) -> Any:
    """Env values are strings; TOML syntax lets lists and numbers through (``[1, 2]``, ``0.5``)."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        doc = doc.setdefault(part, {})
    doc[path[-1]] = value


def _struct_type(tp: Any) -> type[msgspec.Struct] | None:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    return None


def _config_error(
    exc: msgspec.ValidationError, origins: dict[tuple[str, ...], str], source: str, schema: type[msgspec.Struct]
) -> ConfigError:
    problem = validation_problem(exc)
    msg, key = problem.message, problem.field.lstrip(".")
    if problem.kind == "unknown":
        name = key.rsplit(".", 1)[-1]
        msg = "unknown key (check the spelling; see the configuration reference in docs/operating.md)"
        elsewhere = sorted(".".join(p) for p in env_names(schema, "").values() if p[-1] == name and len(p) > 1)
        if elsewhere and "." not in key:
            msg = f"unknown key here; did you mean {' or '.join(elsewhere)} (in its [section])?"
    keypath = tuple(key.split(".")) if key else ()
    where = origins.get(keypath, source)
    return ConfigError(key or "(root)", f"{msg} (from {where})")
