"""compose.yaml runs the scale-out set; `docker compose config` accepts it where compose exists."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml
from deploy_support import PROJECT_ROOT

COMPOSE = PROJECT_ROOT / "compose.yaml"
SECRETS = {"SECRET_KEY": "k" * 64, "POSTGRES_PASSWORD": "pg-secret",
           "MINIO_ROOT_PASSWORD": "minio-secret"}


def compose_command() -> list[str] | None:
    """`docker compose` (the plugin) or `docker-compose`, whichever works here; None if neither."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) and subprocess.run(
                [*command, "version"], capture_output=True).returncode == 0:
            return command
    return None


def compose_config(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """`compose -f compose.yaml [extra] config` with ENV on top of a clean environment."""
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS and k != "SEMBOARD_DOMAIN"}
    return subprocess.run([*command, "-f", str(COMPOSE), "--project-directory",
                           str(PROJECT_ROOT), *extra, "config"],
                          env={**clean, **env}, capture_output=True, text=True)


def services() -> dict[str, dict]:
    """The services of compose.yaml, with YAML anchors resolved."""
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_compose_runs_the_scale_out_set() -> None:
    """Proxy, two replicas, worker, one-shot migration, PostgreSQL, Redis, MinIO, named volumes."""
    found = services()
    assert {"proxy", "web1", "web2", "worker", "migrate", "db", "redis", "minio"} <= set(found)
    for web in ("web1", "web2"):
        env = found[web]["environment"]
        assert env["SEMBOARD_SKIP_MIGRATE"] == "1"
        assert env["SEMBOARD_STORAGE"] == "s3" and env["DATABASE_URL"].startswith("postgresql")
        assert found[web]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert found["migrate"]["command"] == ["flask", "db-upgrade"]
    assert found["worker"]["command"] == ["flask", "worker"]
    for name in ("db", "redis", "minio"):
        assert "test" in found[name]["healthcheck"], f"{name} has no health check"
        volume = found[name]["volumes"][0].split(":")[0]
        assert volume in yaml.safe_load(COMPOSE.read_text())["volumes"], f"{name}: named volume"
    caddyfile = (PROJECT_ROOT / "deploy" / "Caddyfile").read_text()
    assert "reverse_proxy web1:8000 web2:8000" in caddyfile
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in found["proxy"]["volumes"]


def test_compose_config_accepts_the_file() -> None:
    """The compose tool validates the file, with the GPU profile too."""
    done = compose_config(SECRETS)
    assert done.returncode == 0, done.stderr
    listed = compose_config(SECRETS, "--profile", "gpu")
    assert listed.returncode == 0, listed.stderr
    rendered = yaml.safe_load(done.stdout)
    assert rendered["services"]["web1"]["environment"]["SECRET_KEY"] == SECRETS["SECRET_KEY"]


def test_compose_refuses_to_start_without_secrets() -> None:
    """Without SECRET_KEY each replica would keep its own key and sessions break between them."""
    done = compose_config({k: v for k, v in SECRETS.items() if k != "SECRET_KEY"})
    assert done.returncode != 0 and "SECRET_KEY" in done.stderr
