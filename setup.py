"""The packages of the wheel, found by setuptools: every package under zoo/ and the Hydra
search-path plugin (a namespace package), plus the top-level conf/ and recipes/ directories that
pyproject.toml's package-dir ships as `zoo.conf` and `zoo.recipes`. Everything else is in
pyproject.toml."""

from setuptools import find_namespace_packages, find_packages, setup

setup(
    packages=[
        *find_packages(include=["zoo", "zoo.*"]),
        *find_namespace_packages(include=["hydra_plugins.*"]),
        "zoo.conf",
        "zoo.recipes",
    ]
)
