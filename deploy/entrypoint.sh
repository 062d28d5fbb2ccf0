#!/bin/sh
# The image's entrypoint: wait until the database accepts connections, then run the command
# (gunicorn for the backend, celery for the worker and beat, `manage.py migrate` for the one-shot
# migrate service). Migrations are never run here: replicas start together, the migrate service
# runs them once before them (docker-compose.yml).
#
#   DATABASE_WAIT_SECONDS  how long to wait for the database (60; 0 skips the wait)
set -eu

if [ -n "${DATABASE_URL:-}" ] && [ "${DATABASE_WAIT_SECONDS:-60}" != "0" ]; then
    python /app/deploy/wait_for_db.py --timeout "${DATABASE_WAIT_SECONDS:-60}"
fi

exec "$@"
