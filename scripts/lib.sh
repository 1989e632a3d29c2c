# Shared by run-example.sh and test.sh: idempotent installs and the build cache.
# Sourced, not run.

export DEBIAN_FRONTEND=noninteractive
# Build output lives outside the clone so that fresh clones (CI) reuse it.
: "${CARGO_TARGET_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/pinplan-target}"
export CARGO_TARGET_DIR
mkdir -p "$CARGO_TARGET_DIR"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_install PKG...: installs the packages that are not installed yet.
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
  as_root apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# What the build needs (hwlocality-sys links hwloc with pkg-config --static,
# which needs libudev; virt needs libvirt; the default MIP backend links
# Debian's CBC, coinor-libcbc-dev: ~27 MB, no C++ build of ours).
BUILD_PACKAGES=(pkg-config gcc libc6-dev libvirt-dev libhwloc-dev libudev-dev coinor-libcbc-dev)

# hwlocality is built against the hwloc 2.8 API (Debian 12 ships 2.9.0,
# Ubuntu 24.04 2.10.0; Ubuntu 22.04's 2.7.0 is too old).
need_hwloc() {
  pkg-config --atleast-version=2.8 hwloc || {
    echo "error: pinplan needs hwloc >= 2.8, this system has $(pkg-config --modversion hwloc 2>/dev/null || echo none)" >&2
    echo "hint: use Debian 12 or Ubuntu 24.04 or newer, or install hwloc >= 2.8 with its pkg-config file" >&2
    exit 2
  }
}

need_cargo() {
  command -v cargo >/dev/null 2>&1 || {
    echo "error: cargo not found; install Rust (https://rustup.rs), then run this again" >&2
    exit 2
  }
}
