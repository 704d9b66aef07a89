#!/usr/bin/env bash
# tests/gpu/fetch-debs.sh - downloads (never installs) the Debian packages kiln's build needs into .gpu-debs/, for
# a GPU machine that has no internet and none of them: tests/gpu/run.sh unpacks them into a private sysroot
# (/tmp/kiln-sysroot) when pkg-config cannot find kiln's dependencies there. Also the cuDNN frontend's headers, into
# .gpu-debs/cudnn-frontend (scripts/fetch-cudnn-frontend.sh): the GPU machine's build of the cuDNN attention.
#
# Run on a machine with apt and internet (the dev machine), from anywhere:
#     tests/gpu/fetch-debs.sh            # -> <repo>/.gpu-debs/*.deb  (~10 MB)
# then ignore that folder in git (echo /.gpu-debs/ >> .git/info/exclude) and carry it with the device call.
# The list: the package owning each .pc file CMakeLists.txt's pkg_check_modules names, pkg-config itself, and the
# shared libraries they need at run time (Depends, followed recursively, minus what every Linux has: libc, libgcc,
# and -dev packages of private requirements: run.sh stands in for their .pc files).
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.gpu-debs}
# The modules CMakeLists.txt asks pkg-config for, mapped to the packages that own their .pc files here.
mods=$(sed -n '/pkg_check_modules(DEPS/,/)/p' CMakeLists.txt | tr ' ' '\n' | grep -v -E 'pkg_check_modules|DEPS|REQUIRED|IMPORTED_TARGET|^\)?$' | tr -d ')')
roots=(pkgconf ${KILN_EXTRA_DEBS:-})
for m in $mods; do
  pc="$(pkg-config --variable=pcfiledir "$m" 2>/dev/null)/$m.pc"
  owner=$(dpkg -S "$pc" 2>/dev/null | head -1 | cut -d: -f1) || true
  [ -z "$owner" ] && owner=$(dpkg -S "$(readlink -f "$pc")" 2>/dev/null | head -1 | cut -d: -f1) || true
  if [ -z "$owner" ]; then echo "fetch-debs: no package owns $m.pc here (scripts/install-deps.sh first?)" >&2; exit 1; fi
  roots+=("$owner")
done
skip='^(libc6|libc6-dev|libc-dev|libgcc-s1|libstdc\+\+6|libcrypt1|libcrypt-dev|linux-libc-dev|gcc-.*|cpp-.*|debconf|dpkg|perl-base|libselinux1|.*-dev-doc|.*-common|adduser|.*-doc)$'
declare -A seen is_root
for r in "${roots[@]}"; do is_root[$r]=1; done
queue=("${roots[@]}")
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}; queue=("${queue[@]:1}")
  [ -n "${seen[$p]:-}" ] && continue
  [[ $p =~ $skip ]] && continue
  [[ $p == *-dev && -z "${is_root[$p]:-}" ]] && continue # a private requirement's headers: not needed
  seen[$p]=1
  for d in $(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
             --no-enhances "$p" 2>/dev/null | awk '/^ *(Pre)?Depends:/ {print $2}' | grep -v '^<'); do
    queue+=("$d")
  done
done
mkdir -p "$DEST"
cd "$DEST"
echo "fetch-debs: ${#seen[@]} packages: ${!seen[*]}"
apt-get download "${!seen[@]}" >/dev/null
echo "fetch-debs: $(ls *.deb | wc -l) files, $(du -sh . | cut -f1) in $DEST"
# and the cuDNN frontend's headers (src/compute/cuda/cuda_cudnn.h), where CMake looks for them on the GPU machine
cd - >/dev/null
scripts/fetch-cudnn-frontend.sh "$DEST/cudnn-frontend"
