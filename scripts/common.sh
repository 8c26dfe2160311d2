# Shared by scripts/test, scripts/run and scripts/bench: install what a bare
# machine lacks, then configure and build. Source it; do not run it.

set -euo pipefail

COALESCE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COALESCE_BUILD="${COALESCE_BUILD:-$COALESCE_ROOT/build}"

# Debian packages the build, the tests and the tools need (prometheus for
# its promtool, which app.metrics lints the metrics page with).
COALESCE_PACKAGES=(
  g++ cmake make pkg-config
  libcaf-dev librocksdb-dev libspdlog-dev libssl-dev
  libcli11-dev nlohmann-json3-dev prometheus-cpp-dev openssl curl ccache
  python3 libsystemd-dev prometheus
)

coalesce_install_packages() {
  local missing=()
  for pkg in "${COALESCE_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing missing packages: ${missing[*]}" >&2
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# coalesce_configure [extra cmake arguments...]
coalesce_configure() {
  coalesce_install_packages
  cmake -S "$COALESCE_ROOT" -B "$COALESCE_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
}

# coalesce_build [extra cmake arguments...]: everything, tests and
# benchmarks included.
coalesce_build() {
  coalesce_configure "$@"
  cmake --build "$COALESCE_BUILD" -j2
}

# coalesce_build_targets TARGET...: only these targets and what they need.
coalesce_build_targets() {
  coalesce_configure
  cmake --build "$COALESCE_BUILD" -j2 --target "$@"
}
