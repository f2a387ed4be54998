# Shared by scripts/run, scripts/test, scripts/bench and scripts/debian-image:
# install what is missing.
# Sourced, not run.

# need_go stops with a clear message when Go is missing or too old.
need_go() {
	if ! command -v go >/dev/null 2>&1; then
		echo "Go is required: install Go $(awk '/^go /{print $2}' go.mod) or later (https://go.dev/dl/)" >&2
		exit 1
	fi
}

# has CMD is true when CMD is on PATH or, if CMD is an absolute path, exists.
has() {
	case $1 in
	/*) [ -e "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

# apt_install PACKAGE... installs Debian packages, through sudo when not
# root.
apt_install() {
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || { echo "need root or sudo to install: $*" >&2; exit 1; }
		sudo="sudo"
	fi
	echo "installing: $*" >&2
	# Wait for the dpkg lock rather than fail at once: on a machine just
	# booted, unattended-upgrades (or another script's install) may hold it.
	local wait=(-o DPkg::Lock::Timeout=600)
	# That option does not cover update's lock on the lists: a busy lists
	# lock is waited for here, up to 10 minutes; any other failure ends it.
	local out tries=0
	until out=$($sudo apt-get "${wait[@]}" update -qq 2>&1); do
		case $out in
		*"Could not get lock"*) ;;
		*) echo "$out" >&2; exit 1 ;;
		esac
		tries=$((tries + 1))
		if [ "$tries" -ge 60 ]; then echo "$out" >&2; exit 1; fi
		sleep 10
	done
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -qq --no-install-recommends "$@" >/dev/null
}

# need CMD:PACKAGE... installs, with apt-get, the Debian packages of the
# commands that are not on PATH. For a package without a command, CMD is
# the absolute path of one of its files.
need() {
	local missing=() pair
	for pair in "$@"; do
		has "${pair%%:*}" || missing+=("${pair#*:}")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	apt_install "${missing[@]}"
	for pair in "$@"; do
		has "${pair%%:*}" || { echo "${pair%%:*} still missing after installing ${pair#*:}" >&2; exit 1; }
	done
}

# need_pkg PACKAGE... installs, with apt-get, the Debian packages that dpkg
# does not list as installed: libraries and headers, which no command on
# PATH reveals (libpcap-dev: the agent compiles bpf link filters with
# libpcap, through cgo, so building it needs the headers and gcc).
need_pkg() {
	if ! command -v dpkg >/dev/null 2>&1; then
		echo "not a Debian system: make sure these are installed: $*" >&2
		return 0
	fi
	installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }
	local missing=() pkg
	for pkg in "$@"; do
		installed "$pkg" || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	apt_install "${missing[@]}"
	for pkg in "$@"; do
		installed "$pkg" || { echo "$pkg still missing after installing it" >&2; exit 1; }
	done
}
