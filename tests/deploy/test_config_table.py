"""The configuration table is generated from semboard.config.SETTINGS and covers every variable."""

from __future__ import annotations

import re

import pytest
from deploy_support import PROJECT_ROOT

from semboard import config, create_app

# Variables read from the environment: os.environ lookups, click's envvar=, the image's $VARS.
READS = re.compile(r"""environ(?:\.get)?[\[(]\s*["']([A-Z][A-Z0-9_]+)["']"""
                   r"""|envvar=["']([A-Z_]+)["']""")
IMAGE_VARS = re.compile(r"\$\{?([A-Z][A-Z0-9_]+)")
# Read by the code but not the site's settings: the cache folder's XDG fallback, the build
# argument of the image and variables the image itself sets.
NOT_SETTINGS = {"XDG_CACHE_HOME", "EXTRAS", "FLASK_APP",
                # set (not read) by a model job's feed for its tokenising children's Rust pools
                "RAYON_NUM_THREADS", "RAYON_RS_NUM_CPUS"}


def variables_read() -> set[str]:
    """Every variable the site's code, the baselines and the image read."""
    found: set[str] = set()
    for folder in ("semboard", "baselines"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            for match in READS.finditer(path.read_text()):
                found.add(match.group(1) or match.group(2))
    found |= set(config.ENV_KEYS)
    found |= set(IMAGE_VARS.findall((PROJECT_ROOT / "Dockerfile").read_text()))
    return found - NOT_SETTINGS


def test_readme_table_is_the_generated_one() -> None:
    """README.md holds `python -m semboard.config`'s table, unchanged."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert config.markdown_table() in readme, (
        "README's configuration table differs from semboard.config.SETTINGS: "
        "paste `python -m semboard.config` over it")


def test_every_variable_read_is_in_the_table() -> None:
    """A variable read anywhere in the site, baselines or image has a row."""
    documented = {s.name for s in config.SETTINGS}
    assert variables_read() - documented == set()
    assert {"SEMBOARD_INSECURE_COOKIES", "SEMBOARD_INSTANCE_PATH", "SEMBOARD_MAIL_FROM",
            "SEMBOARD_GROUPS_DELAY_S", "SEMBOARD_BASELINES_QUEUE"} <= documented


@pytest.mark.parametrize("setting", [s for s in config.SETTINGS if s.in_app_config],
                         ids=lambda s: s.name)
def test_app_settings_are_read_from_the_environment(setting: config.Setting) -> None:
    """Each row marked as app configuration reaches app.config from the environment."""
    sample = {int: "123", float: "2.5"}.get(setting.kind, "value")  # type: ignore[call-overload]
    assert config.from_environ({setting.name: sample}) == {setting.name: setting.kind(sample)}


def test_groups_delay_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """SEMBOARD_GROUPS_DELAY_S set in the environment reaches the app (it used to be ignored)."""
    monkeypatch.setenv("SEMBOARD_GROUPS_DELAY_S", "0.25")
    monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert create_app().config["SEMBOARD_GROUPS_DELAY_S"] == 0.25


def test_a_bad_number_names_the_variable() -> None:
    """MAX_CONTENT_LENGTH=64M is refused with the variable and the value."""
    with pytest.raises(ValueError, match=r"MAX_CONTENT_LENGTH='64M' is not a number"):
        config.from_environ({"MAX_CONTENT_LENGTH": "64M"})


# Named in the code but read from no environment: the tests' clock hook in app.config.
NOT_VARIABLES = {"SEMBOARD_CLOCK",
                 "SEMBOARD_VERSION"}  # a Python name of evaluation's version in two modules
NAMES = re.compile(r"\bSEMBOARD_[A-Z0-9_]+\b")


def _names_in(*places: str) -> set[str]:
    found: set[str] = set()
    for place in places:
        path = PROJECT_ROOT / place
        for source in ([path] if path.is_file() else sorted(path.rglob("*.py"))):
            found |= set(NAMES.findall(source.read_text()))
    return found - NOT_VARIABLES


def test_every_semboard_name_in_the_code_is_documented() -> None:
    """Any SEMBOARD_ name the site, baselines, evaluation or image mentions is a row of README's
    table; compose's own (the domain) are in docs/DEPLOY.md, the participant client's in
    docs/GUIDE.md (README points to both)."""
    documented = {s.name for s in config.SETTINGS}
    site = _names_in("semboard", "baselines", "evaluation", "app.py", "Dockerfile")
    assert site - documented == set(), "add these to semboard.config.SETTINGS"
    deploy = (PROJECT_ROOT / "docs" / "DEPLOY.md").read_text()
    compose = set(NAMES.findall((PROJECT_ROOT / "compose.yaml").read_text()))
    assert {n for n in compose - documented if n not in deploy} == set()
    guide = (PROJECT_ROOT / "docs" / "GUIDE.md").read_text()
    client = _names_in("semboard_cli")
    assert {n for n in client if f"`{n}`" not in guide and n not in documented} == set()
