#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""extract_vmlinux.py BZIMAGE OUT: write the uncompressed kernel (an ELF
vmlinux, bootable through QEMU's PVH entry) found in a bzImage's xz
payload.  Stdlib only; fails clearly when the image is not xz-packed."""
import lzma
import sys

XZ_MAGIC = b"\xfd7zXZ\x00"


def extract(data):
    start = 0
    while True:
        i = data.find(XZ_MAGIC, start)
        if i < 0:
            raise SystemExit("extract_vmlinux: no xz payload holding an ELF image found")
        dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        try:
            out = dec.decompress(data[i:])
        except lzma.LZMAError:
            start = i + 1
            continue
        if dec.eof and out[:4] == b"\x7fELF":
            return out
        start = i + 1


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: extract_vmlinux.py BZIMAGE OUT")
    with open(sys.argv[1], "rb") as f:
        out = extract(f.read())
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    import os
    os.replace(tmp, sys.argv[2])


if __name__ == "__main__":
    main()
