"""Setuptools shim. Everything is declared in pyproject.toml (package-data included) except one
mapping pyproject cannot express beside ``packages.find``: the user documentation (docs/*.md)
ships inside the wheel as the data package ``cairn._docs``, the corpus ``cairn demo`` ingests
when cairn is installed from PyPI."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages("lib", include=["cairn", "cairn.*"]), "cairn._docs", "cairn._docs.concepts",
              "cairn._docs.integrations"],
    package_dir={"": "lib", "cairn._docs": "docs"},
)
