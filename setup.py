"""The wheel's packages: every Python package found, plus the site's folders at the repo root.

templates/, static/ (with the vendored JavaScript) and migrations/ ship inside the semboard
package (semboard/templates, ...), where semboard.config.resource_dir finds them; the rest of
the packaging is in pyproject.toml.
"""

from setuptools import find_packages, setup

SITE_FOLDERS = {"semboard.templates": "templates", "semboard.static": "static",
                "semboard.migrations": "migrations"}

setup(
    packages=[*find_packages(include=["evaluation*", "tasks*", "baselines*", "semboard*"]),
              *SITE_FOLDERS],
    package_dir=SITE_FOLDERS,
)
