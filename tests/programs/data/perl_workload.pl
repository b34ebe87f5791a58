# perl_workload.pl — hash/regex/string-heavy Perl for perl.test.
# Deterministic output: keys are always sorted before printing.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);

my $seed = 42;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed; }

# 1. Hash churn: build, grow, delete.
my %h;
for my $i (1 .. 300_000) {
    my $k = "key" . (rnd() % 100_000);
    $h{$k} .= chr(97 + $i % 26);
    delete $h{"key" . (rnd() % 100_000)} if $i % 4 == 0;
}
my $total = 0;
$total += length $h{$_} for keys %h;
print "hash keys ", scalar(keys %h), " total length $total\n";
print "hash digest ", md5_hex(join ",", map { "$_=$h{$_}" } sort keys %h), "\n";
%h = ();

# 2. Nested structures: hash of arrays of hashes.
my %db;
for my $i (1 .. 40_000) {
    my $dept = "d" . ($i % 137);
    push @{ $db{$dept} }, { id => $i, name => "emp$i", tags => [ map { "t$_" } 1 .. ($i % 6) ] };
}
my @summary = map { sprintf "%s:%d:%d", $_, scalar @{ $db{$_} }, scalar(map { @{ $_->{tags} } } @{ $db{$_} }) }
    sort keys %db;
print "departments ", scalar(@summary), " ", md5_hex(join ";", @summary), "\n";
undef %db;

# 3. Regexes: matching, captures, substitution, split, tr.
my $text = join "\n", map { sprintf "%05d user%d\@host%d.example.org %s value=%d.%02d",
    $_, $_ * 7, $_ % 13, ("lorem", "ipsum", "dolor", "sit")[$_ % 4], $_ * 3, $_ % 100 } 1 .. 60_000;
print "text length ", length($text), "\n";
my @emails = $text =~ /(\w+\@[\w.]+)/g;
print "emails ", scalar(@emails), " last $emails[-1]\n";
my %byhost;
$byhost{$1}++ while $text =~ /\@(host\d+)/g;
print "hosts ", join(",", map { "$_=$byhost{$_}" } sort keys %byhost), "\n";
(my $t2 = $text) =~ s/value=(\d+)\.(\d+)/"v<" . ($1 + $2) . ">"/ge;
print "substituted ", length($t2), " ", md5_hex($t2), "\n";
my $vowels = ($text =~ tr/aeiou//);
print "vowels $vowels\n";
my @fields = split /[\s=.@]+/, $text;
print "fields ", scalar(@fields), "\n";
my $count = () = $text =~ /\b(?:lorem|dolor)\b/g;
print "alternation matches $count\n";

# 4. String building, sprintf, reverse, sort with custom comparators.
my $s = "";
for my $i (1 .. 200_000) {
    $s .= sprintf("%x", $i);
    $s = substr($s, 1000) if length($s) > 50_000;
}
print "string ", length($s), " ", substr($s, -16), "\n";
my @words = map { join "", map { chr(97 + rnd() % 26) } 1 .. (3 + $_ % 8) } 1 .. 100_000;
my @sorted = sort { length($a) <=> length($b) or $a cmp $b } @words;
print "sorted first $sorted[0] last $sorted[-1]\n";
my %seen;
my @uniq = grep { !$seen{$_}++ } @words;
print "unique words ", scalar(@uniq), "\n";
print "reversed ", md5_hex(join "", reverse @words), "\n";

# 5. Closures and references (many small objects freed at scope exit).
my @subs = map { my $n = $_; sub { return $n * $_[0] } } 1 .. 50_000;
my $acc = 0;
$acc += $_->(3) for @subs;
print "closures $acc\n";
for my $round (1 .. 5) {
    my @cycle;
    for (1 .. 20_000) { my %a; my %b = (a => \%a); $a{b} = \%b; push @cycle, \%a; delete $a{b}; }
}
print "done\n";
