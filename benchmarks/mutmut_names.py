"""A pytest plugin for `make bench-mutation` only (pyproject.toml [tool.mutmut] pytest_add_cli_args): the training
container imports its package as `dslab_train` (training/ on its path), while mutmut names and switches each mutant by
the module's path from the repository root, `training.dslab_train.s3source`. A mutant only runs, and its tests are only
found, when the function's module has that name; so the package is imported once under mutmut's names and the
container's names point at the same modules."""

from __future__ import annotations

import importlib
import pkgutil
import sys


def pytest_configure(config) -> None:
    package = importlib.import_module("training.dslab_train")
    for found in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"training.dslab_train.{found.name}")
    for name, module in list(sys.modules.items()):
        if name == "training.dslab_train" or name.startswith("training.dslab_train."):
            sys.modules[name.removeprefix("training.")] = module
