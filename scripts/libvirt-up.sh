# Sourced by test.sh: installs and starts a real libvirtd with the QEMU driver
# (no systemd needed), idempotently. Sets LIBVIRT_STARTED_PIDS for cleanup.

LIBVIRT_PACKAGES=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 libxml2-utils)
LIBVIRT_STARTED_PIDS=()

libvirt_up() {
  apt_install "${LIBVIRT_PACKAGES[@]}"
  # What libvirt-daemon-system would provide.
  getent group libvirt-qemu >/dev/null || as_root groupadd -r libvirt-qemu
  id libvirt-qemu >/dev/null 2>&1 ||
    as_root useradd -r -g libvirt-qemu -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
  as_root mkdir -p /var/log/libvirt /etc/libvirt
  local conf=/etc/libvirt/qemu.conf
  # Without udev /dev/kvm is root-only: run QEMU as root.
  grep -qE '^\s*user\s*=' "$conf" 2>/dev/null || printf 'user = "root"\ngroup = "root"\n' | as_root tee -a "$conf" >/dev/null
  # libvirt's private /dev namespace fails in containers; pinning does not need it.
  grep -qE '^\s*namespaces\s*=' "$conf" || echo 'namespaces = [ ]' | as_root tee -a "$conf" >/dev/null

  if ! { [ -S /run/libvirt/virtlogd-sock ] && [ -f /run/virtlogd.pid ] && kill -0 "$(cat /run/virtlogd.pid)" 2>/dev/null; }; then
    as_root virtlogd -d
    for _ in $(seq 50); do [ -S /run/libvirt/virtlogd-sock ] && break; sleep 0.1; done
    LIBVIRT_STARTED_PIDS+=("$(cat /run/virtlogd.pid)")
  fi
  # Guests backed by huge pages need hugetlbfs mounted before libvirtd
  # starts (it looks for the mounts once, at start).
  if [ -d /sys/kernel/mm/hugepages ] && ! grep -qs ' hugetlbfs ' /proc/mounts; then
    as_root mkdir -p /dev/hugepages
    if as_root mount -t hugetlbfs hugetlbfs /dev/hugepages; then
      # A libvirtd already running did not see the mount: restart it once
      # (running guests keep running).
      if [ -f /run/libvirtd.pid ] && kill -0 "$(cat /run/libvirtd.pid)" 2>/dev/null; then
        as_root kill "$(cat /run/libvirtd.pid)"
        for _ in $(seq 50); do virsh -q -c qemu:///system version >/dev/null 2>&1 || break; sleep 0.1; done
      fi
    else
      echo "note: cannot mount hugetlbfs; huge page guests will not start" >&2
    fi
  fi
  if ! virsh -q -c qemu:///system version >/dev/null 2>&1; then
    as_root libvirtd -d
    for _ in $(seq 300); do virsh -q -c qemu:///system version >/dev/null 2>&1 && break; sleep 0.2; done
    virsh -q -c qemu:///system version >/dev/null || {
      echo "error: libvirtd does not answer; see /var/log/libvirt/libvirtd.log" >&2
      exit 2
    }
    LIBVIRT_STARTED_PIDS+=("$(cat /run/libvirtd.pid)")
  fi
}

libvirt_down() {
  local pid
  for pid in "${LIBVIRT_STARTED_PIDS[@]}"; do
    as_root kill "$pid" 2>/dev/null || true
  done
}
