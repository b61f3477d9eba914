#!/bin/busybox sh
# shellcheck shell=sh
#
# vmtest/guest-init.sh - /init of the initramfs vmtest/run builds.
#
# Runs as PID 1 under busybox. Loads the modules the root file system needs
# (listed in load order in /modules/order by vmtest/run), mounts the host's
# root file system (9p, read-only) under a tmpfs overlay, mounts the kernel's
# own modules, fresh tmpfs on /run /tmp /var/tmp, and the pseudo file systems
# tests need, then switch_roots into vmtest/guest-run.sh, which runs the
# command. Every failure here powers the VM off without printing the exit
# marker, so vmtest/run reports it as a failure.

/bin/busybox --install -s /bin
export PATH=/bin

mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

fail() {
	echo "vmtest: guest: $*"
	echo o >/proc/sysrq-trigger
	sleep 60
	exit 1
}

# shellcheck source=/dev/null
. /vmtest/config || fail "no /vmtest/config"

while read -r m; do
	insmod "/modules/$m" || fail "insmod $m failed"
done </modules/order

ninep="trans=virtio,version=9p2000.L,msize=262144,cache=loose"

mkdir -p /lower /rw /newroot
mount -t 9p -o "ro,$ninep" hostroot /lower || fail "cannot mount the host's root (9p)"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work \
	overlay /newroot || fail "cannot mount the overlay root"

n=/newroot
mount -t proc proc $n/proc
mount -t sysfs sysfs $n/sys
mount --move /dev $n/dev
mkdir -p $n/dev/pts $n/dev/shm
# What udev would add: bash's <(...) needs /dev/fd.
ln -sf /proc/self/fd $n/dev/fd
ln -sf /proc/self/fd/0 $n/dev/stdin
ln -sf /proc/self/fd/1 $n/dev/stdout
ln -sf /proc/self/fd/2 $n/dev/stderr
ln -sf /proc/kcore $n/dev/core
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $n/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $n/dev/shm
for d in run tmp var/tmp; do
	mkdir -p "$n/$d"
	mount -t tmpfs -o mode=1777 tmpfs "$n/$d"
done
chmod 0755 $n/run
mount -t bpf -o mode=0700 bpf $n/sys/fs/bpf
mount -t cgroup2 cgroup2 $n/sys/fs/cgroup
mount -t tracefs tracefs $n/sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs $n/sys/kernel/debug 2>/dev/null

kver=$(uname -r)
mkdir -p "$n/lib/modules/$kver"
mount -t 9p -o "ro,$ninep" modules "$n/lib/modules/$kver" ||
	fail "cannot mount the kernel's modules (9p)"

# Extra shares (--rwdir, --rodir, a working directory under a tmpfs):
# VMTEST_SHARES holds "tag:ro|rw:path" words, paths without spaces.
for s in $VMTEST_SHARES; do
	tag=${s%%:*}
	rest=${s#*:}
	mode=${rest%%:*}
	path=${rest#*:}
	mkdir -p "$n$path"
	opts="$mode,$ninep"
	# Writes must reach the host before power-off: no write-back caching.
	[ "$mode" = ro ] || opts="rw,trans=virtio,version=9p2000.L,msize=262144,cache=mmap"
	mount -t 9p -o "$opts" "$tag" "$n$path" ||
		fail "cannot mount share $tag at $path"
done

echo "vmtest-$VMTEST_KERNEL" | tr . - >/proc/sys/kernel/hostname
ip link set lo up

mkdir -p $n/run/vmtest
cp /vmtest/* $n/run/vmtest/
umount /proc /sys
exec switch_root $n /bin/bash /run/vmtest/guest-run.sh
