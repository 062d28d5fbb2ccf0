# syntax=docker/dockerfile:1
# The platform's images (docs/deployment.md):
#   runtime  (the default target): backend, worker, beat and the one-shot migrate service
#   frontend: nginx with the collected static files baked in
# Both are built from the same build stage, so the static files nginx serves always belong to the
# code the backend runs; an upgrade replaces them with the image (a named volume populated from an
# image would keep the first release's files forever).

ARG PYTHON_IMAGE=python:3.11-slim
ARG NGINX_IMAGE=nginx:1.27

# --- build: the virtualenv from the runtime lock, the platform, and collectstatic ----------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
# Dependencies first, the versions CI tested (requirements/, docs/deployment.md): pip and the build
# backend, then the runtime lock, wheels only, every file checked against its hash. This layer is
# rebuilt only when a lock changes.
COPY requirements/build.txt requirements/runtime.txt requirements/
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --only-binary :all: -r requirements/build.txt \
    && /opt/venv/bin/pip install --require-hashes --only-binary :all: --no-build-isolation \
       -r requirements/runtime.txt
COPY . .
# The platform itself, installed in place: its metadata (the version /actuator/info shows) is in the
# virtualenv and its code, templates, static files and translations stay under /app (BASE_DIR).
# pip check fails the build when pyproject.toml asks for what the lock lacks.
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation -e . \
    && /opt/venv/bin/pip check \
    && DATABASE_URL=postgresql://build@127.0.0.1:1/build STATIC_ROOT=/srv/static \
       /opt/venv/bin/python manage.py collectstatic --no-input --verbosity 0

# --- runtime: backend (gunicorn), worker and beat (Celery), migrate -----------------------------
FROM ${PYTHON_IMAGE} AS runtime
ARG GIT_COMMIT=""
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=platform_site.settings \
    GIT_COMMIT=${GIT_COMMIT}
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin app \
    && install -d -o app -g app -m 0750 /var/lib/celery
COPY --from=build /opt/venv /opt/venv
# Code owned by root: the app user reads it and cannot change it.
COPY --from=build /app /app
WORKDIR /app
USER 10001:10001
EXPOSE 8000
# Readiness: 200 once the database answers and every migration is applied. X-Forwarded-Proto keeps
# SECURE_SSL_REDIRECT (with SECURE_PROXY_SSL_HEADER) from redirecting the probe.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request as u; r = u.Request('http://127.0.0.1:8000/api/actuator/health/readiness', headers={'X-Forwarded-Proto': 'https'}); sys.exit(0 if u.urlopen(r, timeout=4).status == 200 else 1)"]
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["deploy/serve"]

# --- frontend: nginx with the static files ------------------------------------------------------
# docker-compose.yml mounts deploy/nginx/nginx.conf and deploy/nginx/templates/ over the image's
# configuration; the official image renders the templates with envsubst at start.
FROM ${NGINX_IMAGE} AS frontend
# The image's welcome-page server would answer requests for any other Host name.
RUN rm -f /etc/nginx/conf.d/default.conf
COPY --from=build /srv/static /srv/static
COPY deploy/nginx/nginx.conf /etc/nginx/nginx.conf
COPY deploy/nginx/templates/ /etc/nginx/templates/
