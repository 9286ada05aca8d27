"""The command-line flag of each trainer job field, derived from its section and name.

A field ``<section>.<name>`` is ``--<prefix><name>`` with dashes, where the prefix is the section's (empty for
most: ``optimizer.lr`` is ``--lr``). The table of exceptions holds only flags established before the sections
were (``--data``, ``--param``). ``myolo-train`` and ``myoloctl train`` both read their flags from here, so a
message naming a field names the flag an operator types.
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


def flag(path: str) -> str:
    """``optimizer.warmup_steps`` -> ``--warmup-steps``; a top-level field (``nproc``) -> ``--nproc``."""
    if path in SHORT:
        return SHORT[path]
    section, _, name = path.rpartition(".")
    return "--" + PREFIX.get(section, "") + name.replace("_", "-")


def negative(path: str) -> str:
    """A boolean field's "off" flag: ``--no-compile``, ``--fast``."""
    return NEGATIVE.get(path) or "--no-" + flag(path).removeprefix("--")
