#!/usr/bin/env bash
# Network namespaces for fetch nodes on one machine: each node gets its own address on a bridge.
#
#   scripts/netns.sh up NAME ADDR/PLEN --bridge BR [--host HOSTADDR/PLEN] [--route CIDR]...
#   scripts/netns.sh down NAME [--bridge BR]
#   scripts/netns.sh status NAME
#
# up:   creates namespace NAME with loopback up and one veth pair: "h-NAME" in the root namespace,
#       enslaved to bridge BR, and "eth0" inside NAME with ADDR/PLEN. The bridge is created when missing,
#       with HOSTADDR/PLEN (required then); that address is how the namespace reaches the root
#       namespace (forwarders listen there: pipeline/harness/faults/netproxy.py).
#       Each --route CIDR is routed from NAME to the bridge address. A CIDR inside 127.0.0.0/8 (the
#       testbed's addresses) goes into NAME's local table, ahead of its own loopback, and both ends
#       get route_localnet=1, so the root namespace's loopback services at those addresses see the
#       node's own ADDR as the client. Nothing is routed anywhere else: traffic stays on this machine.
# down: deletes namespace NAME (its veth pair goes with it); with --bridge, also the bridge once no
#       interface is left on it. Missing things are not an error. Processes still running inside NAME
#       are not killed (end them by pid first); their pids are printed.
# NAME: at most 13 characters (Linux interface names are at most 15). Needs root and iproute2.
set -euo pipefail

die() { echo "netns.sh: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: netns.sh {up NAME ADDR/PLEN --bridge BR [--host A/P] [--route CIDR]...|down NAME [--bridge BR]|status NAME}"
cmd=$1 name=$2
shift 2
[ ${#name} -le 13 ] || die "NAME '$name' longer than 13 characters"
command -v ip >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }

addr="" bridge="" host="" routes=()
if [ "$cmd" = up ]; then
  [ $# -ge 1 ] || die "up needs ADDR/PLEN"
  addr=$1
  shift
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --bridge) bridge=$2; shift 2 ;;
    --host) host=$2; shift 2 ;;
    --route) routes+=("$2"); shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done

bridge_addr() { ip -4 -o addr show dev "$1" | awk '{print $4}' | head -n1 | cut -d/ -f1; }

case "$cmd" in
  up)
    [ -n "$bridge" ] || die "up needs --bridge BR"
    [ ${#bridge} -le 15 ] || die "bridge name '$bridge' longer than 15 characters"
    ip netns list | awk '{print $1}' | grep -qx "$name" && die "namespace $name exists already"
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      [ -n "$host" ] || die "bridge $bridge does not exist: give --host HOSTADDR/PLEN to create it"
      ip link add "$bridge" type bridge
      ip addr add "$host" dev "$bridge"
      ip link set "$bridge" up
    fi
    sysctl -qw "net.ipv4.conf.$bridge.route_localnet=1"
    via=$(bridge_addr "$bridge")
    [ -n "$via" ] || die "bridge $bridge has no IPv4 address"
    ip netns add "$name"
    {
      ip link add "h-$name" type veth peer name "n-$name"
      ip link set "n-$name" netns "$name"
      ip link set "h-$name" master "$bridge"
      ip link set "h-$name" up
      ip -n "$name" link set lo up
      ip -n "$name" link set "n-$name" name eth0
      ip -n "$name" addr add "$addr" dev eth0
      ip -n "$name" link set eth0 up
      ip netns exec "$name" sysctl -qw net.ipv4.conf.eth0.route_localnet=1
      ip netns exec "$name" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1 2>/dev/null || true
      src=${addr%/*}
      for cidr in "${routes[@]}"; do
        if [[ "$cidr" == 127.* ]]; then
          ip -n "$name" route add "$cidr" via "$via" dev eth0 src "$src" table local
        else
          ip -n "$name" route add "$cidr" via "$via" dev eth0 src "$src"
        fi
      done
    } || { ip netns del "$name" 2>/dev/null || true; ip link del "h-$name" 2>/dev/null || true; die "up $name failed"; }
    echo "netns $name: $addr on $bridge (host $via)${routes[*]:+, routes ${routes[*]}}"
    ;;
  down)
    if ip netns list | awk '{print $1}' | grep -qx "$name"; then
      left=$(ip netns pids "$name" 2>/dev/null | tr '\n' ' ')
      [ -z "$left" ] || echo "netns.sh: processes still in $name (not killed): $left" >&2
      ip netns del "$name"
    fi
    ip link del "h-$name" 2>/dev/null || true
    if [ -n "$bridge" ] && ip link show "$bridge" >/dev/null 2>&1; then
      if [ -z "$(ls "/sys/class/net/$bridge/brif" 2>/dev/null)" ]; then
        ip link del "$bridge"
      fi
    fi
    ;;
  status)
    ip netns list | awk '{print $1}' | grep -qx "$name" || { echo "netns $name: absent"; exit 1; }
    ip -n "$name" -br addr
    ip -n "$name" route show table local | grep -v '^broadcast' || true
    ;;
  *) die "unknown command $cmd" ;;
esac
