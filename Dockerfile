# bridge-store with every backend and the bundled bridge client.
#
# The base image is pinned by its full version tag. Pinning its digest as well needs
# a registry to read it from, and none was reachable where this file was written; to
# pin it, run `docker buildx imagetools inspect python:3.11.14-slim-bookworm` and
# write FROM python:3.11.14-slim-bookworm@sha256:<the index digest it prints>.
FROM python:3.11.14-slim-bookworm

WORKDIR /src
COPY pyproject.toml README.md ./
COPY bridge_store ./bridge_store
COPY backends ./backends
COPY migrations ./migrations
# The data directory belongs to the image's user, a fixed uid: Kubernetes checks
# runAsNonRoot against a number, and volumes are handed to it by that number.
RUN pip install --no-cache-dir ".[postgres,redis,s3,client]" \
    && useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin bridge-store \
    && mkdir /data \
    && chown 10001:10001 /data \
    && rm -rf /src

# serve's default store, sqlite:///bridge-store.db, and a token it generates land in
# the working directory: the volume. (Not an ENV BRIDGE_STORE_URL, which would win
# over a --config file.)
WORKDIR /data
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8787
# Ready, not merely alive: every backend answers (/readyz). With Python's standard
# library, so the image needs no curl.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/readyz', timeout=4)"]
ENTRYPOINT ["bridge-store"]
CMD ["serve", "--host", "0.0.0.0"]
