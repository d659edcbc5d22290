#!/usr/bin/perl
# abi/normalize.pl RAW.dump HEADER VERSION OUT.dump
#
# Turns the ABI dump that abi-dumper writes for a Rust cdylib into a dump
# that abi-compliance-checker really compares, and that does not churn.
# Used by abi/update.sh (the committed baseline) and by tests/abi.rs (the
# dump of the library just built), so both sides go through the same steps.
#
# Why it is needed (measured with abi-dumper 1.2 / abi-compliance-checker 2.3
# on rustc's DWARF):
#  * abi-dumper names a #[repr(C)] struct after its Rust path
#    (`struct lshk::ffi::index::lshk_index_params`) and, because that name is
#    not in the public header, marks it `PrivateABI`; Rust types also carry
#    no `Header`/`Source`. The checker skips such types entirely, so a changed
#    field or size of a public struct was NOT reported (only removed symbols
#    were). Here every struct named in the header gets its C name, the header
#    as its `Header`, and loses `PrivateABI`; the checker then compares
#    members, sizes and field types as it does for a C library.
#  * A Rust module path is not part of the C ABI: moving a struct or a
#    function to another module must not look like a change.
#  * Handles declared in the header as incomplete (`typedef struct lshk_index
#    lshk_index;`) are opaque to C: their Rust `_private: [u8; 0]` member and
#    size are dropped.
#  * The header's `#define NAME <literal>` values (status codes, enum-like
#    constants) are part of the ABI but invisible in DWARF: they are added as
#    the dump's `Constants`, which the checker compares (removed or changed
#    value = a problem). LSHK_VERSION_* are left out (they change on every
#    release by design).
#  * abi-dumper is run with `-symbols-list` (the header's functions, printed by
#    `normalize.pl --functions`) rather than `-public-headers`, which needs
#    ctags (only a Recommends of the Debian packages).
#  * Determinism: the compiler version, the list of Rust namespaces, source
#    file names and lines, the undefined (imported) symbols and DT_NEEDED
#    entries are dropped; only types reachable from the public functions are
#    kept; DWARF offsets used as ids (which change with any code change) are
#    replaced by ids numbered in a stable order; keys are sorted. The dump
#    contains no path of the checkout.
# Known quirk kept as is: abi-dumper 1.2 with this elfutils reads a struct
# member offset printed in decimal as hex (offset 12 is stored as '18'). The
# mapping is one-to-one, so comparisons are exact; only the numbers shown in
# the checker's HTML report are off.
use strict;
use warnings;
use Data::Dumper;
use File::Spec;

