# The image the Kubernetes manifests run (`runner k8s render`): `runner` alone, for the server
# pod (`runner serve`) and the agent pods (`runner agent`), and for the runner's own pod.
# Not built on the development machine (no Docker there): see docs/hosts-and-kubernetes.md.
#
#   docker build -t REGISTRY/tbench-runner:TAG . && docker push REGISTRY/tbench-runner:TAG
#
# Builder: the pinned toolchain; no protoc or cmake (protox compiles the .proto in Rust;
# jemalloc needs only the C compiler and make the image has).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p runner \
    && install -m 0755 target/release/runner /usr/local/bin/runner

# Runtime: slim Debian of the same release (same glibc). sh and grep stay: the readiness
# probes read /proc/net. ca-certificates for [targets] verified against the system store.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/runner /usr/local/bin/runner
# Not root; the certificates come from a Secret mounted at /certs.
USER 10001:10001
WORKDIR /home/tbench
ENTRYPOINT ["runner"]
CMD ["--help"]
