# hack/interop/lib.sh: what every client's run.sh shares. Source it from the
# client's directory (run.sh cds there first):
#
#   source ../lib.sh
#   VENV=$(install_venv pika)          # a venv with requirements.txt, cached
#   DIR=$(install_npm amqplib)         # node_modules from package-lock.json, cached
#   ... run the scenarios ...
#   fail_on_broker_errors pika         # the broker must have logged no error
#
# Installs are cached under $INTEROP_CACHE/<client>-<version>, redone when
# the pinned file changes, and serialized with flock (two runs at once share
# one install).
CACHE=${INTEROP_CACHE:-$HOME/.cache/warren/interop}
mkdir -p "$CACHE"

# install_venv CLIENT: a Python venv with requirements.txt (every package
# pinned, CLIENT==version among them); prints its path.
install_venv() {
  local client=$1 version venv
  version=$(sed -n "s/^$client==//p" requirements.txt)
  venv=$CACHE/$client-$version
  (
    flock 9
    if ! cmp -s requirements.txt "$venv/.requirements"; then
      echo "$client: installing $client $version into $venv" >&2
      rm -rf "$venv"
      python3 -m venv "$venv"
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.txt >&2
      cp requirements.txt "$venv/.requirements"
    fi
  ) 9>"$CACHE/.$client.lock" || return 1
  echo "$venv"
}

# install_npm CLIENT PACKAGE: node_modules for package.json and its
# package-lock.json (npm ci), PACKAGE's version naming the directory;
# prints its path.
install_npm() {
  local client=$1 package=$2 version dir
  version=$(node -p "require('./package.json').dependencies['$package']")
  dir=$CACHE/$client-$version
  (
    flock 9
    if ! cmp -s package-lock.json "$dir/.package-lock.json"; then
      echo "$client: installing $package $version into $dir" >&2
      rm -rf "$dir"
      mkdir -p "$dir"
      cp package.json package-lock.json "$dir/"
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
      cp package-lock.json "$dir/.package-lock.json"
    fi
  ) 9>"$CACHE/.$client.lock" || return 1
  echo "$dir"
}

# fail_on_broker_errors CLIENT: exits 1 if the broker logged an error.
fail_on_broker_errors() {
  if [ -n "${WARREN_LOG:-}" ] && grep -q 'level=ERROR' "$WARREN_LOG"; then
    echo "$1: FAIL the broker logged errors:" >&2
    grep 'level=ERROR' "$WARREN_LOG" | head -5 >&2
    exit 1
  fi
}
