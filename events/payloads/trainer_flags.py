"""The command-line flag of each trainer job field, derived from its section and name.

A field ``<section>.<name>`` is ``--<prefix><name>`` with dashes, where the prefix is the section's (empty for
most: ``optimizer.lr`` is ``--lr``). The table of exceptions holds only flags established before the sections
were (``--data``, ``--param``). ``myolo-train`` and ``myoloctl train`` both read their flags from here, so a
message naming a field names the flag an operator types. The flags keep the names of the flat job the sections
replaced, so a field's old flat name (``flat_name``, for reading what was stored flat) is derived here too.
"""

from __future__ import annotations

# the sections whose fields' flags carry a prefix; the others' flags are the field's name
PREFIX: dict[str, str] = {"model": "model-", "defense": "defense-", "watermark": "watermark-", "quantization": "quant-"}
SHORT: dict[str, str] = {
    "model.name": "--model",
    "model.args": "--model-arg",
    "data.path": "--data",
    "data.dtype": "--data-dtype",
    "data.sha256": "--data-sha256",
    "data.eval_path": "--eval-data",
    "checkpoint.dir": "--checkpoint-dir",
    "checkpoint.every": "--checkpoint-every",
    "defense.kind": "--defense",
    "defense.param": "--param",
    "watermark.key_file": "--watermark",
    "runtime.ops_prefer": "--ops",
}
# a boolean field's "off" flag where it is not --no-<flag>
NEGATIVE: dict[str, str] = {"runtime.deterministic": "--fast"}
# a field's name in the flat job (one table of every field, as stored before the sections) where it is not its
# flag's (``--lr`` was ``lr``, ``--quant-bits`` ``quant_bits``; ``--data`` was ``data_path``)
FLAT: dict[str, str] = {
    "model.args": "model_args",
    "data.path": "data_path",
    "data.eval_path": "eval_data_path",
    "defense.param": "defense_param",
    "quantization.calib_path": "calib_path",
    "quantization.calib_sequences": "calib_sequences",
    "runtime.ops_prefer": "ops_prefer",
}


def flag(path: str) -> str:
    """``optimizer.warmup_steps`` -> ``--warmup-steps``; a top-level field (``nproc``) -> ``--nproc``."""
    if path in SHORT:
        return SHORT[path]
    section, _, name = path.rpartition(".")
    return "--" + PREFIX.get(section, "") + name.replace("_", "-")


def negative(path: str) -> str:
    """A boolean field's "off" flag: ``--no-compile``, ``--fast``."""
    return NEGATIVE.get(path) or "--no-" + flag(path).removeprefix("--")


def flat_name(path: str) -> str:
    """A field's name in the flat job: ``optimizer.lr`` -> ``lr``, ``defense.kind`` -> ``defense``."""
    return FLAT.get(path) or flag(path).removeprefix("--").replace("-", "_")
