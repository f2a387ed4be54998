# The labtap controller (with its embedded local agent, so it can run VPCS too).
#   go build -o bin/ ./controller ./agent
#   docker build -f docker/controller.Dockerfile -t labtap-controller .
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends vpcs libpcap0.8 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/labtap labtap
COPY bin/controller /usr/local/bin/controller
USER labtap
ENV LABTAP_DATA_DIR=/var/lib/labtap LABTAP_LISTEN=0.0.0.0:3080
EXPOSE 3080
ENTRYPOINT ["/usr/local/bin/controller"]
