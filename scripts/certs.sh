#!/usr/bin/env bash
# Certificates for the fleet's TLS (docs/SECURITY.md): a local CA, the broker's certificate, and one
# client certificate per fetch node (plus "dispatcher" and "links"). Idempotent: what exists is kept
# (delete a file to make it again); a certificate is remade only when missing or not signed by the CA
# here. Everything goes into DIR (default ~/.cache/crawlfleet/certs, one CA per machine shared by every
# clone: scripts/fleet-files.sh; CRAWLFLEET_MACHINE_DIR moves it); private keys are mode 600.
#
#   scripts/certs.sh [--dir DIR] [--broker-host NAME]... [--days N] [NODE...]
#
#   DIR/ca.pem, ca.key                 the local CA (ca.key never leaves this machine)
#   DIR/broker.pem, broker.key         RabbitMQ's certificate; its names: localhost, 127.0.0.1, and every
#                                      --broker-host (the address or name nodes connect to)
#   DIR/client-NAME.pem, client-NAME.key   one per NODE given and for dispatcher and links (CN=NAME)
#
# Bring your own CA: put your CA certificate at DIR/ca.pem and the broker's and clients' certificates
# and keys at the names above, signed by it; with no DIR/ca.key this script makes nothing and only
# checks that each certificate verifies against DIR/ca.pem. Point fleet.tls_ca / tls_cert / tls_key and
# CRAWLFLEET_RABBITMQ_CERTS (scripts/svc-rabbitmq.sh) at them.
set -euo pipefail

DIR="${CRAWLFLEET_MACHINE_DIR:-$HOME/.cache/crawlfleet}/certs" DAYS=825 HOSTS=() NAMES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --broker-host) HOSTS+=("$2"); shift 2 ;;
    --days) DAYS=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "certs.sh: unknown option $1" >&2; exit 2 ;;
    *) NAMES+=("$1"); shift ;;
  esac
done
for n in "${NAMES[@]}"; do
  [[ "$n" =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ ]] || { echo "certs.sh: bad node name '$n'" >&2; exit 2; }
done
command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl >/dev/null; }
umask 077
mkdir -p "$DIR"
chmod 700 "$DIR"

verifies() { [ -s "$1" ] && openssl verify -CAfile "$DIR/ca.pem" "$1" >/dev/null 2>&1; }

if [ ! -s "$DIR/ca.pem" ]; then
  openssl req -x509 -newkey rsa:3072 -sha256 -nodes -days 3650 -subj "/CN=crawlfleet local CA" \
    -addext "basicConstraints=critical,CA:true" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$DIR/ca.key" -out "$DIR/ca.pem" 2>/dev/null
  echo "certs: made a local CA in $DIR"
fi
chmod 644 "$DIR/ca.pem"
OWN_CA=0; [ -s "$DIR/ca.key" ] && OWN_CA=1

# make NAME CN SAN EKU: DIR/NAME.pem and DIR/NAME.key signed by the CA, unless it verifies already.
make() {
  local name=$1 cn=$2 san=$3 eku=$4
  if verifies "$DIR/$name.pem" && [ -s "$DIR/$name.key" ]; then return 0; fi
  if [ "$OWN_CA" = 0 ]; then
    echo "certs: $DIR/$name.pem missing or not signed by $DIR/ca.pem (bring-your-own CA: make it yourself)" >&2
    return 1
  fi
  local ext; ext=$(mktemp)
  printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s\n' \
    "$eku" "${san:+subjectAltName=$san}" >"$ext"
  openssl req -newkey rsa:2048 -sha256 -nodes -subj "/CN=$cn" -keyout "$DIR/$name.key" -out "$DIR/$name.csr" 2>/dev/null
  openssl x509 -req -in "$DIR/$name.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" -CAcreateserial -days "$DAYS" \
    -sha256 -extfile "$ext" -out "$DIR/$name.pem" 2>/dev/null
  rm -f "$DIR/$name.csr" "$ext"
  chmod 600 "$DIR/$name.key"
  chmod 644 "$DIR/$name.pem"
  echo "certs: $DIR/$name.pem (CN=$cn)"
}

san="DNS:localhost,IP:127.0.0.1"
for h in "${HOSTS[@]}"; do
  if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san+=",IP:$h"; else san+=",DNS:$h"; fi
done
# A new --broker-host needs a new broker certificate: remake it when its names differ.
if [ -s "$DIR/broker.pem" ] && [ "$OWN_CA" = 1 ]; then
  want=$(tr ',' '\n' <<<"$san" | sed 's/^IP:/IP Address:/' | sort | tr '\n' ',')
  have=$(openssl x509 -in "$DIR/broker.pem" -noout -ext subjectAltName 2>/dev/null | tail -n +2 | tr -d ' ' \
         | tr ',' '\n' | sed 's/^IPAddress:/IP Address:/' | sort | tr '\n' ',')
  [ "$want" = "$have" ] || rm -f "$DIR/broker.pem"
fi
make broker rabbitmq-broker "$san" serverAuth
for n in dispatcher links "${NAMES[@]}"; do
  make "client-$n" "$n" "" clientAuth
done
# (RabbitMQ runs as its own user: scripts/svc-rabbitmq.sh conf copies the broker's key where it can read it.)
echo "certs: ready in $DIR"
