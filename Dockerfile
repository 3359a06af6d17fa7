# semboard web image: gunicorn serving create_app(); SQLite + local uploads by default,
# PostgreSQL and S3 when DATABASE_URL and SEMBOARD_STORAGE=s3 (+ S3 settings) are set.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    SEMBOARD_INSTANCE_PATH=/data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY app.py ./
COPY evaluation ./evaluation
COPY tasks ./tasks
COPY baselines ./baselines
COPY semboard ./semboard
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
RUN pip install -e . && useradd --create-home --uid 1000 semboard && mkdir -p /data \
    && chown semboard /data
USER semboard
VOLUME ["/data"]
EXPOSE 8000

# Load balancers and Docker ask /healthz (database and storage reachable); no curl in the image.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"

# A single container migrates its database on start. With several replicas sharing PostgreSQL,
# run `flask --app app db-upgrade` once as a release step and start them with SEMBOARD_SKIP_MIGRATE=1.
CMD ["sh", "-c", "if [ -z \"$SEMBOARD_SKIP_MIGRATE\" ]; then flask --app app db-upgrade || exit 1; fi; exec gunicorn --workers ${WEB_CONCURRENCY:-4} --bind 0.0.0.0:8000 --access-logfile - 'app:app'"]
