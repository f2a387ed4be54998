# The labtap agent: runs VPCS nodes, relays link frames, writes captures.
# curl and openssl serve the compose file's one-shot enroll service (join
# tokens over HTTPS, the CA's fingerprint from its certificate).
# Build the binaries first, on the host (no Go toolchain is pulled here):
#   go build -o bin/ ./controller ./agent
#   docker build -f docker/agent.Dockerfile -t labtap-agent .
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends vpcs libpcap0.8 ca-certificates curl openssl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/labtap labtap
COPY bin/agent /usr/local/bin/agent
USER labtap
ENV LABTAP_DATA_DIR=/var/lib/labtap LABTAP_LISTEN=0.0.0.0:3081
EXPOSE 3081
ENTRYPOINT ["/usr/local/bin/agent"]
