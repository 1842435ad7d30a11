#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mkguest.sh OUTDIR: the test guest for the QEMU tests and benchmarks.
#   OUTDIR/vmlinux         Debian's kernel, uncompressed (PVH boot: no
#                          decompression under TCG)
#   OUTDIR/initramfs.cpio.gz  busybox-static, the virtio-net modules in
#                          modules.dep order, iperf3 and its libraries,
#                          tests/guest/init as /init
# Rebuilt only when an input changes (kernel, busybox, iperf3, this script,
# init).  KERNEL_VERSION picks the kernel (default: the newest installed).
# Exit 77 when an input package is missing (linux-image-amd64,
# busybox-static, iperf3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: mkguest.sh OUTDIR}
mkdir -p "$out"

skip() { echo "mkguest: SKIP: $*" >&2; exit 77; }
kver=${KERNEL_VERSION:-$(ls /lib/modules 2>/dev/null | sort -V | tail -n 1)}
bz=/boot/vmlinuz-$kver
mods=/lib/modules/$kver
[ -n "$kver" ] && [ -r "$bz" ] && [ -d "$mods" ] || skip "no kernel image in /boot (apt-get install linux-image-amd64)"
bb=/bin/busybox
[ -x "$bb" ] || skip "no busybox (apt-get install busybox-static)"
ldd "$bb" >/dev/null 2>&1 && skip "busybox is dynamically linked (apt-get install busybox-static)"
iperf=$(command -v iperf3 || true)
[ -n "$iperf" ] || skip "no iperf3 (apt-get install iperf3)"
command -v cpio >/dev/null || skip "no cpio"
command -v python3 >/dev/null || skip "no python3"

wanted="failover net_failover virtio_ring virtio virtio_net virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci"
stamp=$(cat "$0" "$here/init" "$here/extract_vmlinux.py" | md5sum | cut -d' ' -f1)
stamp="$stamp $kver $(stat -c %Y:%s "$bz" "$bb" "$iperf" $(command -v ethtool || true) | tr '\n' ' ')"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] &&
   [ -f "$out/vmlinux" ] && [ -f "$out/initramfs.cpio.gz" ]; then
	exit 0
fi
rm -f "$out/stamp"
python3 "$here/extract_vmlinux.py" "$bz" "$out/vmlinux"

root=$(mktemp -d "${TMPDIR:-/tmp}/vnic-guest.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/sbin" "$root/etc" "$root/proc" "$root/sys" "$root/dev" \
	"$root/tmp" "$root/lib/modules"
cp "$bb" "$root/bin/busybox"
cp "$here/init" "$root/init"
chmod 755 "$root/init"

# Modules: each after the modules it depends on (modules.dep lists a
# module's dependencies; they load first, deepest first).
order=
add_mod() {
	local rel deps d
	rel=$(sed -n "s|^\\([^:]*/$1\\.ko\\(\\.xz\\)\\{0,1\\}\\):.*|\\1|p" "$mods/modules.dep")
	[ -n "$rel" ] || { echo "mkguest: module $1 not in $mods/modules.dep" >&2; exit 1; }
	case " $order " in *" $rel "*) return 0 ;; esac
	deps=$(sed -n "s|^$rel:||p" "$mods/modules.dep")
	for d in $deps; do
		add_mod "$(basename "$d" | sed 's/\.ko\(\.xz\)\{0,1\}$//')"
	done
	case " $order " in *" $rel "*) return 0 ;; esac
	order="$order $rel"
}
for m in $wanted; do add_mod "$m"; done
: >"$root/etc/modules.order"
for rel in $order; do
	name=$(basename "$rel")
	case "$name" in
	*.xz) xz -dc "$mods/$rel" >"$root/lib/modules/${name%.xz}"; name=${name%.xz} ;;
	*) cp "$mods/$rel" "$root/lib/modules/$name" ;;
	esac
	echo "$name" >>"$root/etc/modules.order"
done

# iperf3, ethtool when the host has it (the multiqueue cases change the
# guest's channels: issue 15), and what ldd says they need, at the same paths.
ethtool=$(command -v ethtool || true)
for bin in "$iperf" $ethtool; do
	cp "$bin" "$root/bin/$(basename "$bin")"
	for lib in $(ldd "$bin" | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p'); do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
done
case "$(uname -m)" in x86_64) mkdir -p "$root/lib64"; [ -e "$root/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/" ;; esac

(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initramfs.cpio.gz.tmp"
mv "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
echo "$stamp" >"$out/stamp"
echo "mkguest: $out/vmlinux ($kver), $out/initramfs.cpio.gz ($(wc -c <"$out/initramfs.cpio.gz") bytes, modules:$(tr '\n' ' ' <"$root/etc/modules.order"))" >&2
