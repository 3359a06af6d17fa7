"""The wheel's packages: every Python package found, plus the site's folders at the repo root,
and two optional C extensions (evaluation._spearman, evaluation._draws).

templates/, static/ (with the vendored JavaScript) and migrations/ ship inside the semboard
package (semboard/templates, ...), where semboard.config.resource_dir finds them. Each of their
subfolders is declared a package of its own (semboard.templates.auth, ...), with its files, so
setuptools builds quietly; the rest of the packaging is in pyproject.toml.
"""

import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup

SITE_FOLDERS = {"semboard.templates": "templates", "semboard.static": "static",
                "semboard.migrations": "migrations"}
# The files each site folder ships (subfolders of static/ ship whole: vendored JavaScript).
SITE_FILES = {"templates": ["*.html", "*.atom"], "static": ["*.css", "*.js", "*.svg"],
              "static/vendor": ["*"], "migrations": ["script.py.mako"],
              "migrations/versions": ["*.py"]}


def site_packages() -> tuple[dict[str, str], dict[str, list[str]]]:
    """{package: folder} and {package: file patterns} for every site folder and subfolder."""
    folders: dict[str, str] = {}
    files: dict[str, list[str]] = {}
    for package, top in SITE_FOLDERS.items():
        subfolders = sorted(p for p in Path(top).rglob("*")
                            if p.is_dir() and "__pycache__" not in p.parts)
        for folder in [Path(top), *subfolders]:
            name = ".".join([package, *folder.relative_to(top).parts])
            folders[name] = folder.as_posix()
            files[name] = SITE_FILES.get(folder.as_posix(), SITE_FILES[top])
    return folders, files


FOLDERS, FILES = site_packages()

# -O3 after Python's own flags, which are -O2 on some systems (Debian's and Ubuntu's python3):
# there GCC keeps the kernels' small arrays of vectors in memory (the moments' sums twice as
# slow; benchmarks/README.md). MSVC (not a target here) takes /O2 by default.
OPTIMISE = [] if sys.platform == "win32" else ["-O3"]
# The compiled run side of many runs' bootstrap Spearman sums (evaluation/_spearman.c: Python's
# C API and buffer protocol only). Optional: without a C compiler the wheel still builds and
# evaluation.significance takes its numpy path, which gives the same numbers more slowly.
SPEARMAN = Extension("evaluation._spearman", ["evaluation/_spearman.c"], optional=True,
                     extra_compile_args=OPTIMISE)
# Bootstrap draws counted as they are drawn (evaluation/_draws.c: numpy's PCG64 stream exactly).
DRAWS = Extension("evaluation._draws", ["evaluation/_draws.c"], optional=True,
                  extra_compile_args=OPTIMISE)

setup(
    packages=[*find_packages(include=["evaluation*", "tasks*", "baselines*", "semboard*"]),
              *FOLDERS],
    package_dir=FOLDERS,
    package_data={"tasks": ["*.toml"], **FILES},
    # Optional: without a C compiler or Python's headers the package installs all the same, and
    # evaluation/ takes its numpy paths (the same figures, slower).
    ext_modules=[SPEARMAN, DRAWS],
)
