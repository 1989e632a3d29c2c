# Sourced by scripts/test.sh: an sshd of the tests' own on the loopback
# address, key-based, for libvirt's remote transport (qemu+ssh://). It has
# its own host key, client key and authorized_keys in a private directory,
# reads no system configuration (-f /dev/null), and is stopped at exit.
# sshd_up exports PINPLAN_TEST_SSH_URI, this machine's system libvirtd
# reached through it.

SSHD_DIR=""
SSHD_PID=""

sshd_up() {
  apt_install openssh-server
  SSHD_DIR=$(mktemp -d /tmp/pinplan-sshd.XXXXXX)
  chmod 700 "$SSHD_DIR"
  as_root mkdir -p /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/client_key"
  cp "$SSHD_DIR/client_key.pub" "$SSHD_DIR/authorized_keys"
  chmod 600 "$SSHD_DIR/authorized_keys"
  # A free port on the loopback address.
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_root /usr/sbin/sshd -f /dev/null \
    -o "Port=$port" -o ListenAddress=127.0.0.1 \
    -o "HostKey=$SSHD_DIR/host_key" -o "AuthorizedKeysFile=$SSHD_DIR/authorized_keys" \
    -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no \
    -o StrictModes=no -o UsePAM=no -o "PidFile=$SSHD_DIR/sshd.pid" \
    -E "$SSHD_DIR/sshd.log"
  for _ in $(seq 50); do [ -s "$SSHD_DIR/sshd.pid" ] && break; sleep 0.1; done
  SSHD_PID=$(cat "$SSHD_DIR/sshd.pid")
  export PINPLAN_TEST_SSH_URI="qemu+ssh://root@localhost:$port/system?keyfile=$SSHD_DIR/client_key&no_verify=1&known_hosts=$SSHD_DIR/known_hosts"
  if ! virsh -q -c "$PINPLAN_TEST_SSH_URI" version >/dev/null 2>&1; then
    echo "error: libvirt through ssh on 127.0.0.1:$port does not answer (see $SSHD_DIR/sshd.log)" >&2
    return 1
  fi
}

sshd_down() {
  [ -n "$SSHD_PID" ] && as_root kill "$SSHD_PID" 2>/dev/null || true
  [ -n "$SSHD_DIR" ] && rm -rf "$SSHD_DIR"
}