# The functions a header declares: the identifier before the first `(` of
# every line that starts in column 0 with an identifier (cbindgen writes each
# declaration so), except typedefs. `normalize.pl --functions HEADER` prints
# them, one per line: the -symbols-list given to abi-dumper.
sub header_functions {
    my ($text) = @_;
    my %f;
    for my $line (split /\n/, $text) {
        next unless $line =~ /^[A-Za-z_]/;
        next if $line =~ /^(?:typedef|extern)\b/;
        next unless $line =~ /^([^(]*?)\b([A-Za-z_]\w*)\s*\(/;
        $f{$2} = 1;
    }
    return \%f;
}

sub slurp {
    my ($p) = @_;
    open(my $fh, '<', $p) or die "cannot read $p: $!\n";
    local $/;
    return scalar <$fh>;
}

if (@ARGV == 2 && $ARGV[0] eq '--functions') {
    print "$_\n" for sort keys %{ header_functions(slurp($ARGV[1])) };
    exit 0;
}
@ARGV == 4 or die "usage: normalize.pl RAW.dump HEADER VERSION OUT.dump\n"
    . "       normalize.pl --functions HEADER\n";
my ($raw, $header, $version, $out) = @ARGV;

our $VAR1;
my $d = do(File::Spec->rel2abs($raw));
die "cannot read ABI dump $raw: " . ($@ || $! || "empty") . "\n" unless ref $d eq 'HASH';

# ---- what the header declares ----------------------------------------------
my $htext = slurp($header);
my $functions = header_functions($htext);
(my $hname = $header) =~ s{.*/}{};
my (%complete, %opaque, %constants);
$complete{$1} = 1 while $htext =~ /\btypedef\s+struct\s+(\w+)\s*\{/g;
$complete{$1} = 1 while $htext =~ /^\s*struct\s+(\w+)\s*\{/mg;
while ($htext =~ /\btypedef\s+struct\s+(\w+)\s+(\w+)\s*;/g) {
    $opaque{$1} = 1 unless $complete{$1};
}
while ($htext =~ /^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\S.*?)[ \t]*$/mg) {
    my ($n, $v) = ($1, $2);
    next if $n =~ /_VERSION_/;
    $constants{$n} = { Header => $hname, Value => $v };
}
my @public = sort(keys %complete, keys %opaque);
my $public_re = join('|', map { quotemeta } @public);

# ---- symbols ---------------------------------------------------------------
my %exported;
for my $lib (values %{ $d->{Symbols} || {} }) {
    $exported{$_} = 1 for keys %$lib;
}
# The header's functions the library exports (abi-dumper ran with
# -symbols-list, so its SymbolInfo also holds internal functions: dropped).
# A name declared in the header but not exported is simply absent: the
# checker then reports it as removed against a baseline that had it.
my %sym;    # name -> info
for my $id (sort { $a <=> $b } keys %{ $d->{SymbolInfo} || {} }) {
    my $info = $d->{SymbolInfo}{$id};
    my $name = $info->{MnglName} // $info->{ShortName};
    next unless defined $name && $functions->{$name} && $exported{$name};
    next if $sym{$name};    # the first (lowest DWARF offset) definition
    delete @{$info}{qw(NameSpace Source SourceLine Line)};
    $info->{Header} = $hname;
    $sym{$name} = $info;
}
die "none of the functions of $header found in $raw\n" unless %sym;

# ---- types: keep what the public functions reach ---------------------------
my $T = $d->{TypeInfo} || {};
my %keep;
my @todo;
for my $info (values %sym) {
    push @todo, $info->{Return} if defined $info->{Return};
    push @todo, map { $_->{type} } values %{ $info->{Param} || {} };
}
my $rename = sub {
    my $n = shift;
    return $n unless defined $n;
    $n =~ s/\b(?:\w+::)+(?=(?:$public_re)\b)//g if @public;
    return $n;
};
while (defined(my $id = shift @todo)) {
    next if $keep{$id} || !$T->{$id};
    $keep{$id} = 1;
    my $t = $T->{$id};
    $t->{Name} = $rename->($t->{Name});
    # `Copied` is abi-dumper's bookkeeping (set or not depending on the
    # order it met the type in), not ABI.
    # `PrivateABI` is abi-dumper's guess from -public-headers (absent with
    # -symbols-list); it is set below from the header instead.
    delete @{$t}{qw(NameSpace Source Line SourceLine Copied PrivateABI)};
    if (($t->{Type} // '') =~ /^(Struct|Union)$/ && ($t->{Name} // '') =~ /^(?:struct|union)\s+(\w+)$/) {
        my $c = $1;
        if ($complete{$c} || $opaque{$c}) {
            $t->{Header} = $hname;
            if ($opaque{$c}) { delete @{$t}{qw(Memb Size)}; }
        }
    }
    push @todo, $t->{BaseType} if defined $t->{BaseType};
    for my $m (values %{ $t->{Memb} || {} }) {
        push @todo, $m->{type} if defined $m->{type};
    }
    for my $p (values %{ $t->{Param} || {} }) {
        push @todo, $p->{type} if defined $p->{type};
    }
    push @todo, $t->{Return} if defined $t->{Return};
}

# Stable ids: order types by a description that does not depend on DWARF
# offsets (name, kind, size, member names), then number them from 1.
my %desc;
for my $id (keys %keep) {
    my $t = $T->{$id};
    my $m = join(',', map { $t->{Memb}{$_}{name} // '' } sort { $a <=> $b } keys %{ $t->{Memb} || {} });
    $desc{$id} = join("\x01", $t->{Name} // '', $t->{Type} // '', $t->{Size} // '', $m);
}
my %seen_desc;
for my $id (keys %desc) {
    warn "normalize.pl: two kept types look alike ($desc{$id}); their ids may churn\n"
        if $seen_desc{ $desc{$id} }++;
}
my %newid;
my $n = 0;
$newid{$_} = ++$n for sort { $desc{$a} cmp $desc{$b} || $a <=> $b } keys %keep;
my $map = sub { my $id = shift; defined $id && $newid{$id} ? "$newid{$id}" : $id };

my %types;
for my $id (keys %keep) {
    my $t = $T->{$id};
    $t->{BaseType} = $map->($t->{BaseType}) if defined $t->{BaseType};
    $t->{Return}   = $map->($t->{Return})   if defined $t->{Return};
    for my $m (values %{ $t->{Memb} || {} }, values %{ $t->{Param} || {} }) {
        $m->{type} = $map->($m->{type}) if defined $m->{type};
    }
    $types{ $newid{$id} } = $t;
}
my %syminfo;
my $s = 0;
for my $name (sort keys %sym) {
    my $info = $sym{$name};
    $info->{Return} = $map->($info->{Return}) if defined $info->{Return};
    $_->{type} = $map->($_->{type}) for values %{ $info->{Param} || {} };
    $syminfo{ ++$s } = $info;
}

(my $libname = $d->{LibraryName} // 'lib') =~ s{.*/}{};
my %dump = (
    ABI_DUMPER_VERSION => $d->{ABI_DUMPER_VERSION},
    ABI_DUMP_VERSION   => $d->{ABI_DUMP_VERSION},
    Arch               => $d->{Arch},
    Compiler           => 'rustc (version not recorded: see abi/normalize.pl)',
    Constants          => \%constants,
    Headers            => { $hname => 1 },
    Language           => 'C',
    LibraryName        => $libname,
    LibraryVersion     => $version,
    MissedOffsets      => $d->{MissedOffsets},
    MissedRegs         => $d->{MissedRegs},
    PublicABI          => '1',
    SymbolInfo         => \%syminfo,
    SymbolVersion      => $d->{SymbolVersion} || {},
    Symbols            => { $libname => { map { $_ => 1 } keys %sym } },
    Target             => $d->{Target},
    TypeInfo           => \%types,
    WordSize           => $d->{WordSize},
);
delete $dump{$_} for grep { !defined $dump{$_} } keys %dump;

local $Data::Dumper::Sortkeys = sub { [ sort { ($a =~ /^\d+$/ && $b =~ /^\d+$/) ? $a <=> $b : $a cmp $b } keys %{ $_[0] } ] };
local $Data::Dumper::Indent   = 1;
local $Data::Dumper::Useqq    = 0;
my $tmp = "$out.tmp$$";
open(my $o, '>', $tmp) or die "cannot write $tmp: $!\n";
print $o Dumper(\%dump);
close($o) or die "cannot write $tmp: $!\n";
rename($tmp, $out) or die "cannot rename $tmp to $out: $!\n";
printf "normalized: %d public functions, %d types, %d constants -> %s\n",
    scalar(keys %syminfo), scalar(keys %types), scalar(keys %constants), $out;
