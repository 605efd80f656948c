#!/usr/bin/env bash
# Builds the independent Go Varlink client for io.quaked: OUTDIR/quaked-go-client.
#
#   Tests/GoClient/build.sh OUTDIR
#
# The client is built on bindings generated from the interface file at build time (never
# checked in), so it always speaks the io.quaked that Sources/QuakeProtocol/io.quaked.varlink
# defines. Everything comes from Debian's packages (scripts/install-deps installs them):
# golang-go, the varlink Go library golang-github-varlink-go-dev (GOPATH tree under
# /usr/share/gocode) and varlink-go (varlink-go-interface-generator). The build runs in GOPATH
# mode, because Debian packages Go libraries as a GOPATH tree and not as a module cache: with
# modules on, go would try to download github.com/varlink/go. GOPROXY=off makes sure that
# nothing is ever fetched. All intermediate files live in a temporary directory (the source
# tree is never written to); the only output is OUTDIR/quaked-go-client. Quiet on success.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 64
fi
outdir=$1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
interface="$here/../../Sources/QuakeProtocol/io.quaked.varlink"
debian_gopath=/usr/share/gocode

for tool in go varlink-go-interface-generator; do
    if ! command -v "$tool" >/dev/null; then
        echo "$0: $tool not found; run scripts/install-deps" >&2
        exit 69
    fi
done
if [ ! -d "$debian_gopath/src/github.com/varlink/go/varlink" ]; then
    echo "$0: the varlink Go library is missing ($debian_gopath); run scripts/install-deps" >&2
    exit 69
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/quaked-go-client.XXXXXX")
trap 'rm -rf "$work"' EXIT

# GOPATH layout: $work/src/quaked/ioquaked holds the generated bindings (the generator names
# the package after the interface, dots dropped: io.quaked -> ioquaked, file ioquaked.go) and
# $work/src/quaked/goclient the program, which imports "quaked/ioquaked".
bindings="$work/src/quaked/ioquaked"
program="$work/src/quaked/goclient"
mkdir -p "$bindings" "$program"
cp "$interface" "$bindings/io.quaked.varlink"
# The generator prints nothing on success but may print its usage or a parse error on stdout.
if ! generated=$(cd "$bindings" && varlink-go-interface-generator io.quaked.varlink 2>&1); then
    echo "$0: varlink-go-interface-generator failed on io.quaked.varlink:" >&2
    echo "$generated" >&2
    exit 1
fi
if [ ! -f "$bindings/ioquaked.go" ]; then
    echo "$0: varlink-go-interface-generator wrote no ioquaked.go:" >&2
    echo "$generated" >&2
    exit 1
fi
cp "$here"/*.go "$program/"

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd) # the build runs in another directory
# go needs a build cache: keep the user's (faster rebuilds), or use the temporary directory
# when there is no HOME (a test environment may clear it).
gocache=${GOCACHE:-}
if [ -z "$gocache" ]; then
    if [ -n "${XDG_CACHE_HOME:-}" ] || [ -n "${HOME:-}" ]; then
        gocache=$(go env GOCACHE)
    else
        gocache="$work/cache"
    fi
fi
(
    cd "$program"
    GO111MODULE=off GOPATH="$work:$debian_gopath" GOPROXY=off GOFLAGS='' GOCACHE="$gocache" \
        CGO_ENABLED=0 go build -o "$outdir/quaked-go-client" .
)
