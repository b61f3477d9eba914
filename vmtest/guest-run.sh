#!/bin/bash
#
# vmtest/guest-run.sh - PID 1 of the guest once the host's root is mounted.
#
# Runs the command vmtest/run was given (or an interactive shell) in the
# host's working directory, prints the exit marker vmtest/run looks for on
# the console, and powers the VM off. Files in /run/vmtest (written by
# vmtest/run): config (shell variables), env.sh (exports forwarded from the
# host), cmd.sh (the command, as the bash array CMD).

# shellcheck source=/dev/null
. /run/vmtest/config

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 LC_ALL=C.UTF-8
export EDGE_VMTEST=1 EDGE_VMTEST_KERNEL="$VMTEST_KERNEL"
unset TERM
# shellcheck source=/dev/null
. /run/vmtest/env.sh
# shellcheck source=/dev/null
. /run/vmtest/cmd.sh

# The kernel asks for modules through kernel.modprobe; point it at kmod's.
if [ -x /sbin/modprobe ]; then
	echo /sbin/modprobe >/proc/sys/kernel/modprobe
else
	echo "vmtest: guest: no /sbin/modprobe (install kmod): modules will not load"
fi

# Builtins only: every exec costs tens of milliseconds under TCG.
read -r osrelease </proc/sys/kernel/osrelease
read -r version </proc/sys/kernel/version
read -r uptime _ </proc/uptime
echo "vmtest: guest: kernel $osrelease ($version), up in ${uptime}s"

if ! cd "$VMTEST_CWD"; then
	echo "vmtest: guest: cannot enter $VMTEST_CWD"
	rc=1
elif [ "$VMTEST_SHELL" = 1 ]; then
	stty -F /dev/ttyS0 sane rows "$VMTEST_ROWS" cols "$VMTEST_COLS" 2>/dev/null
	echo "vmtest: guest: interactive shell; exit it (or ctrl-d) to power off," \
		"ctrl-a x kills the VM"
	setsid -c -w bash -i <>/dev/ttyS0 >&0 2>&0
	rc=$?
else
	"${CMD[@]}" </dev/null
	rc=$?
fi

sync
# On its own line, on the console and through printk (which is written out
# synchronously), so that powering off cannot cut it short.
echo
echo "$VMTEST_MARKER exit=$rc"
echo "<2>$VMTEST_MARKER exit=$rc" >/dev/kmsg
echo o >/proc/sysrq-trigger
sleep 60
