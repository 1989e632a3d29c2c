#!/usr/bin/env bash
# Installs pinplan under PREFIX: the binary (cargo install), its man pages,
# its bash, zsh and fish completions, the example files its help runs on
# (PREFIX/share/pinplan/examples) and its docs (PREFIX/share/doc/pinplan). PREFIX defaults to /usr/local as
# root and to ~/.local otherwise. Installs the build packages that are
# missing, as scripts/run-example.sh does. Safe to run again: every file is
# replaced by the new one.
#
#   scripts/install.sh                      # root: /usr/local, else ~/.local
#   PREFIX=/opt/pinplan scripts/install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_cargo
apt_install "${BUILD_PACKAGES[@]}"
need_hwloc

if [ "$(id -u)" -eq 0 ]; then
  : "${PREFIX:=/usr/local}"
else
  : "${PREFIX:=$HOME/.local}"
fi

# --path always builds and installs (the build reuses $CARGO_TARGET_DIR).
cargo install --locked --quiet --path cli --root "$PREFIX"
pinplan="$PREFIX/bin/pinplan"

# pinplan.1 and pinplan-COMMAND.1, each written atomically.
"$pinplan" --quiet man --out "$PREFIX/share/man/man1"

# install_output FILE CMD...: CMD's output as FILE, replaced in one rename.
install_output() {
  local file=$1
  shift
  mkdir -p "$(dirname "$file")"
  "$@" > "$file.tmp.$$"
  chmod 0644 "$file.tmp.$$"
  mv -f "$file.tmp.$$" "$file"
}
bash_file="$PREFIX/share/bash-completion/completions/pinplan"
zsh_file="$PREFIX/share/zsh/site-functions/_pinplan"
fish_file="$PREFIX/share/fish/vendor_completions.d/pinplan.fish"
install_output "$bash_file" "$pinplan" completions bash
install_output "$zsh_file" "$pinplan" completions zsh
install_output "$fish_file" "$pinplan" completions fish

# install_tree SRC DEST: the directory SRC as DEST, replaced as a whole:
# copied beside, then swapped in.
install_tree() {
  local src=$1 dest=$2
  mkdir -p "$(dirname "$dest")"
  rm -rf "$dest.new.$$"
  cp -R "$src" "$dest.new.$$"
  chmod -R u=rwX,go=rX "$dest.new.$$"
  rm -rf "$dest.old.$$"
  if [ -e "$dest" ]; then mv "$dest" "$dest.old.$$"; fi
  mv "$dest.new.$$" "$dest"
  rm -rf "$dest.old.$$"
}
# The example files every help example runs on (pinplan help examples), and
# the docs `pinplan help formats` and `policies` name by file.
share="$PREFIX/share/pinplan"
docs="$PREFIX/share/doc/pinplan"
install_tree examples "$share/examples"
install_tree docs "$docs"

echo "installed $("$pinplan" --version)" >&2
echo "  binary:      $pinplan" >&2
echo "  man pages:   $PREFIX/share/man/man1/pinplan*.1" >&2
echo "  completions: $bash_file, $zsh_file, $fish_file" >&2
echo "  examples:    $share/examples (pinplan help examples)" >&2
echo "  docs:        $docs" >&2
case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "note: $PREFIX/bin is not on PATH; add it to use pinplan (and its man pages) by name" >&2 ;;
esac
