#!/bin/sh
# Build the libFuzzer target tests/fuzz/fuzz_ops.c with the core's sources.
#
#   build-fuzzer.sh TOP_SRCDIR CONFIG_H_DIR OUTPUT
#
# The compiler is $FUZZ_CC if set, else $CC when it is clang, else clang.
# Extra flags: $FUZZ_CFLAGS. Libraries: $LIBUNWIND_LIBS (default from
# pkg-config, else -lunwind).
# Exit status: 0 built, 77 no clang or no libFuzzer runtime, 1 build failed.
top=$1 confdir=$2 out=$3
if test -z "$top" || test -z "$confdir" || test -z "$out"; then
	echo "usage: $0 TOP_SRCDIR CONFIG_H_DIR OUTPUT" >&2
	exit 1
fi

is_clang() {
	"$@" --version 2>/dev/null | grep -qi clang
}

if test -n "$FUZZ_CC"; then
	cc=$FUZZ_CC
elif test -n "$CC" && is_clang $CC; then
	cc=$CC
else
	cc=clang
fi
if ! is_clang $cc; then
	echo "build-fuzzer: '$cc' is not clang; libFuzzer needs clang (Debian: clang, libclang-rt-14-dev)" >&2
	exit 77
fi

sanitize="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
outdir=$(dirname "$out")
mkdir -p "$outdir" || exit 1

# Is the libFuzzer runtime there?
probe="$outdir/fuzz-probe.$$"
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' > "$probe.c"
if ! $cc $sanitize "$probe.c" -o "$probe" >"$probe.log" 2>&1; then
	echo "build-fuzzer: $cc cannot link a -fsanitize=fuzzer program (Debian: libclang-rt-14-dev):" >&2
	sed 's/^/  /' "$probe.log" | tail -5 >&2
	rm -f "$probe" "$probe.c" "$probe.log"
	exit 77
fi
rm -f "$probe" "$probe.c" "$probe.log"

if test -z "$LIBUNWIND_LIBS"; then
	LIBUNWIND_LIBS=$(pkg-config --libs libunwind 2>/dev/null) || LIBUNWIND_LIBS=-lunwind
	test -n "$LIBUNWIND_LIBS" || LIBUNWIND_LIBS=-lunwind
fi

echo "build-fuzzer: $cc -> $out"
# Every file of src/ is part of the core (libmbcore.la).
exec $cc -std=gnu11 -g -O1 $sanitize $FUZZ_CFLAGS \
	-I"$confdir" -I"$top/src" -I"$top/include" \
	"$top"/src/*.c "$top/tests/fuzz/fuzz_ops.c" \
	$LIBUNWIND_LIBS -lpthread -ldl -o "$out"
