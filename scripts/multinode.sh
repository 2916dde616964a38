#!/usr/bin/env bash
# multinode.sh -- an emulated cluster on one machine: M nodes, each a network namespace with
# its own shaped full-duplex link into one switch, and MPI jobs of M x K ranks on them.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/multinode.sh up      --nodes M [--rate RATE] [--delay TIME]
       scripts/multinode.sh down
       scripts/multinode.sh status
       scripts/multinode.sh run     --nodes M --ranks-per-node K [--rate RATE] [--delay TIME]
                                    [--intra sm|tcp] [MPIRUN OPTIONS...] -- COMMAND [ARGS...]
       scripts/multinode.sh measure [--rate RATE] [--delay TIME] [--bytes SIZE]
       scripts/multinode.sh rankmap --nodes M --ranks-per-node K

The bed (all of it in namespaces; the machine's own network is not touched):
  PREFIX-hub   a namespace holding the switch: bridge br0 with SUBNET.254/24, where
               mpirun runs; port vM is node M's link
  PREFIX-nM    node M (M = 0..nodes-1): lo, and eth0 = SUBNET.(M+1)/24, the other end
               of the hub's vM. Nothing else, no default route: only the bed is reachable.
  Each link is shaped in both directions (egress of eth0 in the node = upload, egress
  of vM in the hub = download), each with its own
      tc qdisc ... root handle 1: tbf rate RATE burst max(64KiB, 1 ms of RATE) latency QUEUE
      tc qdisc ... parent 1:1 handle 10: netem delay TIME
  so a node sends and receives RATE at once (full duplex), its ranks share its link, and a
  message between two nodes crosses two links: one-way delay 2 x TIME. tbf counts
  Ethernet frames: MPI payload gets ~95 % of RATE at MTU 1500.

Subcommands:
  up       create or update the bed with exactly M nodes (idempotent: existing pieces are
           kept, the shaping is set again, nodes beyond M are removed). If anything fails
           halfway, the whole bed is removed.
  down     kill what still runs in the bed's namespaces and remove them (idempotent).
  status   the namespaces, addresses, qdiscs and processes of the bed.
  run      `up`, then one MPI job of M*K ranks: ranks m*K .. m*K+K-1 run in node m (an
           mpirun in the hub starts one Open MPI daemon per node through `ip netns exec`,
           each node with its own host name PREFIX-nM). Ranks of one node talk over
           shared memory (--intra sm, default) or TCP on the node's own loopback
           (--intra tcp); ranks of different nodes over TCP through the shaped links.
           MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups the ranks of a node. The job
           gets TAGC_RANKS_PER_NODE=K and TAGC_BED_NODES=M in its environment. Options
           not listed above, before `--`, go to mpirun (e.g. -x OMP_NUM_THREADS). The bed
           stays up afterwards (`down` removes it). Exit status: the job's.
  measure  up 2 nodes, then a 2 x 2-rank probe (scripts/lib/multinode_probe.c, built with
           mpicc): rates node->node one way, both ways at once, two ranks sharing a node's
           link, and two ranks inside one node; then one raw TCP connection between the
           two nodes carrying data both ways at once (python3). Default --rate 1gbit,
           --bytes 32M.
  rankmap  print the rank -> node mapping `run` uses (needs no privileges).

Options:
  --nodes M            number of nodes, 1..250 (measure: 2)
  --ranks-per-node K   ranks in each node, >= 1
  --rate RATE          tc rate of each node's link per direction, e.g. 1gbit, 10gbit,
                       500mbit; `none` for no rate limit (default 1gbit)
  --queue TIME         tbf's queue, as the time to drain it at RATE (default 50ms)
  --delay TIME         netem delay added by each link per direction, e.g. 0.1ms, 50us;
                       0 for none (default 0). Needs the kernel's netem
                       qdisc (sch_netem), which the machine this was written on lacks
Environment:
  TAGC_BED_PREFIX  name prefix of the namespaces (default tagc; letters and digits, up to 8)
  TAGC_BED_SUBNET  first three octets of the bed's private /24 (default 10.77.0). Each bed
                   is its own isolated network, so two beds of different prefixes may even
                   use the same subnet.
  MPIRUN           the mpirun to use (default: mpirun on PATH; Open MPI 4.1)
Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2 (ip, tc) and util-linux (unshare).
EOF
}

die() { echo "multinode.sh: $*" >&2; exit 2; }
say() { echo "multinode.sh: $*"; }

SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
PREFIX=${TAGC_BED_PREFIX:-tagc}
SUBNET=${TAGC_BED_SUBNET:-10.77.0}
[[ $PREFIX =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "TAGC_BED_PREFIX '$PREFIX': expected a letter then up to 7 letters or digits"
# Private addresses only (RFC 1918): the bed never names an address outside the machine.
[[ $SUBNET =~ ^(10\.[0-9]{1,3}\.[0-9]{1,3}|192\.168\.[0-9]{1,3}|172\.(1[6-9]|2[0-9]|3[01])\.[0-9]{1,3})$ ]] ||
  die "TAGC_BED_SUBNET '$SUBNET': expected the first three octets of a private /24 (10.x.y, 172.16-31.x, 192.168.x)"
for octet in ${SUBNET//./ }; do ((octet <= 255)) || die "TAGC_BED_SUBNET '$SUBNET': octet $octet > 255"; done
HUB=$PREFIX-hub
node_ns() { echo "$PREFIX-n$1"; }
node_addr() { echo "$SUBNET.$(($1 + 1))"; }
HUB_ADDR=$SUBNET.254

# ---- arguments ------------------------------------------------------------------------
NODES="" RPN="" RATE=1gbit DELAY=0 QUEUE=50ms INTRA=sm BYTES=32M
MPI_EXTRA=() COMMAND=()
check_nodes() {
  [[ $NODES =~ ^[1-9][0-9]*$ ]] && ((NODES <= 250)) || die "--nodes '$NODES': expected an integer in 1..250"
}
check_rpn() { [[ $RPN =~ ^[1-9][0-9]*$ ]] || die "--ranks-per-node '$RPN': expected a positive integer"; }
check_shape() {
  shopt -s nocasematch
  [[ $RATE == none || $RATE =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit)$ ]] ||
    die "--rate '$RATE': expected a tc rate in bits per second (e.g. 500mbit, 1gbit, 10gbit) or none"
  [[ $DELAY == 0 || $DELAY =~ ^[0-9]+(\.[0-9]+)?(us|usec|ms|msec|s|sec)$ ]] ||
    die "--delay '$DELAY': expected a time (e.g. 0.1ms, 50us) or 0"
  [[ $QUEUE =~ ^[0-9]+(\.[0-9]+)?(us|usec|ms|msec|s|sec)$ ]] ||
    die "--queue '$QUEUE': expected a time (e.g. 50ms)"
  shopt -u nocasematch
}

# parse_options ALLOWED... -- "$@": sets the globals; `--` and what follows go to COMMAND;
# with `forward` allowed, unknown options go to MPI_EXTRA (run passes them to mpirun).
parse_options() {
  local allowed=" "
  while [[ $1 != -- ]]; do allowed+="$1 "; shift; done
  shift
  while [[ $# -gt 0 ]]; do
    local opt=$1
    if [[ $opt == -- ]]; then
      [[ $allowed == *" command "* ]] || die "'--' and a command are for 'run' only"
      shift; COMMAND=("$@"); return
    fi
    if [[ $opt == --* && $allowed == *" ${opt#--} "* ]]; then
      [[ $# -ge 2 ]] || die "$opt needs a value"
      case $opt in
        --nodes) NODES=$2 ;;
        --ranks-per-node) RPN=$2 ;;
        --rate) RATE=$2 ;;
        --delay) DELAY=$2 ;;
        --queue) QUEUE=$2 ;;
        --intra) INTRA=$2 ;;
        --bytes) BYTES=$2 ;;
      esac
      shift 2
    elif [[ $allowed == *" forward "* && $opt == -* ]]; then
      MPI_EXTRA+=("$opt"); shift
    elif [[ $allowed == *" forward "* ]]; then
      MPI_EXTRA+=("$opt"); shift  # an mpirun option's value
    else
      die "unknown argument '$opt' (see --help)"
    fi
  done
}

