# syntax=docker/dockerfile:1
# semboard image: exactly what `pip install .` ships (the wheel built from this package, with the
# templates, static files, vendored JavaScript, migrations and task definitions inside it), served
# by gunicorn as a non-root user. SQLite and local uploads in /data by default; PostgreSQL, S3 and
# Redis when DATABASE_URL, SEMBOARD_STORAGE=s3 (+ S3 settings) and REDIS_URL are set.
# Build: docker build -t semboard .   (GPU baselines worker: --build-arg EXTRAS=gpu)

FROM python:3.11-slim-bookworm AS build
ARG EXTRAS=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# A C compiler (this stage only) for the wheel's optional extensions (evaluation/_draws.c: the
# bootstrap's draws; evaluation/_spearman.c: Spearman groups of large boards); the runtime stage
# needs none (the wheel holds the compiled modules). Without it the wheel still builds, and
# evaluation/ takes its numpy paths (the same figures, slower).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
# .dockerignore lets in only what the wheel is built from.
COPY . .
# The semboard wheel and a wheel of every dependency; the runtime stage installs from these only.
RUN pip wheel --wheel-dir /wheels ".${EXTRAS:+[$EXTRAS]}"

FROM python:3.11-slim-bookworm
ARG EXTRAS=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SEMBOARD_INSTANCE_PATH=/data \
    FLASK_APP=semboard \
    SEMBOARD_TRUSTED_PROXIES=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels "semboard${EXTRAS:+[$EXTRAS]}" \
    && useradd --create-home --uid 1000 semboard && mkdir -p /data && chown semboard /data
USER semboard
WORKDIR /home/semboard
VOLUME ["/data"]
EXPOSE 8000

# The image is served behind one reverse proxy (compose's Caddy, a platform's load balancer), so
# SEMBOARD_TRUSTED_PROXIES=1 above: the proxy's X-Forwarded-For names each visitor, whom the
# throttles count. Set it to 0 only where clients reach port 8000 directly (never in public).

# Load balancers and Docker ask /healthz (database, storage, Redis); no curl in the image. It asks
# with the first SEMBOARD_TRUSTED_HOSTS name, which the site answers.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import os, sys, urllib.request as u; host = os.environ.get('SEMBOARD_TRUSTED_HOSTS', '').split(',')[0].strip().lstrip('.') or 'localhost'; sys.exit(u.urlopen(u.Request('http://127.0.0.1:8000/healthz', headers={'Host': host}), timeout=4).status != 200)"

# A single container migrates its database on start. With several replicas sharing PostgreSQL,
# run `flask db-upgrade` once as a release step (compose.yaml's `migrate` service) and start the
# replicas with SEMBOARD_SKIP_MIGRATE=1. WEB_CONCURRENCY: gunicorn worker processes (default 4);
# GUNICORN_TIMEOUT: seconds one request may take (default 120: a large run on a slow link).
# semboard.serve.gunicorn_conf: each worker loads what a large upload needs (pyarrow's reader,
# the queue client) once at its start, not inside its first upload (semboard.serve.preload).
CMD ["sh", "-c", "if [ -z \"$SEMBOARD_SKIP_MIGRATE\" ]; then flask db-upgrade || exit 1; fi; exec gunicorn -c python:semboard.serve.gunicorn_conf --workers \"${WEB_CONCURRENCY:-4}\" --timeout \"${GUNICORN_TIMEOUT:-120}\" --bind 0.0.0.0:8000 --forwarded-allow-ips \"${FORWARDED_ALLOW_IPS:-127.0.0.1}\" --access-logfile - 'semboard:create_app()'"]
