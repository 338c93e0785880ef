# bridge-store with every backend and the bundled bridge client.
FROM python:3.11-slim

WORKDIR /src
COPY pyproject.toml README.md ./
COPY bridge_store ./bridge_store
COPY backends ./backends
COPY migrations ./migrations
RUN pip install --no-cache-dir ".[postgres,redis,s3,client]" \
    && useradd --create-home --uid 10001 bridge-store

USER bridge-store
WORKDIR /home/bridge-store
EXPOSE 8787
ENTRYPOINT ["bridge-store"]
CMD ["serve", "--host", "0.0.0.0"]
