#!/usr/bin/env bash
# Host the three real tasks in a scratch instance through the site's own command line, run every
# reference baseline through the submission pipeline, and print the boards as the site shows them.
#   bash benchmarks/real_task_boards.sh [SHARED_DATA] [SYSTEMS...]   (default: ../shared/data, all)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-../shared/data}"; shift || true
SYSTEMS=("${@:-all}")
export SEMBOARD_INSTANCE_PATH; SEMBOARD_INSTANCE_PATH="$(mktemp -d)/instance"
export SECRET_KEY=boards PYTHONUNBUFFERED=1
flask() { .venv/bin/flask --app app "$@"; }

flask db-upgrade
for spec in "sts2012:$DATA/sts2012/test" "clss2014:$DATA/clss2014" "semrel2024:$DATA/semrel2024"; do
  task="${spec%%:*}"; release="${spec#*:}"
  flask task load "$task" --inputs "$release"
  flask task phase "$task" test --kind evaluation --opens 2000-01-01T00:00Z \
      --closes 2000-02-01T00:00Z --max-runs 3 --visibility public
  flask gold upload "$task" "$release"
  for system in "${SYSTEMS[@]}"; do
    flask baselines run "$task" --system "$system" --phase test
  done
  echo "== $task: leaderboard (phase test) =="
  flask results export "$task" --phase test --format csv
done
echo "instance: $SEMBOARD_INSTANCE_PATH"
