#!/usr/bin/env bash
# Build the Groupless image from ./Dockerfile on a machine without a container registry or a
# Docker daemon: only Debian's package archive and PyPI. Rootful buildah and podman, as root.
#
#   scripts/build-image.sh                 build (cached), print the image reference on stdout
#   scripts/build-image.sh run [PODMAN-RUN-OPTIONS...] -- [GROUPLESS-ARGS...]
#                                          build (cached), then run it as the chart does: read-only
#                                          root filesystem, the image's non-root user, host network
#
# Steps, each cached:
#   1. buildah, podman, runc and mmdebstrap from apt-get when one is missing.
#   2. The base: a Debian minbase root filesystem made by mmdebstrap from Debian's archive, with
#      the dpkg path excludes of Debian's slim images (no docs, man pages, locales), imported as
#      localhost/groupless-base:<suite>-<hash of its definition below>. This is what
#      `debian:<suite>-slim` is elsewhere; made once, then reused.
#   3. The image: `buildah build --build-arg BASE=<the base>` of ./Dockerfile (the one definition
#      of the image, unchanged), tagged localhost/groupless:<version>-<hash of the Dockerfile, the
#      base and every file the Dockerfile COPYs> and localhost/groupless:<version>. A tag that
#      exists already is not rebuilt.
#
# What this sandbox needs, and why (found by trying; each works on an ordinary host too):
#   - `buildah build --isolation chroot`: the default OCI isolation runs crun, which refuses this
#     machine's cgroup v1/v2 hybrid layout ("cgroups in hybrid mode not supported"). chroot
#     isolation runs RUN steps without an OCI runtime (no cgroups, no user namespace); the
#     storage driver is overlay (the default), which works rootful here.
#   - `podman run --runtime runc --ulimit nofile=<the shell's limits> --ulimit nproc=4096`:
#     crun has the same cgroup problem; runc does not. The process has no CAP_SYS_RESOURCE, so
#     podman's default limits (1048576 open files) cannot be set: raising a hard limit is denied.
#   - `--network host` for building and running: no bridge network, NAT or iptables needed, and
#     the servers in the container listen on this machine's loopback like everything else here.
#   - The host's CA store is mounted into the build's RUN steps (and a pip.conf pointing pip at
#     it), so pip trusts whatever TLS this machine's route to PyPI presents, as pip on the host
#     does. Mounts are not committed: nothing of it is in the image.
#
# Environment: GROUPLESS_IMAGE (default localhost/groupless), GROUPLESS_BASE_SUITE (bookworm),
# GROUPLESS_DEBIAN_MIRROR (http://deb.debian.org/debian), GROUPLESS_CACHE_DIR (~/.cache/groupless).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE_REPO=${GROUPLESS_IMAGE:-localhost/groupless}
SUITE=${GROUPLESS_BASE_SUITE:-bookworm}
MIRROR=${GROUPLESS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${GROUPLESS_DEBIAN_SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}
CACHE=${GROUPLESS_CACHE_DIR:-$HOME/.cache/groupless}/image
# As Debian's official images: the suite, its updates and its security updates.
SOURCES=(
  "deb $MIRROR $SUITE main"
  "deb $MIRROR $SUITE-updates main"
  "deb $SECURITY_MIRROR $SUITE-security main"
)
# Debian's slim images leave these out (debuerreotype's slimify list); kept in the base's dpkg
# configuration, so the Dockerfile's apt-get installs stay slim too.
SLIM_DPKG_OPTIONS=(
  "path-exclude=/usr/share/doc/*" "path-include=/usr/share/doc/*/copyright"
  "path-exclude=/usr/share/man/*" "path-exclude=/usr/share/groff/*" "path-exclude=/usr/share/info/*"
  "path-exclude=/usr/share/lintian/*" "path-exclude=/usr/share/linda/*"
  "path-exclude=/usr/share/locale/*" "path-include=/usr/share/locale/locale.alias"
)
# and keep no apt caches or translations (their docker-clean and docker-no-languages settings).
SLIM_APT_OPTIONS=(
  'Dir::Cache::pkgcache ""' 'Dir::Cache::srcpkgcache ""' 'Acquire::Languages "none"'
  'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }'
  'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }'
)
# merged /usr through Debian's usr-is-merged, as the official images (mmdebstrap would
# otherwise install usrmerge, which pulls in perl)
BASE_HOOKS=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
BUILD_FLAGS=(--isolation chroot --network host --layers)

say() { echo "[build-image] $*" >&2; }

need_tools() {
  local missing=()
  command -v buildah >/dev/null || missing+=(buildah)
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      say "missing ${missing[*]} and not root: install them (apt-get install ${missing[*]}) or run as root"
      exit 1
    fi
    say "installing ${missing[*]} with apt-get"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
}

hash_text() { sha256sum | cut -c1-16; }

base_definition() {
  printf '%s\n' "suite=$SUITE" "variant=minbase" "${SOURCES[@]}" "${SLIM_DPKG_OPTIONS[@]}" \
    "${SLIM_APT_OPTIONS[@]}" "${BASE_HOOKS[@]}"
}

build_base() {
  local tag=$1 dir
  dir=$(mktemp -d)
  local options=() option
  for option in "${SLIM_DPKG_OPTIONS[@]}"; do options+=("--dpkgopt=$option"); done
  for option in "${SLIM_APT_OPTIONS[@]}"; do options+=("--aptopt=$option"); done
  say "making the base root filesystem with mmdebstrap ($SUITE minbase from $MIRROR)"
  local started=$SECONDS
  mmdebstrap --variant=minbase --mode=root --format=tar "${options[@]}" "${BASE_HOOKS[@]}" \
    "$SUITE" "$dir/rootfs.tar" "${SOURCES[@]}" >&2
  podman import -q \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    "$dir/rootfs.tar" "$tag" >&2
  rm -rf "$dir"
  say "base $tag made in $((SECONDS - started))s"
}

# Every file the Dockerfile COPYs from the context (its COPY lines are the list), without the
# byte code and egg-info that .dockerignore keeps out.
image_inputs() {
  local sources
  sources=$(sed -n -E 's/^COPY +([^-][^ ]*( +[^ ]+)*) +[^ ]+$/\1/p' Dockerfile | tr ' ' '\n')
  printf '%s\n' Dockerfile .dockerignore $sources \
    | xargs -I{} find {} -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' \
    | LC_ALL=C sort
}

build_image() {
  local tag=$1 base=$2 version=$3
  local mounts=() dir
  dir=$(mktemp -d)
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$dir/ca-certificates.crt"
    printf '[global]\ncert = /run/groupless-build/ca-certificates.crt\n' > "$dir/pip.conf"
    mounts=(--volume "$dir:/run/groupless-build:ro" --volume "$dir/pip.conf:/etc/pip.conf:ro")
  fi
  say "building $tag from ./Dockerfile on $base"
  local started=$SECONDS
  # Twice: the first pass builds the stages before the last one with the CA mounts (pip runs
  # there); the second builds the whole file without them, taking those stages from the layer
  # cache, so the final stage's RUN steps see no mount and leave no mount point in the image.
  local stages
  stages=$(grep -c -E '^FROM ' Dockerfile)
  if [ "$stages" -gt 1 ]; then
    buildah build "${BUILD_FLAGS[@]}" "${mounts[@]}" --build-arg "BASE=$base" \
      --target "$(sed -n -E 's/^FROM .* AS ([^ ]+)$/\1/p' Dockerfile | tail -1)" -f Dockerfile . >&2
  fi
  buildah build "${BUILD_FLAGS[@]}" --build-arg "BASE=$base" \
    --tag "$tag" --tag "$IMAGE_REPO:$version" -f Dockerfile . >&2
  rm -rf "$dir"
  say "image $tag built in $((SECONDS - started))s"
}

main_build() {
  if [ "$(id -u)" != 0 ]; then
    say "run as root: the build uses rootful buildah (rootless needs /etc/subuid ranges and fuse-overlayfs)"
    exit 1
  fi
  need_tools
  mkdir -p "$CACHE"
  exec 9>"$CACHE/build.lock"
  flock 9  # one build at a time (a test and a person may start one together)

  local base_tag="localhost/groupless-base:$SUITE-$(base_definition | hash_text)"
  if ! podman image exists "$base_tag"; then
    build_base "$base_tag"
  fi
  local version base_id key tag
  version=$(sed -n -E 's/^version = "([^"]+)"/\1/p' pyproject.toml | head -1)
  base_id=$(podman image inspect --format '{{.Id}}' "$base_tag")
  key=$({ echo "base=$base_id"; image_inputs | xargs -d '\n' sha256sum; } | hash_text)
  tag="$IMAGE_REPO:$version-$key"
  if podman image exists "$tag"; then
    say "$tag is up to date (inputs unchanged)"
    podman tag "$tag" "$IMAGE_REPO:$version"
  else
    build_image "$tag" "$base_tag" "$version"
    # one cached build per version: drop the older names (their layers stay for --layers reuse;
    # `podman untag IMAGE NAME` removes that one name, `podman untag IMAGE` would remove them all)
    local old
    for old in $(podman images --format '{{.Repository}}:{{.Tag}}' "$IMAGE_REPO" \
                 | grep -E "^$IMAGE_REPO:$version-[0-9a-f]{16}$" | grep -v -x -F "$tag"); do
      podman untag "$old" "$old" >&2
    done
  fi
  echo "$tag"
}

main_run() {
  local podman_args=() image
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do podman_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  image=$(main_build)
  exec podman run --rm --runtime runc --network host --read-only \
    --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=4096:4096 \
    "${podman_args[@]}" "$image" "$@"
}

case "${1:-}" in
  run) shift; main_run "$@" ;;
  ""|build) main_build ;;
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) say "unknown command ${1}; see --help"; exit 2 ;;
esac
