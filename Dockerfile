# The image the manifests name (rollplan:latest; `rollplan manifests
# --image` for another): the static rollplan binary on distroless, as the
# non-root user the Deployments' securityContext requires.
#   docker build -t rollplan:latest .
# ko builds the same image without Docker (.ko.yaml). The real-node tests
# (test/node) build this image from this file and .ko.yaml, on a local
# equivalent of the distroless base, and run it: their parser reads only
# the instructions used here and fails on any other, with the line.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# CGO_ENABLED=0: a static binary, nothing to load from the final image.
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-X main.version=${VERSION} -X main.commit=${COMMIT}" \
    -o /out/rollplan ./cmd/rollplan

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/rollplan /rollplan
# 65532 is distroless's nonroot; the manifests' runAsUser matches it.
USER 65532:65532
ENTRYPOINT ["/rollplan"]
