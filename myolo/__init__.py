"""Myolotrain v4: the control plane and training runtime of a GPU training platform for bare-metal nodes.

Everything installed lives under this one name: ``myolo.events`` (the event contract and bus),
``myolo.agent`` (the node daemon), ``myolo.coordinator`` (the control plane and ``myoloctl``) and
``myolo.kernels`` (the trainer; the only part that imports torch). Importing ``myolo`` imports none of them.

``__version__`` is the version of the code actually imported: the wheel's metadata installed beside this
package (a release directory, site-packages), else the source tree's. After an upgrade a restarted process
reports the release it runs, whatever the source tree it was first started from says.
"""

from pathlib import Path

SOURCE_VERSION = "4.0.0.dev0"  # pyproject.toml's (a test keeps them equal)
DIST = "myolotrain"

_HERE = Path(__file__).resolve().parent
_CHECKOUT = _HERE.parent
if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "events").is_dir():
    # A source checkout keeps the subpackages in the repository's top-level folders (the wheel puts them
    # here): search them too. They have no ``__init__.py``, so none is importable on its own.
    __path__.append(str(_CHECKOUT))


def _imported_version() -> str:
    found = sorted(_HERE.parent.glob(f"{DIST}-*.dist-info"))
    if len(found) > 1:  # leftovers of other installs: the one whose RECORD lists this package
        found = [d for d in found if _lists_myolo(d)]
    for dist_info in found[:1]:
        try:
            with (dist_info / "METADATA").open(encoding="utf-8") as meta:
                for line in meta:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break  # the headers end
        except OSError:
            pass
    return SOURCE_VERSION


def _lists_myolo(dist_info: Path) -> bool:
    try:
        return "myolo/__init__.py," in (dist_info / "RECORD").read_text(encoding="utf-8")
    except OSError:
        return False


__version__ = _imported_version()
