# syntax=docker/dockerfile:1
# Build: docker build -t taskgate .
# Run:   docker run --rm -p 8080:8080 --add-host=host.docker.internal:host-gateway \
#          taskgate serve --upstream http://host.docker.internal:3000/mcp
#        (--add-host: Linux has no host.docker.internal by default)

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/taskgate ./cmd/taskgate \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/testupstream ./internal/testupstream/cmd/testupstream

# The test MCP server (deploy/docker-compose.yml fronts it):
#   docker build --target testupstream -t taskgate-testupstream .
FROM gcr.io/distroless/static-debian12:nonroot AS testupstream
COPY --from=build /out/testupstream /testupstream
USER nonroot:nonroot
EXPOSE 3000
ENTRYPOINT ["/testupstream", "--listen", "0.0.0.0:3000"]

# Static binary on a minimal base: no shell, no package manager, runs as
# the unprivileged "nonroot" user (uid 65532).
FROM gcr.io/distroless/static-debian12:nonroot AS taskgate
COPY --from=build /out/taskgate /taskgate
USER nonroot:nonroot
ENV TASKGATE_LISTEN=0.0.0.0:8080
EXPOSE 8080
# distroless has no shell or curl: the binary probes its own /readyz, which
# is 200 while the replica can serve tasks (its store answers) whatever the
# upstream's state, so an upstream outage does not mark every container
# unhealthy (the probe prints the upstream's state).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/taskgate", "healthcheck", "--url", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/taskgate"]
CMD ["serve"]