# ---- privileges and tools ------------------------------------------------------------
preflight() {
  local tool
  for tool in ip tc unshare; do
    command -v "$tool" >/dev/null || die "'$tool' not found (ip, tc: iproute2; unshare: util-linux)"
  done
  local capeff
  capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status 2>/dev/null || echo 0)
  (((16#${capeff:-0} >> 12) & 1)) ||
    die "needs CAP_NET_ADMIN to create network namespaces and shape links: run as root (uid now $(id -u))"
  (((16#${capeff:-0} >> 21) & 1)) ||
    die "needs CAP_SYS_ADMIN for 'ip netns add' (mounts /run/netns): run as root in a privileged container"
}

ns_exists() { [[ -e /run/netns/$1 ]]; }
# Indices of this bed's nodes that exist, ascending.
existing_nodes() {
  local f
  for f in /run/netns/"$PREFIX"-n*; do
    [[ -e $f && ${f##*/} =~ ^$PREFIX-n([0-9]+)$ ]] && echo "${BASH_REMATCH[1]}"
  done | sort -n
}

# tbf's bucket: at least 64 KiB (a GSO frame passes whole), else 1 ms of the rate (the
# timer's granularity must not cap the rate at 10 Gbit/s and above).
burst_bytes() {
  local rate=${1,,} unit mult bits
  unit=${rate##*[0-9.]}
  case $unit in bit) mult=1 ;; kbit) mult=1000 ;; mbit) mult=1000000 ;; gbit) mult=1000000000 ;; tbit) mult=1000000000000 ;; esac
  bits=$(awk -v v="${rate%"$unit"}" -v m="$mult" 'BEGIN { printf "%.0f", v * m }')
  local b=$((bits / 8 / 1000))
  echo $((b > 65536 ? b : 65536))
}

add_delay() {  # NAMESPACE DEVICE parent 1:1 | root
  local ns=$1 dev=$2; shift 2
  tc -n "$ns" qdisc add dev "$dev" "$@" handle 10: netem delay "$DELAY" limit 100000 || {
    echo "multinode.sh: tc refused 'netem delay $DELAY': a kernel without sch_netem" \
      "(CONFIG_NET_SCH_NETEM, as on the machine this was written on) cannot add delay; use --delay 0" >&2
    return 1
  }
}

# shape NAMESPACE DEVICE: the egress qdiscs of one end of a link.
shape() {
  local ns=$1 dev=$2
  tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
  if [[ $RATE != none ]]; then
    tc -n "$ns" qdisc add dev "$dev" root handle 1: tbf rate "$RATE" burst "$(burst_bytes "$RATE")" latency "$QUEUE"
    [[ $DELAY == 0 ]] || add_delay "$ns" "$dev" parent 1:1
  elif [[ $DELAY != 0 ]]; then
    add_delay "$ns" "$dev" root
  fi
}

# ---- up / down -----------------------------------------------------------------------
bed_down() {
  local ns pid names=()
  for ns in $(existing_nodes); do names+=("$(node_ns "$ns")"); done
  ns_exists "$HUB" && names+=("$HUB")
  # Processes the bed started (daemons, ranks) that outlived their job: ended by id.
  for ns in "${names[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  done
  for ns in "${names[@]}"; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do [[ -z $(ip netns pids "$ns" 2>/dev/null) ]] && break; sleep 0.2; done
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    # Deleting a node deletes its eth0 and with it the hub's end of the pair.
    ip netns del "$ns" 2>/dev/null || { ns_exists "$ns" && echo "multinode.sh: could not delete namespace $ns" >&2; }
  done
  return 0
}

bed_up_steps() {
  ns_exists "$HUB" || ip netns add "$HUB"
  ip -n "$HUB" link set lo up
  ip -n "$HUB" link show br0 &>/dev/null || ip -n "$HUB" link add br0 type bridge
  ip -n "$HUB" addr replace "$HUB_ADDR/24" dev br0
  ip -n "$HUB" link set br0 up
  local m ns
  for ((m = 0; m < NODES; ++m)); do
    ns=$(node_ns "$m")
    ns_exists "$ns" || ip netns add "$ns"
    ip -n "$ns" link set lo up
    if ! ip -n "$ns" link show eth0 &>/dev/null; then
      ip -n "$HUB" link del "v$m" 2>/dev/null || true  # a half-made pair from an earlier failure
      ip -n "$HUB" link add "v$m" type veth peer name eth0 netns "$ns"
    fi
    ip -n "$HUB" link set "v$m" master br0 up
    ip -n "$ns" addr replace "$(node_addr "$m")/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$ns" eth0
    shape "$HUB" "v$m"
  done
  for m in $(existing_nodes); do
    ((m < NODES)) || { ip netns del "$(node_ns "$m")"; say "removed node $m (bed now has $NODES)"; }
  done
}

bed_up() {
  preflight
  # A subshell, so the traps are this step's own: any failure removes the whole bed. Not
  # an `if` condition: bash ignores set -e inside one, subshells included.
  local rc
  set +e
  (
    set -eE
    trap 'echo "multinode.sh: up failed (line $LINENO: $BASH_COMMAND); removing the bed" >&2; exit 1' ERR
    trap 'exit 130' INT
    trap 'exit 143' TERM
    bed_up_steps
  )
  rc=$?
  set -e
  if ((rc != 0)); then
    bed_down
    die "could not bring the bed up; nothing of it is left (check: scripts/multinode.sh status)"
  fi
  say "bed $PREFIX up: $NODES node(s) on $SUBNET.0/24, each link $RATE per direction, delay $DELAY per link"
}

bed_status() {
  local found=0 m ns
  if ns_exists "$HUB"; then
    found=1
    echo "hub $HUB: $(ip -n "$HUB" -o -4 addr show dev br0 2>/dev/null | awk '{print "br0 " $4}')," \
      "processes: $(ip netns pids "$HUB" 2>/dev/null | wc -l)"
  fi
  for m in $(existing_nodes); do
    found=1
    ns=$(node_ns "$m")
    echo "node $m $ns: $(ip -n "$ns" -o -4 addr show dev eth0 2>/dev/null | awk '{print "eth0 " $4}')," \
      "processes: $(ip netns pids "$ns" 2>/dev/null | wc -l)"
    echo "  up   (eth0): $(tc -n "$ns" qdisc show dev eth0 2>/dev/null | tr '\n' ';')"
    echo "  down (v$m):  $(tc -n "$HUB" qdisc show dev "v$m" 2>/dev/null | tr '\n' ';')"
  done
  ((found)) || echo "no bed with prefix $PREFIX"
}

# ---- run -----------------------------------------------------------------------------
rankmap() {
  local r
  for ((r = 0; r < NODES * RPN; ++r)); do
    echo "rank $r node $((r / RPN)) namespace $(node_ns $((r / RPN))) address $(node_addr $((r / RPN)))"
  done
}

# Open MPI's launcher agent (plm_rsh_agent) for the bed: instead of ssh to a host, start
# the daemon's command line in that host's namespace, under its own host name.
rsh_agent() {
  local host=$1; shift
  [[ $host =~ ^${SUBNET//./\\.}\.([0-9]+)$ ]] || die "rsh agent: host '$host' is not a node of the bed ($SUBNET.x)"
  local m=$((BASH_REMATCH[1] - 1)) ns
  ns=$(node_ns "$m")
  ns_exists "$ns" || die "rsh agent: no namespace $ns for host $host"
  # $* is the daemon's command line, quoted for a remote shell as ssh would pass it.
  exec ip netns exec "$ns" unshare --uts sh -c 'echo "$0" >/proc/sys/kernel/hostname && exec sh -c "$1"' "$ns" "$*"
}

bed_run() {
  [[ ${#COMMAND[@]} -gt 0 ]] || die "run: no command given (put it after --)"
  [[ $INTRA == sm || $INTRA == tcp ]] || die "--intra '$INTRA': expected sm or tcp"
  [[ $SELF != *" "* ]] || die "the script's path '$SELF' has a space; Open MPI's agent option cannot hold it"
  local mpirun=${MPIRUN:-mpirun}
  command -v "$mpirun" >/dev/null || die "'$mpirun' not found (install openmpi-bin, or set MPIRUN)"
  bed_up
  local hostfile m rc btl=self,vader,tcp
  [[ $INTRA == tcp ]] && btl=self,tcp
  hostfile=$(mktemp "${TMPDIR:-/tmp}/multinode-hosts.XXXXXX")
  for ((m = 0; m < NODES; ++m)); do echo "$(node_addr "$m") slots=$RPN"; done >"$hostfile"
  say "run: $((NODES * RPN)) ranks = $NODES node(s) x $RPN, intra-node over $INTRA: ${COMMAND[*]}"
  set +e
  TAGC_BED_PREFIX=$PREFIX TAGC_BED_SUBNET=$SUBNET TAGC_RANKS_PER_NODE=$RPN TAGC_BED_NODES=$NODES \
    ip netns exec "$HUB" "$mpirun" --allow-run-as-root --oversubscribe \
    -np $((NODES * RPN)) --hostfile "$hostfile" --map-by "ppr:$RPN:node" --bind-to none \
    --mca plm_rsh_agent "$SELF __rsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$SUBNET.0/24" --mca btl_tcp_if_include "$SUBNET.0/24" --mca btl "$btl" \
    -x TAGC_RANKS_PER_NODE -x TAGC_BED_NODES "${MPI_EXTRA[@]}" "${COMMAND[@]}"
  rc=$?
  set -e
  rm -f "$hostfile"
  return "$rc"
}

bed_measure() {
  command -v mpicc >/dev/null || die "'mpicc' not found (install libopenmpi-dev)"
  local rc
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/multinode-probe.XXXXXX")  # global: the EXIT trap reads it
  trap 'rm -rf "$tmp"' EXIT
  mpicc -O2 -o "$tmp/probe" "$(dirname "$SELF")/lib/multinode_probe.c"
  local nbytes
  case $BYTES in
    *[kK]) nbytes=$((${BYTES%?} * 1024)) ;;
    *[mM]) nbytes=$((${BYTES%?} * 1024 * 1024)) ;;
    *) nbytes=$BYTES ;;
  esac
  [[ $nbytes =~ ^[1-9][0-9]*$ ]] || die "--bytes '$BYTES' is not a size (e.g. 32M)"
  NODES=2 RPN=2 COMMAND=("$tmp/probe" "$nbytes")
  set +e
  bed_run
  rc=$?
  set -e
  ((rc == 0)) || return "$rc"
  tcp_duplex "$nbytes"
}

# The link itself, without MPI: one TCP connection node 0 <-> node 1 carrying BYTES each
# way at once (python3). Full duplex: each direction gets about RATE.
tcp_duplex() {
  command -v python3 >/dev/null || { say "python3 not found: raw TCP duplex not measured"; return 0; }
  cat >"$tmp/duplex.py" <<'PY'
import socket, sys, threading, time
role, peer, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def receive(c):
    left = n
    while left > 0:
        b = c.recv(1 << 20)
        if not b: raise SystemExit("connection closed early")
        left -= len(b)
if role == "server":
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((peer, 5999)); srv.listen(1); print("ready", flush=True); c, _ = srv.accept()
else:
    c = socket.create_connection((peer, 5999))
t0 = time.perf_counter()
t = threading.Thread(target=receive, args=(c,)); t.start()
c.sendall(bytes(n)); t.join(); dt = time.perf_counter() - t0
print(f"rate tcp_duplex_{role} {n * 8 / dt / 1e6:.1f} Mbit/s ({n / 1048576:.1f} MiB each way in {dt:.3f} s)", flush=True)
c.close()
PY
  local server_out=$tmp/server.out
  ip netns exec "$(node_ns 1)" python3 "$tmp/duplex.py" server "$(node_addr 1)" "$1" >"$server_out" &
  local server=$!
  for _ in $(seq 50); do grep -q ready "$server_out" 2>/dev/null && break; sleep 0.1; done
  ip netns exec "$(node_ns 0)" python3 "$tmp/duplex.py" client "$(node_addr 1)" "$1"
  wait "$server"
  grep '^rate' "$server_out"
}

# ---- main ----------------------------------------------------------------------------
sub=${1:-}
[[ -n $sub ]] || { usage >&2; die "no subcommand (up, down, status, run, measure, rankmap)"; }
shift
case $sub in
  -h|--help|help) usage ;;
  up)
    parse_options nodes rate delay queue -- "$@"
    [[ -n $NODES ]] || die "up: --nodes is required"
    check_nodes; check_shape
    bed_up ;;
  down)
    parse_options -- "$@"
    preflight
    bed_down
    say "bed $PREFIX down" ;;
  status)
    parse_options -- "$@"
    bed_status ;;
  rankmap)
    parse_options nodes ranks-per-node -- "$@"
    [[ -n $NODES && -n $RPN ]] || die "rankmap: --nodes and --ranks-per-node are required"
    check_nodes; check_rpn
    rankmap ;;
  run)
    parse_options nodes ranks-per-node rate delay queue intra forward command -- "$@"
    [[ -n $NODES && -n $RPN ]] || die "run: --nodes and --ranks-per-node are required"
    check_nodes; check_rpn; check_shape
    bed_run ;;
  measure)
    parse_options rate delay queue intra bytes -- "$@"
    check_shape
    bed_measure ;;
  __rsh) rsh_agent "$@" ;;
  *) usage >&2; die "unknown subcommand '$sub'" ;;
esac
