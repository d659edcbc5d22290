#!/usr/bin/env bash
# abi/update.sh: record the ABI baseline abi/lshk-<version>.dump of the C
# library (liblshk.so), which `cargo test` (tests/abi.rs) compares every build
# against with abi-compliance-checker.
#
# WHEN to run it: only on a deliberate release, i.e. after bumping `version`
# in Cargo.toml —
#   * a release that adds functions/constants (minor or patch bump): run it so
#     the new functions are protected from then on (the old baseline would
#     still pass: additions are compatible);
#   * a release that breaks the ABI: raise the MAJOR version first (the test
#     accepts incompatible changes only then; the SONAME liblshk.so.<major>
#     changes with it), then run this script and commit the new dump.
# Do NOT run it to make a failing ABI test pass without a version bump: the
# failure means old binaries linked against liblshk.so would break.
# Older dumps may stay (the test compares against the highest version that is
# not above Cargo.toml's) or be deleted.
#
# Needs: cargo, abi-dumper, perl (Debian: apt-get install abi-dumper
# abi-compliance-checker). Builds the dev profile: its full DWARF is what
# abi-dumper reads the types from.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

for tool in cargo abi-dumper perl; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found" >&2; exit 1; }
done

version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] || { echo "error: no version in Cargo.toml [package]" >&2; exit 1; }

cargo build --lib
so=target/debug/liblshk.so
[ -f "$so" ] || { echo "error: $so was not built" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
perl abi/normalize.pl --functions include/lshk.h >"$work/functions"
abi-dumper "$so" -o "$work/raw.dump" -lver "$version" -symbols-list "$work/functions" -quiet
out="abi/lshk-$version.dump"
perl abi/normalize.pl "$work/raw.dump" include/lshk.h "$version" "$out"
echo "wrote $out: review it (git diff) and commit it with the release"
