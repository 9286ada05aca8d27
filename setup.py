"""The package layout: the repository's top-level folders are the subpackages of ``myolo``.

``events/``, ``agent/``, ``coordinator/`` and ``kernels/`` stay at the root, as the design names them, and install
as ``myolo.events`` and so on; nothing else is installed at the top level. The folders have no ``__init__.py``, so
a checkout on ``sys.path`` (its root is the working directory of every test and tool) shadows no other package.
Everything else about the project is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

FOLDERS = ("common", "events", "agent", "coordinator", "kernels")

setup(
    package_dir={"myolo": "myolo", **{f"myolo.{folder}": folder for folder in FOLDERS}},
    packages=[
        "myolo",
        *(f"myolo.{folder}" for folder in FOLDERS),
        *(
            f"myolo.{folder}.{sub}"
            for folder in FOLDERS
            for sub in find_namespace_packages(where=folder, exclude=["*__pycache__*"])
        ),
    ],
)
