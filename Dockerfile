# syntax=docker/dockerfile:1
# AgentMarket: one image with both binaries (marketplace and meter); docker-compose.yml
# picks which one runs with `command:`.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so source changes do not invalidate the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Pure Go (the embedded SQLite driver needs no cgo), so the binaries run on distroless/static.
ENV CGO_ENABLED=0
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/marketplace ./cmd/marketplace && \
    go build -trimpath -ldflags="-s -w" -o /out/meter ./cmd/meter && \
    mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot AS runtime
COPY --from=build /out/marketplace /out/meter /usr/local/bin/
# Owned by the nonroot user (65532), so a fresh named volume mounted here is writable.
COPY --from=build --chown=65532:65532 /out/data /data
ENV AGENTMARKET_ADDR=0.0.0.0:8080 \
    AGENTMARKET_METER_ADDR=0.0.0.0:8081 \
    AGENTMARKET_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080 8081
USER nonroot:nonroot
CMD ["marketplace"]
