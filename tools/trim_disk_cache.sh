#!/usr/bin/env bash
# Keeps Bazel's disk cache from filling the disk. Bazel never evicts from --disk_cache, and every
# change to a widely included header adds gigabytes (two configurations: plain and sanitized).
# When the disk is full, actions fail with their messages lost (a link ends in a bare
# "ld returned 1 exit status"), so this runs before every build of tools/test.sh.
#
# Deletes the least recently used cache files until the cache is under KILN_DISK_CACHE_MAX_GB
# (default 25) and the disk has KILN_MIN_FREE_GB free (default 12), or the cache is empty.
# Usage: tools/trim_disk_cache.sh [cache-dir]
set -euo pipefail

cache_dir="${1:-${HOME}/.cache/kiln-bazel-disk}"
max_bytes=$(( ${KILN_DISK_CACHE_MAX_GB:-25} * 1024 * 1024 * 1024 ))
min_free_bytes=$(( ${KILN_MIN_FREE_GB:-12} * 1024 * 1024 * 1024 ))
[ -d "$cache_dir" ] || exit 0

free_bytes() { df -P -B1 "$cache_dir" | awk 'NR == 2 {print $4}'; }
cache_bytes=$(du -s -B1 "$cache_dir" | awk '{print $1}')
free=$(free_bytes)
if [ "$cache_bytes" -le "$max_bytes" ] && [ "$free" -ge "$min_free_bytes" ]; then
  exit 0
fi

# The bytes to delete: enough for both limits.
excess=$(( cache_bytes - max_bytes ))
shortfall=$(( min_free_bytes - free ))
[ "$shortfall" -gt "$excess" ] && excess=$shortfall
echo "trim_disk_cache: cache $((cache_bytes >> 30)) GiB, disk free $((free >> 30)) GiB;" \
     "deleting the least recently used $(( (excess >> 30) + 1 )) GiB of $cache_dir"

# Last use is the later of access and modification time (relatime mounts update atime only
# now and then; Bazel rewrites a file when it stores it again).
list=$(mktemp)
trap 'rm -f "$list"' EXIT
find "$cache_dir" -type f -printf '%A@ %T@ %s %p\n' |
  awk '{t = ($1 > $2) ? $1 : $2; $1 = ""; $2 = ""; sub(/^  /, ""); print t, $0}' |
  sort -n > "$list"
deleted=0
while read -r _ size path; do
  [ "$deleted" -ge "$excess" ] && break
  rm -f -- "$path"
  deleted=$(( deleted + size ))
done < "$list"
echo "trim_disk_cache: deleted $((deleted >> 20)) MiB; disk free now $(( $(free_bytes) >> 30 )) GiB"
