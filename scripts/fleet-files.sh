#!/usr/bin/env bash
# The dev stack's TLS certificates and broker secrets are kept per machine and shared by every clone of
# crawlfleet on it: `make services` runs one RabbitMQ per machine, which trusts one CA and knows one
# password per user, so every clone must present the same files (docs/SECURITY.md).
#
#   scripts/fleet-files.sh link [CLONE]   CLONE's var/certs and var/secrets (default: this clone's) become
#                                         links to the machine's files
#   scripts/fleet-files.sh check          one line on stderr, exit 1, when the running broker's TLS
#                                         certificate does not verify against the machine's CA; else exit 0
#
# The machine's files: CRAWLFLEET_RABBITMQ_CERTS and CRAWLFLEET_RABBITMQ_SECRETS, by default
# $CRAWLFLEET_MACHINE_DIR/certs and /secrets, where CRAWLFLEET_MACHINE_DIR defaults to ~/.cache/crawlfleet
# (the container image sets /app/var, the volume its containers share). The broker asked: the TLS
# listener of scripts/svc-rabbitmq.sh (CRAWLFLEET_RABBITMQ_TLS_PORT, 5671).
#
# A clone made before the files were kept per machine holds its own var/certs and var/secrets
# (directories, not links). `link` settles which pair is the machine's; nothing is deleted, a pair set
# aside is renamed NAME.replaced-TIME:
# - the machine has no CA yet: the clone's pair moves there;
# - the running broker's certificate verifies against the clone's CA and not the machine's: the clone's
#   pair moves there, the machine's is set aside (the broker was set up from that clone);
# - otherwise the machine's pair stays (the broker trusts it, or no broker runs and the next one starts
#   from it) and the clone's is set aside.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MACHINE="${CRAWLFLEET_MACHINE_DIR:-$HOME/.cache/crawlfleet}"
CERTS="${CRAWLFLEET_RABBITMQ_CERTS:-$MACHINE/certs}"
SECRETS="${CRAWLFLEET_RABBITMQ_SECRETS:-$MACHINE/secrets}"
TLS_PORT="${CRAWLFLEET_RABBITMQ_TLS_PORT:-5671}"
TLS_HOST="${CRAWLFLEET_RABBITMQ_TLS_BIND:-127.0.0.1}"
TLS_HOST="${TLS_HOST/0.0.0.0/127.0.0.1}"

# verdict CAFILE: "yes" when the broker's TLS certificate verifies against CAFILE, "no" when it does not,
# "unknown" when there is no CA file, no openssl or no TLS listener to ask. No client certificate is
# sent: the broker may end the handshake for want of one, after the verification this asks about.
verdict() {
  if [ ! -s "$1" ] || ! command -v openssl >/dev/null 2>&1; then echo unknown; return 0; fi
  local out
  out=$(timeout 15 openssl s_client -connect "$TLS_HOST:$TLS_PORT" -servername localhost -CAfile "$1" \
          -verify_return_error -brief </dev/null 2>&1) || true
  if grep -q "^Verification: OK" <<<"$out"; then
    echo yes
  elif grep -qiE "verify error|certificate verify failed|^Verification error" <<<"$out"; then
    echo no
  else
    echo unknown
  fi
}

same_place() { [ "$(realpath -m "$1")" = "$(realpath -m "$2")" ]; }
own_dir() { [ -d "$1" ] && [ ! -L "$1" ]; }  # a directory of the clone's own, not a link

aside() {  # aside DIR: renamed DIR.replaced-TIME when it exists
  [ -e "$1" ] || [ -L "$1" ] || return 0
  local to
  to="$1.replaced-$(date +%Y%m%d-%H%M%S)"
  mv "$1" "$to"
  echo "fleet-files: set aside $1 as $to" >&2
}

adopt() {  # adopt OWN TARGET: the clone's directory OWN becomes the machine's TARGET
  own_dir "$1" || return 0
  if [ -d "$2" ] && [ -z "$(ls -A "$2")" ]; then rmdir "$2"; else aside "$2"; fi
  mkdir -p "$(dirname "$2")"
  mv "$1" "$2"
  echo "fleet-files: $1 moved to $2 (kept per machine from now on)" >&2
}

link_one() {  # link_one LINK TARGET: LINK is a link to the directory TARGET (made, mode 700, if missing)
  mkdir -p "$2"
  chmod 700 "$2"
  same_place "$1" "$2" && return 0  # already a link to it, or the very directory (the container image)
  ln -sfn "$2" "$1"
}

do_link() {
  local clone=$1 vc="$1/var/certs" vs="$1/var/secrets"
  mkdir -p "$MACHINE" "$clone/var"
  exec 9>"$MACHINE/.fleet-files.lock"  # two clones linking at once (make services beside honcho start)
  flock 9
  if { own_dir "$vc" && ! same_place "$vc" "$CERTS"; } || { own_dir "$vs" && ! same_place "$vs" "$SECRETS"; }; then
    local choice=aside
    if [ ! -s "$CERTS/ca.pem" ]; then
      choice=adopt
    elif [ -s "$vc/ca.pem" ] && ! cmp -s "$vc/ca.pem" "$CERTS/ca.pem" \
        && [ "$(verdict "$vc/ca.pem")" = yes ] && [ "$(verdict "$CERTS/ca.pem")" != yes ]; then
      choice=adopt  # the broker was set up from this clone's files
    fi
    if [ "$choice" = adopt ]; then
      adopt "$vc" "$CERTS"
      adopt "$vs" "$SECRETS"
    else
      own_dir "$vc" && ! same_place "$vc" "$CERTS" && aside "$vc"
      own_dir "$vs" && ! same_place "$vs" "$SECRETS" && aside "$vs"
    fi
  fi
  link_one "$vc" "$CERTS"
  link_one "$vs" "$SECRETS"
}

do_check() {
  [ "$(verdict "$CERTS/ca.pem")" = no ] || return 0
  echo "rabbitmq: CA mismatch: the broker on $TLS_HOST:$TLS_PORT has a certificate that $CERTS/ca.pem does not" \
       "verify, so this machine's fleet processes will fail TLS verification (the broker was set up from" \
       "another clone's var/certs); fix: scripts/fleet-files.sh link CLONE (the clone that set it up)," \
       "or restart the broker: scripts/svc-rabbitmq.sh stop; make services" >&2
  return 1
}

case "${1:-}" in
  link)
    clone="${2:-$ROOT}"
    [ -d "$clone" ] || { echo "fleet-files.sh: $clone is not a directory (expected a crawlfleet clone)" >&2; exit 2; }
    do_link "$(cd "$clone" && pwd)"
    ;;
  check) do_check ;;
  -h|--help) sed -n '2,23p' "$0" ;;
  *) echo "usage: $0 link [CLONE] | check" >&2; exit 2 ;;
esac
